#include "codegen/transposed_tiles.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <set>

namespace tilefuse {

namespace {

// Shorter dims gain little from a tile: a warp's flat loads over an output row of 8 elements
// already read 8 runs, each contiguous; and a 64-wide tile over them would idle most threads.
constexpr int64_t kMinTiledExtent = 16;
// A transposed operand smaller than a 64 x 64 tile sits in L1 after its first reads: the flat
// template's scattered loads then cost little.
constexpr int64_t kMinStagedElements = 64 * 64;
// Each staged load holds a tile in shared memory; four fit in 48 KB at 32 x 32 even for
// 8-byte elements. Further transposed loads read global memory at their own index.
constexpr size_t kMaxStagedLoads = 4;

// (i0 / scale) % modulus (modulus 0: none): the pieces lowering's unravelling leaves, with
// what scale and modulus are in the model's symbols (constants where unknown).
struct Piece {
  int64_t scale = 1, modulus = 0;
  SymExpr scale_size = SymExpr::Constant(1), modulus_size;
};

// A constant's size in the symbols (its value where it has none).
SymExpr ConstSize(const Index& c) { return c->size.IsConstant() ? SymExpr::Constant(c->value) : c->size; }

bool AsPiece(const Index& e, int var, Piece* p) {
  using K = IndexExpr::Kind;
  if (e->kind == K::kVar) {
    *p = Piece{};
    return e->value == var;
  }
  if (e->kind != K::kDiv && e->kind != K::kMod) return false;
  Piece in;
  if (!AsPiece(e->a, var, &in)) return false;
  const int64_t c = e->b->value;
  const SymExpr c_size = ConstSize(e->b);
  if (in.modulus != 0 && in.modulus % c != 0) return false;  // cuts across a dim: not a piece
  if (e->kind == K::kMod) {
    *p = Piece{in.scale, c, in.scale_size, c_size};
    return true;
  }
  std::optional<SymExpr> rest = in.modulus != 0 ? in.modulus_size.DividedBy(c_size) : SymExpr::Constant(0);
  *p = Piece{in.scale * c, in.modulus / c, in.scale_size * c_size, rest ? *rest : SymExpr::Constant(in.modulus / c)};
  return true;
}

// Where the pieces of `e` cut loop variable `var` (each piece: at its scale, and its scale
// times its modulus), each cut with the sizes it was given in the symbols.
void CollectCuts(const Index& e, int var, std::map<int64_t, std::vector<SymExpr>>* cuts) {
  if (!e) return;
  if (Piece p; AsPiece(e, var, &p)) {
    (*cuts)[p.scale].push_back(p.scale_size);
    if (p.modulus != 0) (*cuts)[p.scale * p.modulus].push_back(p.scale_size * p.modulus_size);
    return;
  }
  CollectCuts(e->a, var, cuts);
  CollectCuts(e->b, var, cuts);
}

// The one size the cut at `value` was given that stands for it at `symbols`, or the constant
// (none, or several that disagree).
SymExpr CutSize(int64_t value, const std::vector<SymExpr>& given, const std::vector<int64_t>& symbols) {
  std::optional<SymExpr> found;
  for (const SymExpr& s : given) {
    if (!s.StandsFor(value, symbols)) continue;
    if (found && !(*found == s)) return SymExpr::Constant(value);
    found = s;
  }
  return found ? *found : SymExpr::Constant(value);
}

struct AffineLoad {
  StagedLoad load;
  int64_t bytes = 0;  // of the buffer it reads
};

std::vector<AffineLoad> AffineLoads(const Kernel& k, const std::vector<int64_t>& dims) {
  std::vector<AffineLoad> loads;
  for (size_t v = 0; v < k.values.size(); ++v) {
    const ScalarValue& value = k.values[v];
    if (value.kind != ScalarValue::Kind::kLoad) continue;
    AffineLoad l{{static_cast<int>(v), {}, 0}, k.buffers[value.buffer].elements * DTypeSize(value.dtype)};
    if (CoordinateCoefficients(InCoordinates(value.index, dims), dims.size(), &l.load.coefficients, &l.load.offset)) loads.push_back(l);
  }
  return loads;
}

// Merges dims k and k + 1 wherever every affine load reads them as one (the coefficient of k
// is that of k + 1 times its extent): the output always does.
void MergeAdjacentDims(std::vector<int64_t>* dims, std::vector<SymExpr>* sizes, std::vector<AffineLoad>* loads) {
  for (size_t d = 0; d + 1 < dims->size();) {
    const int64_t extent = (*dims)[d + 1];
    bool mergeable = std::all_of(loads->begin(), loads->end(),
                                 [&](const AffineLoad& l) { return l.load.coefficients[d] == l.load.coefficients[d + 1] * extent; });
    if (!mergeable) {
      ++d;
      continue;
    }
    (*dims)[d] *= extent;
    dims->erase(dims->begin() + static_cast<std::ptrdiff_t>(d) + 1);
    (*sizes)[d] = (*sizes)[d] * (*sizes)[d + 1];
    sizes->erase(sizes->begin() + static_cast<std::ptrdiff_t>(d) + 1);
    for (AffineLoad& l : *loads) l.load.coefficients.erase(l.load.coefficients.begin() + static_cast<std::ptrdiff_t>(d));
  }
}

// The dim a transposed load reads contiguously, or -1: the output's innermost dim moves it by
// more than one element and another dim by exactly one (and it is large enough to stage).
int ContiguousDimOfTransposed(const Kernel& k, const AffineLoad& l) {
  const std::vector<int64_t>& c = l.load.coefficients;
  const ScalarValue& v = k.values[l.load.value];
  if (c.back() < 2 || k.buffers[v.buffer].elements < kMinStagedElements || DTypeSize(v.dtype) > 8) return -1;
  for (size_t d = 0; d + 1 < c.size(); ++d)
    if (c[d] == 1) return static_cast<int>(d);
  return -1;
}

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string s;
  for (int64_t d : dims) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

}  // namespace

std::vector<int64_t> DimsFromCuts(const Kernel& k, int var, int64_t extent, const SymExpr& extent_size, std::vector<SymExpr>* sizes) {
  std::map<int64_t, std::vector<SymExpr>> cuts = {{1, {}}, {extent, {extent_size}}};
  for (const ScalarValue& v : k.values) CollectCuts(v.index, var, &cuts);
  for (const KernelStore& s : k.stores) CollectCuts(s.index, var, &cuts);
  std::vector<int64_t> dims;
  std::vector<SymExpr> dim_sizes;
  int64_t previous = 1;
  SymExpr previous_size = SymExpr::Constant(1);
  for (const auto& [cut, given] : cuts) {
    if (cut <= 1 || cut > extent) continue;  // a cut past the extent divides nothing
    if (cut % previous != 0) return {};
    const int64_t dim = cut / previous;
    const SymExpr cut_size = CutSize(cut, given, k.symbols);
    std::optional<SymExpr> dim_size = cut_size.DividedBy(previous_size);
    dims.insert(dims.begin(), dim);
    dim_sizes.insert(dim_sizes.begin(), dim_size && dim_size->Is(dim, k.symbols) ? *dim_size : SymExpr::Constant(dim));
    previous = cut;
    previous_size = cut_size;
  }
  if (sizes) *sizes = std::move(dim_sizes);
  return dims;
}

bool CoordinateCoefficients(const Index& index, size_t num_dims, std::vector<int64_t>* coefficients, int64_t* offset) {
  std::vector<LinearTerm> terms;
  if (!index || UsesValue(index) || !AsLinearTerms(index, &terms, offset)) return false;
  coefficients->assign(num_dims, 0);
  for (const LinearTerm& t : terms) {
    const int d = t.var - kCoordinateVar;
    if (d < 0 || d >= static_cast<int>(num_dims) || t.divisor != 1) return false;
    (*coefficients)[d] += t.coefficient;
  }
  return true;
}

Index FlatFromCoordinates(const std::vector<int64_t>& dims, int first_var, const std::vector<SymExpr>* sizes) {
  std::vector<Index> coordinates;
  for (size_t d = 0; d < dims.size(); ++d) coordinates.push_back(IndexVar(first_var + static_cast<int>(d), dims[d]));
  return Ravel(coordinates, dims, sizes);
}

Index InCoordinates(const Index& index, const std::vector<int64_t>& dims, const std::vector<SymExpr>* sizes) {
  return SubstituteVar(index, 0, FlatFromCoordinates(dims, kCoordinateVar, sizes));
}

Index AffineInCoordinates(const std::vector<int64_t>& dims, const std::vector<int64_t>& coefficients, int64_t offset) {
  Index affine = IndexConst(offset);
  for (size_t d = 0; d < dims.size(); ++d)
    affine = IndexAdd(IndexMul(IndexVar(kCoordinateVar + static_cast<int>(d), dims[d]), coefficients[d]), affine);
  return affine;
}

TransposedTiling FindTransposedTiling(const Kernel& k) {
  TransposedTiling t;
  if (!k.reductions.empty() || k.inner != 1) {
    t.why_not = "not a pointwise kernel";
    return t;
  }
  for (const KernelStore& s : k.stores) {
    AffineIndex a;
    if (UsesValue(s.index) || !AsAffine(s.index, &a) || a.c0 != 1 || a.c1 != 0 || a.offset != 0) {
      t.why_not = "a store other than at the element's own offset";
      return t;
    }
  }
  t.dims = DimsFromCuts(k, 0, k.outer, k.outer_size, &t.dim_sizes);
  if (t.dims.size() < 2) {
    t.why_not = t.dims.empty() ? "the indices split the output in ways that do not nest" : "the indices see the output as one dim";
    return t;
  }
  std::vector<AffineLoad> loads = AffineLoads(k, t.dims);
  MergeAdjacentDims(&t.dims, &t.dim_sizes, &loads);
  // The contiguous dim of the most bytes of transposed loads; those loads share the tile.
  std::map<int, int64_t> bytes_across;
  for (const AffineLoad& l : loads)
    if (int d = ContiguousDimOfTransposed(k, l); d >= 0) bytes_across[d] += l.bytes;
  if (bytes_across.empty()) {
    t.why_not = fmt::format("no load of {} elements or more is transposed against the output (dims {})", kMinStagedElements, DimsText(t.dims));
    return t;
  }
  t.across = std::max_element(bytes_across.begin(), bytes_across.end(), [](const auto& a, const auto& b) { return a.second < b.second; })->first;
  if (t.dims[t.across] < kMinTiledExtent || t.dims.back() < kMinTiledExtent) {
    t.why_not = fmt::format("the transposed dims are short ({} and {} of dims {})", t.dims[t.across], t.dims.back(), DimsText(t.dims));
    return t;
  }
  if (k.outer > (int64_t{1} << 36)) {  // a tile per block, and a launch holds 2^30 blocks
    t.why_not = "more tiles than one launch holds";
    return t;
  }
  std::stable_sort(loads.begin(), loads.end(), [](const AffineLoad& a, const AffineLoad& b) { return a.bytes > b.bytes; });
  for (const AffineLoad& l : loads)
    if (ContiguousDimOfTransposed(k, l) == t.across && t.loads.size() < kMaxStagedLoads)
      t.loads.push_back(l.load);
  return t;
}

}  // namespace tilefuse
