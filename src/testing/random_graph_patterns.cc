// Multi-op patterns of the random graph generator: reductions (alone or broadcast back),
// softmax and layer norm written from primitives, matmul (2-D, batched, vector),
// attention, and dropout; and the layer patterns (RandomGraphOptions::
// allow_layer_patterns): GEMM epilogues, multi-head attention, convolution blocks. Each
// keeps its result's magnitude bound honest.
#include <algorithm>
#include <cmath>

#include "testing/random_graph_generator.h"

namespace tilefuse::random_graph_internal {

namespace {
int64_t ReducedElements(const Shape& shape, const std::vector<int64_t>& axes) {
  int64_t n = 1;
  for (int64_t a : axes) n *= shape[a < 0 ? a + static_cast<int64_t>(shape.size()) : a];
  return n;
}
}  // namespace

// The trailing axis, the leading one, or a random non-empty set; sometimes negative.
std::vector<int64_t> RandomGraphGenerator::RandomReductionAxes(int rank) {
  double roll = static_cast<double>(Below(10));
  if (roll < 4) return {Chance(0.5) ? -1 : rank - 1};
  if (roll < 6) return {0};
  std::vector<int64_t> axes;
  for (int d = 0; d < rank; ++d)
    if (Chance(0.5)) axes.push_back(Chance(0.2) ? d - rank : d);
  if (axes.empty()) axes.push_back(static_cast<int64_t>(Below(rank)));
  return axes;
}

TrackedValue RandomGraphGenerator::ReductionOp(const TrackedValue& x) {
  int rank = RankOf(x);
  if (rank == 0) return UnaryOp(x);
  static const std::vector<OpCode> kReductions = {OpCode::kReduceSum, OpCode::kReduceMax, OpCode::kReduceMin,
                                                  OpCode::kReduceMean};
  OpCode op = PickFrom(kReductions);
  std::vector<int64_t> axes = RandomReductionAxes(rank);
  bool keepdims = Chance(0.5);
  int64_t n = ReducedElements(ShapeOf(x), axes);
  TrackedValue in = op == OpCode::kReduceSum ? Tame(x, std::min(64.0, kMaxBound / static_cast<double>(n))) : x;
  bool order_preserving = op == OpCode::kReduceMax || op == OpCode::kReduceMin;
  TrackedValue r = Track(b_.Reduce(op, in.value, axes, keepdims),
                         op == OpCode::kReduceSum ? in.bound * static_cast<double>(n) : in.bound,
                         in.exact && order_preserving);
  // Broadcast back over x (as in normalisations): possible when the reduced dims were
  // kept, or are all leading so numpy's right alignment puts the rest in place.
  bool leading = true;
  for (size_t i = 0; i < axes.size(); ++i) leading = leading && (axes[i] == static_cast<int64_t>(i));
  if (!(keepdims || leading) || !Chance(0.4)) return r;
  if (op == OpCode::kReduceSum)
    return {b_.Div(in.value, b_.AddScalar(b_.Unary(OpCode::kAbs, r.value), 1)), in.bound, false};
  return {b_.Sub(in.value, r.value), 2 * in.bound, false};
}

TrackedValue RandomGraphGenerator::SoftmaxPattern(const TrackedValue& x) {
  int rank = RankOf(x);
  if (rank == 0) return UnaryOp(x);
  int64_t axis = Chance(0.6) ? rank - 1 : static_cast<int64_t>(Below(rank));
  return SoftmaxAlong(x, axis, Chance(0.25));
}

// max-subtract-exp-sum-divide (or, for log-softmax, subtract the log of the sum): the
// exp argument is <= 0 and the sum >= 1, so neither overflows nor divides by zero.
TrackedValue RandomGraphGenerator::SoftmaxAlong(const TrackedValue& x, int64_t axis, bool log) {
  TrackedValue in = Tame(x, kMaxBound / 4);
  Value max = b_.Reduce(OpCode::kReduceMax, in.value, {axis}, true);
  Value shifted = b_.Sub(in.value, max);
  Value exp = b_.Unary(OpCode::kExp, shifted);
  Value sum = b_.Reduce(OpCode::kReduceSum, exp, {axis}, true);
  if (!log) return {b_.Div(exp, sum), 1, false};
  double n = static_cast<double>(ReducedElements(ShapeOf(in), {axis}));
  return {b_.Sub(shifted, b_.Unary(OpCode::kLog, sum)), 2 * in.bound + std::log(n) + 1, false};
}

// mean / centred variance / rsqrt over the trailing 1-2 dims, sometimes with scale and
// bias constants. |(x - mean) / std| <= sqrt(n) bounds the result.
TrackedValue RandomGraphGenerator::LayerNormPattern(const TrackedValue& x) {
  int rank = RankOf(x);
  if (rank == 0) return UnaryOp(x);
  int normalized = static_cast<int>(Between(1, std::min(rank, 2)));
  std::vector<int64_t> axes;
  for (int d = rank - normalized; d < rank; ++d) axes.push_back(d);
  TrackedValue in = Tame(x, 32);
  DType dtype = DTypeOf(in);
  Value mean = b_.Reduce(OpCode::kReduceMean, in.value, axes, true);
  Value centred = b_.Sub(in.value, mean);
  Value variance = b_.Reduce(OpCode::kReduceMean, b_.Mul(centred, centred), axes, true);
  double epsilon = IsHalf(dtype) ? 1e-3 : 1e-5;
  Value normed = b_.Mul(centred, b_.Unary(OpCode::kRsqrt, b_.AddScalar(variance, epsilon)));
  double bound = std::sqrt(static_cast<double>(ReducedElements(ShapeOf(in), axes))) + 1;
  if (!Chance(0.6)) return {normed, bound, false};
  Shape shape = ShapeOf(in);
  Shape trailing(shape.end() - normalized, shape.end());
  Value scaled = b_.Mul(normed, RandomConstant(dtype, trailing).value);
  return {b_.Add(scaled, RandomConstant(dtype, trailing).value), bound + 1, false};
}

// x as a left matmul operand [..., M, K]: rank raised to 2, K sliced to at most
// kMaxContraction, magnitude squashed so K * |a| * |b| stays small.
TrackedValue RandomGraphGenerator::AsMatrixOperand(const TrackedValue& x) {
  TrackedValue a = x;
  if (RankOf(a) < 2) a = {b_.Reshape(a.value, {1, NumElements(ShapeOf(a))}), a.bound, a.exact};
  int64_t k = ShapeOf(a).back();
  if (k > kMaxContraction) {
    int64_t keep = Between(1, kMaxContraction), start = Between(0, k - keep);
    a = {b_.Slice(a.value, {start}, {start + keep}, {-1}, {1}), a.bound, a.exact};
  }
  return Tame(a, 4);
}

TrackedValue RandomGraphGenerator::MatMulOp(const TrackedValue& x) {
  if (options_.max_rank < 2) return UnaryOp(x);
  DType dtype = DTypeOf(x);
  Shape xs = ShapeOf(x);
  if (xs.size() == 1 && xs[0] <= kMaxContraction && Chance(0.3)) {  // vector @ matrix
    int64_t n = std::max<int64_t>(1, std::min(RandomDim(), options_.max_elements / xs[0]));
    TrackedValue a = Tame(x, 4);
    return {b_.MatMul(a.value, RandomConstant(dtype, {xs[0], n}).value), static_cast<double>(xs[0]) * a.bound, false};
  }
  TrackedValue a = AsMatrixOperand(x);
  Shape as = ShapeOf(a);
  int64_t m = as[as.size() - 2], k = as.back();
  Shape batch(as.begin(), as.end() - 2);
  TrackedValue rhs;
  if (Chance(0.3) && Fits([&] { Shape s = batch; s.push_back(m); s.push_back(m); return s; }())) {
    std::vector<int64_t> perm;  // a @ aᵀ over the last two dims
    for (size_t d = 0; d < as.size(); ++d) perm.push_back(static_cast<int64_t>(d));
    std::swap(perm[as.size() - 2], perm[as.size() - 1]);
    rhs = {b_.Transpose(a.value, perm), a.bound, a.exact};
  } else {
    // A weight [wbatch..., K, N]: batch dims kept or 1 (broadcast), maybe a new leading one.
    Shape wbatch;
    if (Chance(0.5))
      for (int64_t d : batch) wbatch.push_back(Chance(0.5) ? d : 1);
    if (batch.empty() && options_.max_rank >= 3 && Chance(0.3)) wbatch = {Between(2, 4)};
    int64_t out_batch = std::max(NumElements(batch), NumElements(wbatch));
    int64_t n = RandomDim();
    auto too_big = [&] { return std::max(out_batch * m, NumElements(wbatch) * k) * n > options_.max_elements; };
    while (n > 1 && too_big()) n /= 2;
    if (too_big()) wbatch.clear();
    if (too_big()) return UnaryOp(x);
    Shape ws = wbatch;
    ws.push_back(k);
    ws.push_back(n);
    rhs = RandomConstant(dtype, ws);
  }
  Value product = b_.MatMul(a.value, rhs.value);
  double bound = static_cast<double>(k) * a.bound * rhs.bound;
  if (Chance(0.5)) return {b_.MulScalar(product, 1 / std::sqrt(static_cast<double>(k))), bound, false};
  return {product, bound, false};
}

// softmax(q kᵀ / sqrt(d) [causal mask]) v, with k = v = q (self-attention) or constant
// keys and values: no N×N buffer is needed by a flash-attention lowering.
TrackedValue RandomGraphGenerator::AttentionPattern(const TrackedValue& x) {
  if (options_.max_rank < 2) return UnaryOp(x);
  TrackedValue q = Tame(AsMatrixOperand(x), 1);
  Shape qs = ShapeOf(q);
  int rank = static_cast<int>(qs.size());
  int64_t s = qs[rank - 2], d = qs.back(), batch = NumElements(qs) / (s * d);
  DType dtype = DTypeOf(q);
  bool self = Chance(0.5) && batch * s * s <= options_.max_elements;
  TrackedValue k = q, v = q;
  if (!self) {
    int64_t t = RandomDim(), dv = Chance(0.5) ? d : std::min<int64_t>(RandomDim(), kMaxContraction);
    if (batch * s * dv > options_.max_elements) dv = d;
    // Scores [.., s, t] and the constants [t, d], [t, dv] must fit.
    while (t > 1 && std::max(batch * s, std::max(d, dv)) * t > options_.max_elements) t /= 2;
    if (std::max(batch * s, std::max(d, dv)) * t > options_.max_elements) return UnaryOp(x);
    k = RandomConstant(dtype, {t, d});
    v = RandomConstant(dtype, {t, dv});
  }
  std::vector<int64_t> perm;
  for (int i = 0; i < RankOf(k); ++i) perm.push_back(i);
  std::swap(perm[perm.size() - 2], perm[perm.size() - 1]);
  Value scores = b_.MulScalar(b_.MatMul(q.value, b_.Transpose(k.value, perm)), 1 / std::sqrt(static_cast<double>(d)));
  TrackedValue tracked_scores{scores, std::sqrt(static_cast<double>(d)), false};
  if (self && options_.allow_masks && Chance(0.5)) {  // causal: query i sees keys 0..i, never an empty row
    Value row = b_.Iota({s, s}, 0, DType::kI64), column = b_.Iota({s, s}, 1, DType::kI64);
    Value mask = b_.Binary(OpCode::kGreaterEqual, row, column);
    tracked_scores.value = b_.Where(mask, scores, b_.Scalar(-30, dtype));
    tracked_scores.bound = 30;
  }
  TrackedValue probs = SoftmaxAlong(tracked_scores, -1, false);
  return {b_.MatMul(probs.value, v.value), v.bound, false};
}

// Dropout as exported by frameworks: keep = uniform >= ratio, kept values scaled by
// 1 / (1 - ratio). The uniform values are f32 (exact in every implementation).
TrackedValue RandomGraphGenerator::DropoutPattern(const TrackedValue& x) {
  double ratio = PickFrom(std::vector<double>{0.1, 0.25, 0.5});
  TrackedValue in = Tame(x, kMaxBound / 4);
  Value uniform = b_.RandomUniform(ShapeOf(in), DType::kF32, rng_());
  Value keep = b_.Binary(OpCode::kGreaterEqual, uniform, b_.Scalar(ratio, DType::kF32));
  Value scaled = b_.MulScalar(in.value, 1 / (1 - ratio));
  return {b_.Where(keep, scaled, b_.Scalar(0, DTypeOf(in))), in.bound / (1 - ratio), false};
}

// A GEMM epilogue as exported from a Linear layer: x @ W + bias, an activation (ReLU,
// GELU's tanh form, SiLU or tanh), sometimes a residual add of x itself (when W is
// square) or of a pool value of the product's shape.
TrackedValue RandomGraphGenerator::GemmEpiloguePattern(const TrackedValue& x) {
  if (options_.max_rank < 2) return UnaryOp(x);
  TrackedValue a = AsMatrixOperand(x);
  Shape as = ShapeOf(a);
  int64_t m = NumElements(as) / as.back(), k = as.back();
  int64_t n = Chance(0.4) ? k : RandomDim();
  while (n > 1 && std::max(m, k) * n > options_.max_elements) n /= 2;
  if (std::max(m, k) * n > options_.max_elements) return UnaryOp(x);
  DType dtype = DTypeOf(a);
  Value y = b_.Add(b_.MatMul(a.value, RandomConstant(dtype, {k, n}).value), RandomConstant(dtype, {n}).value);
  TrackedValue linear = Tame({y, static_cast<double>(k) * a.bound + 1, false}, 8);
  Value v = linear.value;
  switch (Below(4)) {
    case 0: v = b_.Unary(OpCode::kRelu, v); break;
    case 1: {  // 0.5 y (1 + tanh(sqrt(2/pi) (y + 0.044715 y^3)))
      Value cube = b_.Mul(b_.Mul(v, v), v);
      Value inner = b_.MulScalar(b_.Add(v, b_.MulScalar(cube, 0.044715)), 0.7978845608028654);
      v = b_.Mul(b_.MulScalar(v, 0.5), b_.AddScalar(b_.Unary(OpCode::kTanh, inner), 1));
      break;
    }
    case 2: v = b_.Mul(v, b_.Unary(OpCode::kSigmoid, v)); break;
    default: v = b_.Unary(OpCode::kTanh, v); break;
  }
  double bound = linear.bound;
  Shape out = b_.shape(v);
  if (Chance(0.5)) {
    std::optional<TrackedValue> residual;
    if (n == k) residual = a;
    for (size_t i = pool_.size(); i-- > 0 && !residual;)
      if (ShapeOf(pool_[i]) == out) residual = CastTo(pool_[i], dtype);
    if (residual) {
      TrackedValue r = Tame(*residual, 64);
      v = b_.Add(v, r.value);
      bound += r.bound;
    }
  }
  return {v, bound, false};
}

// Multi-head attention as transformers export it: q, k and v projected from x by
// constant weights, split into heads ([B, S, H, D] transposed to [B, H, S, D]), an
// additive key-padding mask (0 or -30 per key, the first key always kept) or a causal
// one, softmax, the weighted sum, and the heads merged back.
TrackedValue RandomGraphGenerator::MultiHeadAttentionPattern(const TrackedValue& x) {
  if (options_.max_rank < 4) return AttentionPattern(x);
  TrackedValue in = AsMatrixOperand(x);
  Shape xs = ShapeOf(in);
  int64_t s = xs[xs.size() - 2], e = xs.back(), batch = NumElements(xs) / (s * e);
  std::vector<int64_t> head_counts;
  for (int64_t h : {1, 2, 4})
    if (e % h == 0 && batch * h * s * s <= options_.max_elements) head_counts.push_back(h);
  if (head_counts.empty()) return AttentionPattern(x);
  int64_t h = PickFrom(head_counts), d = e / h;
  DType dtype = DTypeOf(in);
  Value flat = b_.Reshape(in.value, {batch, s, e});
  auto heads = [&](Value projected) { return b_.Transpose(b_.Reshape(projected, {batch, s, h, d}), {0, 2, 1, 3}); };
  auto project = [&] { return Tame({b_.MatMul(flat, RandomConstant(dtype, {e, e}).value), static_cast<double>(e) * in.bound, false}, 1).value; };
  Value q = heads(project()), k = heads(project()), v = heads(project());
  Value scores = b_.MulScalar(b_.MatMul(q, b_.Transpose(k, {0, 1, 3, 2})), 1 / std::sqrt(static_cast<double>(d)));
  TrackedValue tracked{scores, std::sqrt(static_cast<double>(d)), false};
  if (Chance(0.5)) {
    Tensor mask(dtype, {s});
    for (int64_t t = 0; t < s; ++t) mask.SetDouble(t, t > 0 && Chance(0.3) ? -30 : 0);
    tracked = {b_.Add(scores, b_.Constant(std::move(mask))), tracked.bound + 30, false};
  } else if (options_.allow_masks && Chance(0.5)) {
    Value row = b_.Iota({s, s}, 0, DType::kI64), column = b_.Iota({s, s}, 1, DType::kI64);
    tracked = {b_.Where(b_.Binary(OpCode::kGreaterEqual, row, column), scores, b_.Scalar(-30, dtype)), 30, false};
  }
  TrackedValue probs = SoftmaxAlong(tracked, -1, false);
  Value merged = b_.Reshape(b_.Transpose(b_.MatMul(probs.value, v), {0, 2, 1, 3}), {batch, s, e});
  return {b_.Reshape(merged, xs), 1, false};
}

// A convolution block as exported from a CNN: x viewed as NCHW (or NCW), a 1x1, 3x3 or
// depthwise convolution (stride 1 or 2, padding 0 or 1) with or without bias, batch norm
// folded to per-channel scale and shift, ReLU, sometimes a residual add (when the shape
// is kept) and a 2x2 max or average pool.
TrackedValue RandomGraphGenerator::ConvPattern(const TrackedValue& x) {
  int64_t elements = NumElements(ShapeOf(x));
  int spatial = Chance(0.7) ? 2 : 1;
  if (elements < 4 || options_.max_rank < spatial + 2) return UnaryOp(x);
  TrackedValue in = Tame(x, 1);
  Shape cs = RandomFactorization(elements, spatial + 1);  // [C, spatial...]
  int64_t c = cs[0];
  Shape xs = {1};
  xs.insert(xs.end(), cs.begin(), cs.end());
  Value image = b_.Reshape(in.value, xs);
  bool depthwise = c > 1 && Chance(0.3);
  int64_t kernel = Chance(0.5) ? 3 : 1, stride = Chance(0.3) ? 2 : 1, pad = kernel == 3 && Chance(0.7) ? 1 : 0;
  for (int d = 0; d < spatial; ++d)
    if (cs[1 + d] + 2 * pad < kernel) return UnaryOp(x);
  int64_t out_channels = depthwise ? c : std::min<int64_t>(RandomDim(), 32);
  PoolParams p;
  int64_t out_spatial = 1;
  for (int d = 0; d < spatial; ++d) {
    p.kernel.push_back(kernel);
    p.strides.push_back(stride);
    p.dilations.push_back(1);
    out_spatial *= (cs[1 + d] + 2 * pad - kernel) / stride + 1;
  }
  p.pads.assign(2 * spatial, pad);
  p.group = depthwise ? c : 1;
  int64_t window = kernel == 3 ? (spatial == 2 ? 9 : 3) : 1;
  int64_t taps = (depthwise ? 1 : c) * window;  // terms of each output's sum
  // The output and the im2col view ([N, C, out..., kernel...]) must fit.
  while (out_channels > 1 && !depthwise && out_channels * out_spatial > options_.max_elements) out_channels /= 2;
  if (out_channels * out_spatial > options_.max_elements || c * out_spatial * window > 16 * options_.max_elements || taps > 1024)
    return UnaryOp(x);
  DType dtype = DTypeOf(in);
  Shape ws = {out_channels, depthwise ? 1 : c};
  for (int d = 0; d < spatial; ++d) ws.push_back(kernel);
  if (!Fits(ws)) return UnaryOp(x);
  Value bias = Chance(0.5) ? RandomConstant(dtype, {out_channels}).value : Value{};
  Value conv = b_.Conv(image, RandomConstant(dtype, ws).value, bias, p);
  TrackedValue y = Tame({conv, static_cast<double>(taps) + 1, false}, 8);
  Shape channel = {out_channels};
  for (int d = 0; d < spatial; ++d) channel.push_back(1);
  Value v = b_.Add(b_.Mul(y.value, RandomConstant(dtype, channel).value), RandomConstant(dtype, channel).value);
  v = b_.Unary(OpCode::kRelu, v);
  double bound = y.bound + 1;
  if (b_.shape(v) == xs && Chance(0.5)) {
    v = b_.Add(v, image);
    bound += 1;
  }
  Shape ys = b_.shape(v);
  bool poolable = b_.ok();
  for (size_t d = 2; d < ys.size(); ++d) poolable = poolable && ys[d] >= 2;
  if (poolable && Chance(0.3)) {
    PoolParams pool;
    pool.kernel.assign(spatial, 2);
    pool.strides.assign(spatial, 2);
    pool.dilations.assign(spatial, 1);
    pool.pads.assign(2 * spatial, 0);
    v = Chance(0.5) ? b_.MaxPool(v, pool) : b_.AveragePool(v, pool);
  }
  return {v, bound, false};
}

}  // namespace tilefuse::random_graph_internal
