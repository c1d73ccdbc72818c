#include "passes/window_ops_nhwc.h"

#include "passes/window_taps.h"

namespace tilefuse {

namespace {

using window_taps::Product;

const std::vector<int64_t> kToChannelsLast = {0, 2, 3, 1};
const std::vector<int64_t> kToChannelsFirst = {0, 3, 1, 2};

// One input channel per group, few enough taps to combine one by one.
bool IsUnrolledDepthwise(const Attrs& a, int64_t channels) {
  return channels / a.group == 1 && Product(a.kernel) <= window_taps::kMaxUnrolledTaps;
}

// Σ_k w[:, k] · tap_k, each tap moved channels-last and the weights of tap k broadcast
// along the channels: one pointwise kernel that reads and writes NHWC.
Value DepthwiseChannelsLast(GraphBuilder& b, Value x, Value w, const Attrs& a, const Shape& out) {
  const int64_t n = out[0], co = out[1], ci = b.shape(x)[1], multiplier = co / ci;
  const DType dtype = b.dtype(x), acc = IsHalf(dtype) ? DType::kF32 : dtype;
  Value weights = b.Reshape(b.Cast(w, acc), {co, Product(a.kernel)});
  Shape tap_shape = out;
  tap_shape[1] = ci;
  Value y = window_taps::CombineTaps(b, x, b.Scalar(0, dtype), a, tap_shape, OpCode::kAdd, [&](Value tap, int64_t k) {
    tap = b.Cast(b.Transpose(tap, kToChannelsLast), acc);  // [N, OH, OW, C]
    if (multiplier > 1) {  // output channel g·multiplier + j reads input channel g
      tap = b.Reshape(tap, {n, out[2], out[3], ci, 1});
      tap = b.Reshape(b.BroadcastTo(tap, {n, out[2], out[3], ci, multiplier}), {n, out[2], out[3], co});
    }
    return b.Mul(tap, b.Reshape(b.Slice(weights, {k}, {k + 1}, {1}, {}), {co}));
  });
  return b.Transpose(b.Cast(y, dtype), kToChannelsFirst);
}

// The product A [N·OH·OW, KH·KW·C] × Wt [KH·KW·C, Co], both with the input channel fastest
// along K, so that A's rows are NHWC pixels (a 1×1 convolution reads x's NHWC view as it is).
Value GemmChannelsLast(GraphBuilder& b, Value x, Value w, const Attrs& a, const Shape& out) {
  const Shape in = b.shape(x);
  const int64_t n = out[0], co = out[1], c = in[1], k = Product(a.kernel) * c;
  Value columns;
  if (window_taps::IsPointwiseReshape(a)) {
    columns = b.Reshape(b.Transpose(x, kToChannelsLast), {n * in[2] * in[3], c});
  } else {
    Value windows = b.Window(x, b.Scalar(0, b.dtype(x)), window_taps::ParamsOf(a));  // [N, C, OH, OW, KH, KW]
    columns = b.Reshape(b.Transpose(windows, {0, 2, 3, 4, 5, 1}), {n * out[2] * out[3], k});
  }
  Value weights = b.Reshape(b.Transpose(w, {2, 3, 1, 0}), {k, co});
  Value y = b.MatMul(columns, weights, a.tf32);
  return b.Transpose(b.Reshape(y, {n, out[2], out[3], co}), kToChannelsFirst);
}

}  // namespace

bool HasChannelsLastForm(const Node& node, const Shape& x_shape) {
  const Attrs& a = node.attrs;
  if (a.kernel.size() != 2 || x_shape.size() != 4) return false;
  if (node.op == OpCode::kConv) return a.group == 1 || IsUnrolledDepthwise(a, x_shape[1]);
  return Product(a.kernel) <= window_taps::kMaxUnrolledTaps;  // the pools
}

Value ConvChannelsLast(GraphBuilder& b, Value x, Value w, const Attrs& a, const Shape& out) {
  // One input channel (group 1 included: a grayscale stem) goes tap by tap as in NCHW: a
  // product with K = KH·KW would waste the tensor cores.
  if (IsUnrolledDepthwise(a, b.shape(x)[1])) return DepthwiseChannelsLast(b, x, w, a, out);
  return GemmChannelsLast(b, x, w, a, out);
}

Value PoolChannelsLast(GraphBuilder& b, Value x, const Node& pool) {
  const Attrs& a = pool.attrs;
  const DType dtype = b.dtype(x);
  const bool is_max = pool.op == OpCode::kMaxPool;
  const DType acc = IsHalf(dtype) && !is_max ? DType::kF32 : dtype;  // sums of halves in f32; max is exact
  Value fill = b.Scalar(is_max ? window_taps::LowestValue(dtype) : 0, dtype);
  auto channels_last = [&](Value tap, int64_t) { return b.Cast(b.Transpose(tap, kToChannelsLast), acc); };
  Value y = window_taps::CombineTaps(b, x, fill, a, pool.shape, is_max ? OpCode::kMax : OpCode::kAdd, channels_last);
  if (!is_max) y = b.Cast(window_taps::AverageOf(b, y, a, b.shape(x), pool.shape, /*channels_last=*/true), dtype);
  return b.Transpose(y, kToChannelsFirst);
}

}  // namespace tilefuse
