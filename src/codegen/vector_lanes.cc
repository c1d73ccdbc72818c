#include "codegen/vector_lanes.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>

namespace tilefuse {

namespace {

// e(base + j) = e(base) + step·j, with e(base) a multiple of `align` (0: always zero).
struct Lanes {
  bool known = false;
  int64_t step = 0;
  int64_t align = 0;
};

class LaneProof {
 public:
  LaneProof(int64_t vector, const std::function<bool(int)>& uniform_value) : vector_(vector), uniform_value_(uniform_value) {}

  Lanes Of(const Index& e) const {
    using K = IndexExpr::Kind;
    switch (e->kind) {
      case K::kConst: return {true, 0, std::abs(e->value)};
      case K::kVar: return e->value == 0 ? Lanes{true, 1, vector_} : Lanes{};
      case K::kValue: return uniform_value_(static_cast<int>(e->value)) ? Lanes{true, 0, 1} : Lanes{};
      case K::kAdd: {
        Lanes a = Of(e->a), b = Of(e->b);
        if (!a.known || !b.known) return {};
        return {true, a.step + b.step, std::gcd(a.align, b.align)};
      }
      case K::kMul: {
        Lanes a = Of(e->a);
        const int64_t c = e->b->value;
        if (!a.known) return {};
        return {true, a.step * c, std::abs(a.align * c)};
      }
      case K::kDiv: {
        Lanes a = Of(e->a);
        const int64_t d = e->b->value;
        if (!a.known || !StaysInside(a, d)) return {};
        return {true, 0, a.align % d == 0 ? a.align / d : 1};
      }
      case K::kMod: {
        Lanes a = Of(e->a);
        const int64_t m = e->b->value;
        if (!a.known || !StaysInside(a, m)) return {};
        return {true, a.step, std::gcd(a.align, m)};
      }
      case K::kClamp: {
        Lanes a = Of(e->a);
        if (!a.known || a.step != 0) return {};
        return {true, 0, 1};
      }
    }
    return {};
  }

 private:
  // Whether base..base + vector − 1 never crosses a multiple of `d`: trivially for a uniform
  // e, else when step·vector divides both d and e(base).
  bool StaysInside(const Lanes& a, int64_t d) const {
    if (a.step == 0) return true;
    if (a.step < 0) return false;
    const int64_t span = a.step * vector_;
    return d % span == 0 && a.align % span == 0;
  }

  int64_t vector_;
  const std::function<bool(int)>& uniform_value_;
};

}  // namespace

LaneAccess ClassifyLanes(const Index& index, int64_t vector, const std::function<bool(int)>& uniform_value) {
  Lanes lanes = LaneProof(vector, uniform_value).Of(index);
  if (!lanes.known) return LaneAccess::kOther;
  if (lanes.step == 0) return LaneAccess::kUniform;
  if (lanes.step == 1 && lanes.align % vector == 0) return LaneAccess::kContiguous;
  return LaneAccess::kOther;
}

}  // namespace tilefuse

namespace tilefuse {

std::vector<bool> UniformAcrossVector(const Kernel& k, int64_t vector) {
  std::vector<bool> uniform(k.values.size(), false);
  auto is_uniform = [&](int id) { return static_cast<bool>(uniform[id]); };
  for (size_t v = 0; v < k.values.size(); ++v) {
    const ScalarValue& value = k.values[v];
    switch (value.kind) {
      case ScalarValue::Kind::kConstant: uniform[v] = true; break;
      case ScalarValue::Kind::kIndex:
      case ScalarValue::Kind::kLoad: uniform[v] = ClassifyLanes(value.index, vector, is_uniform) == LaneAccess::kUniform; break;
      case ScalarValue::Kind::kOp:
        uniform[v] = std::all_of(value.args.begin(), value.args.end(), is_uniform);
        break;
      default: break;
    }
  }
  return uniform;
}

namespace {

// Whether every SSA value `index` reads is uniform (its text can name them as scalars).
bool ReadsUniformValuesOnly(const Index& index, const std::vector<bool>& uniform) {
  if (!index) return true;
  if (index->kind == IndexExpr::Kind::kValue && !uniform[index->value]) return false;
  return ReadsUniformValuesOnly(index->a, uniform) && ReadsUniformValuesOnly(index->b, uniform);
}

}  // namespace

bool TakesLaneForm(const Kernel& k, int64_t vector) {
  if (vector < 2 || !k.reductions.empty() || k.inner != 1) return false;
  const std::vector<bool> uniform = UniformAcrossVector(k, vector);
  auto is_uniform = [&](int id) { return static_cast<bool>(uniform[id]); };
  bool pays = false;
  for (const ScalarValue& value : k.values) {
    if (value.kind == ScalarValue::Kind::kRandom || value.kind == ScalarValue::Kind::kAccumulator) return false;
    if (!ReadsUniformValuesOnly(value.index, uniform)) return false;
    if (value.kind != ScalarValue::Kind::kLoad) continue;
    const LaneAccess access = ClassifyLanes(value.index, vector, is_uniform);
    AffineIndex affine;
    if (access == LaneAccess::kContiguous && !AsAffine(value.index, &affine)) pays = true;
    // Element by element from a large operand (a transposed read): the flat form's single
    // loop over the elements serves it as well, and such kernels (a convolution recomputed
    // for an NCHW graph output) grew past what ptxas allocates well as arrays.
    if (access == LaneAccess::kOther && k.buffers[value.buffer].elements * 4 > k.outer) return false;
  }
  for (const KernelStore& s : k.stores)
    if (!ReadsUniformValuesOnly(s.index, uniform)) return false;
  return pays;
}

}  // namespace tilefuse
