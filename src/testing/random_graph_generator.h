// The machinery behind GenerateRandomGraph (random_graph.h); private to src/testing.
//
// The generator keeps a pool of the float values built so far, each with a bound on
// its magnitude and whether it is "exact" (computed bit-identically by any correct
// implementation, so comparisons on it are safe). A step picks an op family and builds
// one op or one small pattern from recent pool values; the families live in
// random_graph_ops.cc (pointwise, masks, casts, broadcasts, views) and
// random_graph_patterns.cc (reductions, softmax, layer norm, matmul, attention,
// dropout, GEMM epilogues, multi-head attention, convolution blocks).
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "testing/random_graph.h"
#include "tilefuse/builder.h"

namespace tilefuse::random_graph_internal {

// No value may exceed kMaxBound in magnitude (well inside f16's 65504): operands are
// squashed (Tame) before an op whose result bound would pass it.
inline constexpr double kMaxBound = 1e4;
// The largest contraction length; matmul operands are sliced down to it.
inline constexpr int64_t kMaxContraction = 64;

struct TrackedValue {
  Value value;
  double bound = 1;    // |every element| <= bound
  bool exact = false;  // safe to compare: no rounding differences between implementations
};

class RandomGraphGenerator {
 public:
  explicit RandomGraphGenerator(const RandomGraphOptions& options);
  StatusOr<Graph> Generate();

 private:
  // ---- randomness (no std:: distributions: their output differs between libraries)
  uint64_t Below(uint64_t n) { return rng_() % n; }
  int64_t Between(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(Below(hi - lo + 1)); }
  bool Chance(double p) { return static_cast<double>(rng_() >> 11) * 0x1.0p-53 < p; }
  template <typename T> const T& PickFrom(const std::vector<T>& items) { return items[Below(items.size())]; }
  std::vector<int64_t> RandomPermutation(int n);

  // ---- shapes and dtypes
  DType RandomDType();
  int64_t RandomDim();
  Shape RandomShape(int rank);
  Shape ShrinkToFit(Shape shape);
  Shape SmallerBroadcastableShape(const Shape& shape);  // drops leading dims, sets some to 1
  Shape RandomFactorization(int64_t elements, int rank);
  bool Fits(const Shape& shape) const { return NumElements(shape) <= options_.max_elements; }
  Shape ShapeOf(const TrackedValue& v) const { return b_.shape(v.value); }
  int RankOf(const TrackedValue& v) const { return b_.rank(v.value); }
  DType DTypeOf(const TrackedValue& v) const { return b_.dtype(v.value); }

  // ---- the pool
  TrackedValue Track(Value v, double bound, bool exact);  // adds to the pool
  TrackedValue Current();  // usually the newest value, so graphs grow deep
  TrackedValue Tame(const TrackedValue& x, double limit);  // squashes so bound <= limit
  TrackedValue CastTo(const TrackedValue& x, DType to);
  TrackedValue RandomConstant(DType dtype, Shape shape);
  TrackedValue ScalarOf(double value, DType dtype) { return {b_.Scalar(value, dtype), std::abs(value), true}; }
  // A value that broadcasts with `x` (result within max_elements) in x's dtype:
  // a pool value, a bias-like constant of a smaller shape, or a scalar.
  TrackedValue Partner(const TrackedValue& x);
  std::optional<TrackedValue> ExactPartner(const TrackedValue& x);
  // numpy broadcast of two shapes; nullopt when they do not broadcast or the result
  // passes max_rank or max_elements.
  std::optional<Shape> BroadcastShape(const Shape& a, const Shape& b) const;
  void AddParameters();
  void AddOutputs();

  // ---- op families (random_graph_ops.cc)
  TrackedValue UnaryOp(const TrackedValue& x);
  TrackedValue BinaryOp(const TrackedValue& x);
  TrackedValue CompareWhere(const TrackedValue& x);
  TrackedValue IotaMask(const TrackedValue& x);
  TrackedValue CastOp(const TrackedValue& x);
  TrackedValue BroadcastOp(const TrackedValue& x);
  TrackedValue ViewOp(const TrackedValue& x);
  TrackedValue ReshapeOp(const TrackedValue& x);
  TrackedValue TransposeOp(const TrackedValue& x);
  TrackedValue SliceOp(const TrackedValue& x);
  TrackedValue SqueezeOrUnsqueeze(const TrackedValue& x);
  TrackedValue ConcatOp(const TrackedValue& x);
  TrackedValue SplitOp(const TrackedValue& x);

  // ---- patterns (random_graph_patterns.cc)
  TrackedValue ReductionOp(const TrackedValue& x);
  TrackedValue SoftmaxPattern(const TrackedValue& x);
  TrackedValue SoftmaxAlong(const TrackedValue& x, int64_t axis, bool log);
  TrackedValue LayerNormPattern(const TrackedValue& x);
  TrackedValue MatMulOp(const TrackedValue& x);
  TrackedValue AttentionPattern(const TrackedValue& x);
  TrackedValue DropoutPattern(const TrackedValue& x);
  TrackedValue GemmEpiloguePattern(const TrackedValue& x);
  TrackedValue MultiHeadAttentionPattern(const TrackedValue& x);
  TrackedValue ConvPattern(const TrackedValue& x);
  std::vector<int64_t> RandomReductionAxes(int rank);
  TrackedValue AsMatrixOperand(const TrackedValue& x);  // rank >= 2, K <= 64

  TrackedValue Step();

  RandomGraphOptions options_;
  std::mt19937_64 rng_;
  GraphBuilder b_;
  std::vector<TrackedValue> pool_;
};

}  // namespace tilefuse::random_graph_internal
