#include "codegen/index_expr.h"

#include <algorithm>
#include <fmt/format.h>

#include "support/check.h"

namespace tilefuse {

namespace {

Index Make(IndexExpr::Kind kind, int64_t value, Index a, Index b, int64_t min, int64_t max) {
  return std::make_shared<const IndexExpr>(IndexExpr{kind, value, std::move(a), std::move(b), min, max, {}});
}

bool IsConst(const Index& e, int64_t c) { return e->kind == IndexExpr::Kind::kConst && e->value == c; }

// A constant's expression in the symbols (its value where it has none).
SymExpr SizeOf(const Index& c) { return c->size.IsConstant() ? SymExpr::Constant(c->value) : c->size; }

// value = a / c where the symbols' expressions divide exactly; else the value alone.
Index Quotient(int64_t value, const Index& a, const Index& c) {
  std::optional<SymExpr> q = SizeOf(a).DividedBy(SizeOf(c));
  return q ? IndexSize(value, *q) : IndexConst(value);
}

// Splits `a` into (multiple of c) + remainder when the remainder is provably in [0, c):
// a = q*c + r. Returns false when no such split is visible.
bool SplitByMultiple(const Index& a, const Index& c, Index* q, Index* r) {
  if (a->kind == IndexExpr::Kind::kMul && a->b->kind == IndexExpr::Kind::kConst && a->b->value % c->value == 0) {
    *q = IndexMul(a->a, Quotient(a->b->value / c->value, a->b, c));
    *r = IndexConst(0);
    return true;
  }
  // A constant multiple of c (a concat part's start: row·151296 + 768 over rows of 768).
  if (a->kind == IndexExpr::Kind::kConst && a->size.IsConstant() && a->value % c->value == 0) {
    *q = IndexConst(a->value / c->value);
    *r = IndexConst(0);
    return true;
  }
  if (a->kind == IndexExpr::Kind::kAdd) {
    Index q1, r1, q2, r2;
    // Both terms split: their quotients add, and so do their remainders where the sum stays below c.
    if (SplitByMultiple(a->a, c, &q1, &r1) && SplitByMultiple(a->b, c, &q2, &r2)) {
      Index rest = IndexAdd(r1, r2);
      if (rest->min >= 0 && rest->max < c->value) {
        *q = IndexAdd(q1, q2);
        *r = rest;
        return true;
      }
    }
    if (SplitByMultiple(a->a, c, &q1, &r1)) {
      Index rest = IndexAdd(r1, a->b);
      if (rest->min >= 0 && rest->max < c->value) {
        *q = q1;
        *r = rest;
        return true;
      }
    }
  }
  return false;
}

// Splits `a` into q*c + rest with q and rest both non-negative, rest of any size: then
// a / c = q + rest / c and a % c = rest % c (floor division of non-negative values).
// ((i0*25 + i1) / 5 with i1 in [0, 25): i0*5 + i1/5, where SplitByMultiple needs i1 < 5.)
bool SplitOffMultiple(const Index& a, const Index& c, Index* q, Index* rest) {
  if (a->kind != IndexExpr::Kind::kAdd) return false;
  Index q1, r1;
  if (!SplitByMultiple(a->a, c, &q1, &r1)) return false;
  Index r = IndexAdd(r1, a->b);
  if (q1->min < 0 || r->min < 0) return false;
  *q = q1;
  *rest = r;
  return true;
}

}  // namespace

Index IndexVar(int id, int64_t extent) { return Make(IndexExpr::Kind::kVar, id, nullptr, nullptr, 0, std::max<int64_t>(0, extent - 1)); }
Index IndexConst(int64_t value) { return Make(IndexExpr::Kind::kConst, value, nullptr, nullptr, value, value); }
Index IndexSize(int64_t value, const SymExpr& size) {
  if (size.IsConstant()) return IndexConst(value);
  return std::make_shared<const IndexExpr>(IndexExpr{IndexExpr::Kind::kConst, value, nullptr, nullptr, value, value, size});
}
Index IndexValue(int value_id, int64_t lo, int64_t hi) { return Make(IndexExpr::Kind::kValue, value_id, nullptr, nullptr, lo, hi); }

// (x / c) * c + x % c = x: what ravel(unravel(x)) leaves behind.
bool IsQuotientTimesDivisor(const Index& a, const Index& b) {
  using K = IndexExpr::Kind;
  return a->kind == K::kMul && a->a->kind == K::kDiv && a->a->b->value == a->b->value && b->kind == K::kMod &&
         b->b->value == a->b->value && SameIndex(a->a->a, b->a);
}

Index IndexAdd(const Index& a, const Index& b) {
  using K = IndexExpr::Kind;
  if (IsConst(a, 0) && a->size.IsConstant()) return b;
  if (IsConst(b, 0) && b->size.IsConstant()) return a;
  if (IsQuotientTimesDivisor(a, b)) return a->a->a;
  if (a->kind == K::kConst && b->kind == K::kConst) return IndexSize(a->value + b->value, SizeOf(a) + SizeOf(b));
  if (a->kind == K::kConst) return IndexAdd(b, a);  // constants to the right
  if (b->kind == K::kConst && a->kind == K::kAdd && a->b->kind == K::kConst)  // (x + c1) + c2 = x + (c1 + c2)
    return IndexAdd(a->a, IndexSize(a->b->value + b->value, SizeOf(a->b) + SizeOf(b)));
  return Make(K::kAdd, 0, a, b, a->min + b->min, a->max + b->max);
}

Index IndexMul(const Index& a, int64_t c) { return IndexMul(a, IndexConst(c)); }
Index IndexDiv(const Index& a, int64_t c) { return IndexDiv(a, IndexConst(c)); }
Index IndexMod(const Index& a, int64_t c) { return IndexMod(a, IndexConst(c)); }

Index IndexMul(const Index& a, const Index& c) {
  TF_CHECK(c->kind == IndexExpr::Kind::kConst);
  if (c->value == 0 || IsConst(a, 0)) return IndexConst(0);
  if (c->value == 1) return a;
  if (a->kind == IndexExpr::Kind::kConst) return IndexSize(a->value * c->value, SizeOf(a) * SizeOf(c));
  if (a->kind == IndexExpr::Kind::kMul && a->b->kind == IndexExpr::Kind::kConst)
    return IndexMul(a->a, IndexSize(a->b->value * c->value, SizeOf(a->b) * SizeOf(c)));
  int64_t lo = a->min * c->value, hi = a->max * c->value;
  return Make(IndexExpr::Kind::kMul, 0, a, c, std::min(lo, hi), std::max(lo, hi));
}

Index IndexDiv(const Index& a, const Index& c) {
  TF_CHECK(c->kind == IndexExpr::Kind::kConst && c->value > 0);
  if (c->value == 1) return a;
  if (a->kind == IndexExpr::Kind::kConst) return a->value % c->value == 0 ? Quotient(a->value / c->value, a, c) : IndexConst(a->value / c->value);
  if (a->min >= 0 && a->max < c->value) return IndexConst(0);
  Index q, r;
  if (SplitByMultiple(a, c, &q, &r)) return q;
  if (SplitOffMultiple(a, c, &q, &r)) return IndexAdd(q, IndexDiv(r, c));
  return Make(IndexExpr::Kind::kDiv, 0, a, c, a->min / c->value, a->max / c->value);
}

Index IndexMod(const Index& a, const Index& c) {
  TF_CHECK(c->kind == IndexExpr::Kind::kConst && c->value > 0);
  if (c->value == 1) return IndexConst(0);
  if (a->kind == IndexExpr::Kind::kConst) return IndexConst(a->value % c->value);
  if (a->min >= 0 && a->max < c->value) return a;
  Index q, r;
  if (SplitByMultiple(a, c, &q, &r)) return r;
  if (SplitOffMultiple(a, c, &q, &r)) return IndexMod(r, c);
  return Make(IndexExpr::Kind::kMod, 0, a, c, 0, c->value - 1);
}

Index IndexClamp(const Index& a, int64_t lo, int64_t hi) { return IndexClamp(a, lo, IndexConst(hi)); }

Index IndexClamp(const Index& a, int64_t lo, const Index& hi) {
  TF_CHECK(hi->kind == IndexExpr::Kind::kConst);
  if (a->min >= lo && a->max <= hi->value) return a;
  if (a->max < lo) return IndexConst(lo);  // entirely below or above: one bound
  if (a->min > hi->value) return hi;
  return Make(IndexExpr::Kind::kClamp, lo, a, hi, lo, hi->value);
}

bool UsesVar(const Index& a, int id) {
  if (!a) return false;
  if (a->kind == IndexExpr::Kind::kVar) return a->value == id;
  return UsesVar(a->a, id) || UsesVar(a->b, id);
}

namespace {

Index DimSize(const std::vector<int64_t>& shape, const std::vector<SymExpr>* sizes, size_t d) {
  if (!sizes) return IndexConst(shape[d]);
  TF_CHECK(sizes->size() == shape.size());
  return IndexSize(shape[d], (*sizes)[d]);
}

}  // namespace

Index Ravel(const std::vector<Index>& multi, const std::vector<int64_t>& shape, const std::vector<SymExpr>* sizes) {
  TF_CHECK(multi.size() == shape.size());
  Index flat = IndexConst(0);
  for (size_t d = 0; d < shape.size(); ++d) flat = IndexAdd(IndexMul(flat, DimSize(shape, sizes, d)), multi[d]);
  return flat;
}

std::vector<Index> Unravel(const Index& flat, const std::vector<int64_t>& shape, const std::vector<SymExpr>* sizes) {
  // Nested divisions (x / c1 / c2, not x / (c1*c2)) keep the structure Ravel's
  // simplification recognises.
  std::vector<Index> multi(shape.size());
  Index rest = flat;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    const size_t u = static_cast<size_t>(d);
    multi[u] = d == 0 ? rest : IndexMod(rest, DimSize(shape, sizes, u));
    if (shape[u] == 1) multi[u] = IndexConst(0);
    if (d > 0) rest = IndexDiv(rest, DimSize(shape, sizes, u));
  }
  return multi;
}

