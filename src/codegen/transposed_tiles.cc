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

// (i0 / scale) % modulus (modulus 0: none): the pieces lowering's unravelling leaves.
struct Piece {
  int64_t scale = 1, modulus = 0;
};

bool AsPiece(const Index& e, int var, Piece* p) {
  using K = IndexExpr::Kind;
  if (e->kind == K::kVar) {
    *p = {1, 0};
    return e->value == var;
  }
  if (e->kind != K::kDiv && e->kind != K::kMod) return false;
  Piece in;
  if (!AsPiece(e->a, var, &in)) return false;
  const int64_t c = e->b->value;
  if (in.modulus != 0 && in.modulus % c != 0) return false;  // cuts across a dim: not a piece
  *p = e->kind == K::kDiv ? Piece{in.scale * c, in.modulus / c} : Piece{in.scale, c};
  return true;
}

// Where the pieces of `e` cut loop variable `var` (each piece: at its scale, and its scale
// times its modulus).
void CollectCuts(const Index& e, int var, std::set<int64_t>* cuts) {
  if (!e) return;
  if (Piece p; AsPiece(e, var, &p)) {
    cuts->insert(p.scale);
    if (p.modulus != 0) cuts->insert(p.scale * p.modulus);
    return;
  }
  CollectCuts(e->a, var, cuts);
  CollectCuts(e->b, var, cuts);
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
void MergeAdjacentDims(std::vector<int64_t>* dims, std::vector<AffineLoad>* loads) {
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

std::vector<int64_t> DimsFromCuts(const Kernel& k, int var, int64_t extent) {
  std::set<int64_t> cuts = {1, extent};
  for (const ScalarValue& v : k.values) CollectCuts(v.index, var, &cuts);
  for (const KernelStore& s : k.stores) CollectCuts(s.index, var, &cuts);
  std::vector<int64_t> dims;
  int64_t previous = 1;
  for (int64_t cut : cuts) {
    if (cut <= 1 || cut > extent) continue;  // a cut past the extent divides nothing
    if (cut % previous != 0) return {};
    dims.insert(dims.begin(), cut / previous);
    previous = cut;
  }
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

Index FlatFromCoordinates(const std::vector<int64_t>& dims, int first_var) {
  std::vector<Index> coordinates;
  for (size_t d = 0; d < dims.size(); ++d) coordinates.push_back(IndexVar(first_var + static_cast<int>(d), dims[d]));
  return Ravel(coordinates, dims);
}

Index InCoordinates(const Index& index, const std::vector<int64_t>& dims) {
  return SubstituteVar(index, 0, FlatFromCoordinates(dims));
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
  t.dims = DimsFromCuts(k, 0, k.outer);
  if (t.dims.size() < 2) {
    t.why_not = t.dims.empty() ? "the indices split the output in ways that do not nest" : "the indices see the output as one dim";
    return t;
  }
  std::vector<AffineLoad> loads = AffineLoads(k, t.dims);
  MergeAdjacentDims(&t.dims, &loads);
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
