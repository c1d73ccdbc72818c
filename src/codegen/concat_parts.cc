#include "codegen/concat_parts.h"

#include <algorithm>

namespace tilefuse {

namespace {

// `index` as (i0 / divisor) % extent; false for anything else.
bool AsPosition(const Index& index, int64_t* divisor, int64_t* extent) {
  using K = IndexExpr::Kind;
  if (!index || index->kind != K::kMod) return false;
  *extent = index->b->value;
  const Index& x = index->a;
  if (x->kind == K::kVar && x->value == 0) {
    *divisor = 1;
    return true;
  }
  if (x->kind == K::kDiv && x->a->kind == K::kVar && x->a->value == 0) {
    *divisor = x->b->value;
    return true;
  }
  return false;
}

// A `less(position, constant)` test: the position index and the cut (in elements of i0).
bool AsPositionTest(const Kernel& k, const ScalarValue& v, int64_t* divisor, int64_t* extent, int64_t* cut) {
  if (v.kind != ScalarValue::Kind::kOp || v.op != OpCode::kLess) return false;
  const ScalarValue& position = k.values[v.args[0]];
  const ScalarValue& bound = k.values[v.args[1]];
  if (position.kind != ScalarValue::Kind::kIndex || bound.kind != ScalarValue::Kind::kConstant) return false;
  if (!AsPosition(position.index, divisor, extent)) return false;
  *cut = static_cast<int64_t>(bound.constant) * *divisor;
  return bound.constant == static_cast<double>(static_cast<int64_t>(bound.constant));
}

bool MultipleOf(const Index& e, int64_t m) {
  using K = IndexExpr::Kind;
  switch (e->kind) {
    case K::kConst: return e->value % m == 0;
    case K::kMul: return e->b->value % m == 0 || MultipleOf(e->a, m);
    case K::kAdd: return MultipleOf(e->a, m) && MultipleOf(e->b, m);
    default: return false;
  }
}

// Counts the terms of sum `e` that are exactly `var`; false when another term uses `var` or
// is not a multiple of `align`.
bool SplitSum(const Index& e, int var, int64_t align, int* var_terms) {
  if (e->kind == IndexExpr::Kind::kAdd) return SplitSum(e->a, var, align, var_terms) && SplitSum(e->b, var, align, var_terms);
  if (e->kind == IndexExpr::Kind::kVar && e->value == var) {
    ++*var_terms;
    return true;
  }
  return !UsesVar(e, var) && MultipleOf(e, align);
}

}  // namespace

ConcatParts FindConcatParts(const Kernel& k, int vector) {
  ConcatParts parts;
  if (!k.reductions.empty() || vector < 2) return parts;
  std::vector<int64_t> cuts;
  for (size_t i = 0; i < k.values.size(); ++i) {
    const ScalarValue& v = k.values[i];
    if (v.kind == ScalarValue::Kind::kRandom || ((v.kind == ScalarValue::Kind::kLoad) && UsesValue(v.index))) return {};
    int64_t divisor = 0, extent = 0, cut = 0;
    if (!AsPositionTest(k, v, &divisor, &extent, &cut)) continue;
    int64_t period = divisor * extent;
    if (parts.period != 0 && parts.period != period) return {};
    if (period % vector != 0 || cut <= 0 || cut >= period || k.outer % period != 0) return {};
    parts.period = period;
    // A cut inside a vector (K = 147 padded to 148: the zero column's cut at 147) makes the
    // vector around it a part of its own, whose elements test their position one by one; the
    // parts on either side still know their answer.
    cuts.push_back(cut / vector * vector);
    if (cut % vector != 0) cuts.push_back((cut / vector + 1) * vector);
    parts.comparisons.push_back(static_cast<int>(i));
  }
  if (cuts.empty()) return {};
  for (const KernelStore& s : k.stores)
    if (UsesValue(s.index)) return {};
  cuts.push_back(0);
  std::erase_if(cuts, [&](int64_t c) { return c >= parts.period; });
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  if (cuts.size() < 2) return {};  // one vector a period, holding the cut: nothing decided a vector
  parts.cuts = cuts;
  return parts;
}

Index PartElement(const ConcatParts& parts, int part, int64_t elements) {
  int64_t lo = parts.cuts[part];
  int64_t hi = part + 1 < static_cast<int>(parts.cuts.size()) ? parts.cuts[part + 1] : parts.period;
  Index q = IndexVar(1, elements / parts.period), r = IndexVar(0, hi - lo);
  return IndexAdd(IndexAdd(IndexMul(q, parts.period), IndexConst(lo)), r);
}

int KnownInPart(const Kernel& k, const ConcatParts& parts, int part, int value, int64_t elements) {
  int64_t divisor = 0, extent = 0, cut = 0;
  if (!AsPositionTest(k, k.values[value], &divisor, &extent, &cut)) return -1;
  Index position = SubstituteVar(k.values[k.values[value].args[0]].index, 0, PartElement(parts, part, elements));
  int64_t bound = cut / divisor;
  if (position->max < bound) return 1;
  if (position->min >= bound) return 0;
  return -1;
}

bool ContiguousAlignedIn(const Index& index, int var, int64_t align) {
  int var_terms = 0;
  return SplitSum(index, var, align, &var_terms) && var_terms == 1;
}

}  // namespace tilefuse