std::set<int> IndexSymbols(const Index& index) {
  if (!index) return {};
  std::set<int> ids = index->size.Symbols();
  ids.merge(IndexSymbols(index->a));
  ids.merge(IndexSymbols(index->b));
  return ids;
}

std::string PrintIndex(const Index& e, const std::vector<std::string>& vars) {
  switch (e->kind) {
    case IndexExpr::Kind::kConst: return e->size.IsConstant() ? fmt::format("{}", e->value) : "(" + e->size.Print("tf_sym") + ")";
    case IndexExpr::Kind::kVar: return vars.at(e->value);
    case IndexExpr::Kind::kValue: return fmt::format("v{}", e->value);
    case IndexExpr::Kind::kAdd: return fmt::format("({} + {})", PrintIndex(e->a, vars), PrintIndex(e->b, vars));
    case IndexExpr::Kind::kMul: return fmt::format("{} * {}", PrintIndex(e->a, vars), PrintIndex(e->b, vars));
    case IndexExpr::Kind::kDiv: return fmt::format("({} / {})", PrintIndex(e->a, vars), PrintIndex(e->b, vars));
    case IndexExpr::Kind::kMod: return fmt::format("({} % {})", PrintIndex(e->a, vars), PrintIndex(e->b, vars));
    case IndexExpr::Kind::kClamp:
      return fmt::format("tf_clamp({}, {}, {})", PrintIndex(e->a, vars), e->value, PrintIndex(e->b, vars));
  }
  return "?";
}

bool SameIndex(const Index& a, const Index& b) {
  if (a == b) return true;
  if (!a || !b || a->kind != b->kind || a->value != b->value) return false;
  return SameIndex(a->a, b->a) && SameIndex(a->b, b->b);
}

}  // namespace tilefuse

namespace tilefuse {

bool AsAffine(const Index& e, AffineIndex* out) {
  using K = IndexExpr::Kind;
  switch (e->kind) {
    case K::kConst: *out = {0, 0, e->value}; return true;
    case K::kVar:
      if (e->value > 1) return false;
      *out = {e->value == 0 ? 1 : 0, e->value == 1 ? 1 : 0, 0};
      return true;
    case K::kAdd: {
      AffineIndex a, b;
      if (!AsAffine(e->a, &a) || !AsAffine(e->b, &b)) return false;
      *out = {a.c0 + b.c0, a.c1 + b.c1, a.offset + b.offset};
      return true;
    }
    case K::kMul: {
      AffineIndex a;
      if (e->b->kind != K::kConst || !AsAffine(e->a, &a)) return false;
      int64_t c = e->b->value;
      *out = {a.c0 * c, a.c1 * c, a.offset * c};
      return true;
    }
    default: return false;
  }
}

namespace {

struct LinearForm {
  std::vector<LinearTerm> terms;
  int64_t offset = 0;
  int64_t Min() const {
    int64_t m = offset;
    for (const LinearTerm& t : terms) m += std::min<int64_t>(0, t.coefficient * (t.var_max / t.divisor));
    return m;
  }
  int64_t Max() const {
    int64_t m = offset;
    for (const LinearTerm& t : terms) m += std::max<int64_t>(0, t.coefficient * (t.var_max / t.divisor));
    return m;
  }
  void Add(const LinearTerm& term) {
    for (LinearTerm& t : terms)
      if (t.var == term.var && t.divisor == term.divisor) {
        t.coefficient += term.coefficient;
        return;
      }
    terms.push_back(term);
  }
};

// Splits `a` into the part whose coefficients are multiples of `divisor` and the rest.
void Split(const LinearForm& a, int64_t divisor, LinearForm* high, LinearForm* low) {
  const int64_t low_offset = ((a.offset % divisor) + divisor) % divisor;
  high->offset = a.offset - low_offset;
  low->offset = low_offset;
  for (const LinearTerm& t : a.terms) (t.coefficient % divisor == 0 ? high : low)->Add(t);
}

bool Linearize(const Index& e, LinearForm* out) {
  using K = IndexExpr::Kind;
  switch (e->kind) {
    case K::kConst: out->offset = e->value; return true;
    case K::kVar: out->terms = {{static_cast<int>(e->value), 1, 1, e->max}}; return true;
    case K::kAdd: {
      LinearForm b;
      if (!Linearize(e->a, out) || !Linearize(e->b, &b)) return false;
      for (const LinearTerm& t : b.terms) out->Add(t);
      out->offset += b.offset;
      return true;
    }
    case K::kMul: {
      if (e->b->kind != K::kConst || !Linearize(e->a, out)) return false;
      for (LinearTerm& t : out->terms) t.coefficient *= e->b->value;
      out->offset *= e->b->value;
      return true;
    }
    case K::kDiv: case K::kMod: {
      const int64_t divisor = e->b->value;
      LinearForm a, high, low;
      if (!Linearize(e->a, &a)) return false;
      Split(a, divisor, &high, &low);
      // (high + low) / d = high / d and (high + low) % d = low when 0 <= low < d.
      if (low.Min() >= 0 && low.Max() < divisor) {
        if (e->kind == K::kMod) {
          *out = std::move(low);
          return true;
        }
        for (LinearTerm& t : high.terms) t.coefficient /= divisor;
        high.offset /= divisor;
        *out = std::move(high);
        return true;
      }
      // A variable divided: a coordinate of its own (v / d as one term).
      if (e->kind == K::kDiv && a.offset == 0 && a.terms.size() == 1 && a.terms[0].coefficient == 1 && a.terms[0].divisor == 1) {
        out->terms = {{a.terms[0].var, divisor, 1, a.terms[0].var_max}};
        return true;
      }
      return false;
    }
    default: return false;
  }
}

}  // namespace

bool AsLinearTerms(const Index& index, std::vector<LinearTerm>* terms, int64_t* offset) {
  LinearForm form;
  if (!Linearize(index, &form)) return false;
  std::erase_if(form.terms, [](const LinearTerm& t) { return t.coefficient == 0; });
  *terms = std::move(form.terms);
  *offset = form.offset;
  return true;
}

bool UsesValue(const Index& e) {
  if (!e) return false;
  return e->kind == IndexExpr::Kind::kValue || UsesValue(e->a) || UsesValue(e->b);
}

}  // namespace tilefuse

namespace tilefuse {

Index SubstituteVar(const Index& index, int id, const Index& replacement) {
  if (!index || !UsesVar(index, id)) return index;
  using K = IndexExpr::Kind;
  switch (index->kind) {
    case K::kVar: return replacement;  // UsesVar: it is variable `id`
    case K::kAdd: return IndexAdd(SubstituteVar(index->a, id, replacement), SubstituteVar(index->b, id, replacement));
    case K::kMul: return IndexMul(SubstituteVar(index->a, id, replacement), index->b);
    case K::kDiv: return IndexDiv(SubstituteVar(index->a, id, replacement), index->b);
    case K::kMod: return IndexMod(SubstituteVar(index->a, id, replacement), index->b);
    case K::kClamp: return IndexClamp(SubstituteVar(index->a, id, replacement), index->value, index->b);
    case K::kConst: case K::kValue: return index;
  }
  TF_UNREACHABLE("index kind");
}

std::optional<int64_t> EvaluateIndex(const Index& index, const std::vector<int64_t>& vars) {
  using K = IndexExpr::Kind;
  if (index->kind == K::kConst) return index->value;
  if (index->kind == K::kVar) {
    if (index->value < 0 || index->value >= static_cast<int64_t>(vars.size())) return std::nullopt;
    return vars[index->value];
  }
  if (index->kind == K::kValue) return std::nullopt;
  std::optional<int64_t> a = EvaluateIndex(index->a, vars);
  if (!a) return std::nullopt;
  switch (index->kind) {
    case K::kMul: return *a * index->b->value;
    case K::kDiv: return *a / index->b->value;  // (a >= 0: floor)
    case K::kMod: return *a % index->b->value;
    case K::kClamp: return std::min(std::max(*a, index->value), index->b->value);
    case K::kAdd: {
      std::optional<int64_t> b = EvaluateIndex(index->b, vars);
      if (!b) return std::nullopt;
      return *a + *b;
    }
    default: return std::nullopt;
  }
}

}  // namespace tilefuse
