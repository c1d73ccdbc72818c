#include "passes/window_ops.h"

#include "passes/rewriter.h"
#include "passes/window_ops_nhwc.h"
#include "passes/window_taps.h"

namespace tilefuse {

namespace {

using window_taps::AverageOf;
using window_taps::CombineTaps;
using window_taps::kMaxUnrolledTaps;
using window_taps::ParamsOf;
using window_taps::Product;

// The convolution without its bias. x [N, C, in...], w [Co, C/g, k...]; `out` the conv's shape.
Value ConvProduct(GraphBuilder& b, Value x, Value w, const Attrs& a, const Shape& out) {
  const int spatial = static_cast<int>(a.kernel.size());
  const int64_t n = out[0], co = out[1], g = a.group, ci = b.shape(x)[1], cig = ci / g, cog = co / g;
  const int64_t taps = Product(a.kernel), positions = Product(out, 2);
  const DType dtype = b.dtype(x);
  Value y;
  if (cig == 1 && taps <= kMaxUnrolledTaps) {  // depthwise, tap by tap: Σ_k w[:, k] · window_k
    DType acc = IsHalf(dtype) ? DType::kF32 : dtype;
    Value weights = b.Reshape(b.Cast(w, acc), {co, taps});
    Shape per_channel(out.size() - 1, 1);
    per_channel[0] = co;
    Shape tap_shape = out;
    tap_shape[1] = ci;
    y = CombineTaps(b, x, b.Scalar(0, dtype), a, tap_shape, OpCode::kAdd, [&](Value tap, int64_t k) {
      tap = b.Cast(tap, acc);
      if (cog > 1) tap = b.Reshape(b.BroadcastTo(b.Reshape(tap, {n, g, 1, positions}), {n, g, cog, positions}), out);
      return b.Mul(tap, b.Reshape(b.Slice(weights, {k}, {k + 1}, {1}, {}), per_channel));
    });
    y = b.Cast(y, dtype);
  } else if (cig == 1) {  // depthwise, as a row reduction over the taps
    DType acc = IsHalf(dtype) ? DType::kF32 : dtype;
    Value windows = b.Window(x, b.Scalar(0, dtype), ParamsOf(a));  // [N, C, out..., k...]
    windows = b.Reshape(b.Cast(windows, acc), {n, g, 1, positions, taps});
    windows = b.Reshape(b.BroadcastTo(windows, {n, g, cog, positions, taps}), {n, co, positions, taps});
    Value taps_w = b.Reshape(b.Cast(w, acc), {co, 1, taps});
    y = b.Cast(b.Reduce(OpCode::kReduceSum, b.Mul(windows, taps_w), {3}, /*keepdims=*/false), dtype);
  } else {
    Value columns;  // [N, g, C/g·k, out] (rows of the product: input channel, then tap)
    if (window_taps::IsPointwiseReshape(a)) {
      columns = b.Reshape(x, {n, g, cig, positions});
    } else {
      Value windows = b.Window(x, b.Scalar(0, dtype), ParamsOf(a));
      std::vector<int64_t> perm = {0, 1};
      for (int d = 0; d < spatial; ++d) perm.push_back(2 + spatial + d);
      for (int d = 0; d < spatial; ++d) perm.push_back(2 + d);
      columns = b.Reshape(b.Transpose(windows, perm), {n, g, cig * taps, positions});
    }
    if (g == 1) {  // a plain (batched) product: [Co, C·k] x [N, C·k, out]
      Shape cols = n == 1 ? Shape{cig * taps, positions} : Shape{n, cig * taps, positions};
      y = b.MatMul(b.Reshape(w, {co, cig * taps}), b.Reshape(columns, cols), a.tf32);
    } else {
      y = b.MatMul(b.Reshape(w, {g, cog, cig * taps}), columns, a.tf32);
    }
  }
  return b.Reshape(y, out);
}

Value Conv(GraphBuilder& b, const std::vector<Value>& inputs, const Node& conv, bool channels_last) {
  const Attrs& a = conv.attrs;
  const Shape& out = conv.shape;
  Value y = channels_last ? ConvChannelsLast(b, inputs[0], inputs[1], a, out) : ConvProduct(b, inputs[0], inputs[1], a, out);
  if (inputs.size() > 2) {
    Shape bias_shape(out.size() - 1, 1);
    bias_shape[0] = out[1];
    y = b.Add(y, b.Reshape(inputs[2], bias_shape));
  }
  return y;
}

Value Pool(GraphBuilder& b, Value x, const Node& pool) {
  const Attrs& a = pool.attrs;
  const int spatial = static_cast<int>(a.kernel.size());
  const DType dtype = b.dtype(x);
  const bool is_max = pool.op == OpCode::kMaxPool;
  Value fill = b.Scalar(is_max ? window_taps::LowestValue(dtype) : 0, dtype);
  std::vector<int64_t> taps = window_taps::TrailingAxes(2 + 2 * spatial, spatial);
  const bool unrolled = Product(a.kernel) <= kMaxUnrolledTaps;
  const DType acc = IsHalf(dtype) && !is_max ? DType::kF32 : dtype;  // sums of halves in f32; max is exact
  auto upcast = [&](Value tap, int64_t) { return b.Cast(tap, acc); };
  if (unrolled) {
    Value combined = CombineTaps(b, x, fill, a, pool.shape, is_max ? OpCode::kMax : OpCode::kAdd, upcast);
    if (is_max) return combined;
    return b.Cast(AverageOf(b, combined, a, b.shape(x), pool.shape, /*channels_last=*/false), dtype);
  }
  Value windows = b.Window(x, fill, ParamsOf(a));
  if (is_max) return b.Reduce(OpCode::kReduceMax, windows, taps, /*keepdims=*/false);
  Value sum = b.Reduce(OpCode::kReduceSum, b.Cast(windows, acc), taps, /*keepdims=*/false);
  return b.Cast(AverageOf(b, sum, a, b.shape(x), pool.shape, /*channels_last=*/false), dtype);
}

}  // namespace

bool KeepsConv(const Node& node, const WindowOpsOptions& options) {
  return options.keep_f32_conv && node.op == OpCode::kConv && node.dtype == DType::kF32 && !node.attrs.kernel.empty() &&
         node.attrs.kernel.size() <= 3;
}

bool KeepsPool(const Node& node, const WindowOpsOptions& options) {
  if (!options.keep_f32_pool || (node.op != OpCode::kMaxPool && node.op != OpCode::kAveragePool) || node.dtype != DType::kF32)
    return false;
  const Attrs& a = node.attrs;
  const size_t spatial = a.kernel.size();
  if (spatial == 0 || spatial > 3) return false;
  // oneDNN wants every window to reach into the input (no window of pads alone).
  for (size_t d = 0; d < spatial; ++d) {
    int64_t extent = (a.kernel[d] - 1) * a.dilations[d] + 1;
    if (a.pads[d] >= extent || a.pads[spatial + d] >= extent) return false;
  }
  return true;
}

StatusOr<Graph> RewriteWindowOps(const Graph& graph, const WindowOpsOptions& options) {
  GraphRewriter rewriter(graph);
  for (const Node& node : graph.nodes()) {
    bool window_op = (node.op == OpCode::kConv && !KeepsConv(node, options)) ||
                     ((node.op == OpCode::kMaxPool || node.op == OpCode::kAveragePool) && !KeepsPool(node, options));
    if (!window_op) {
      rewriter.CopyNode(node);
      continue;
    }
    std::vector<Value> inputs = rewriter.MapInputs(node);
    rewriter.SetLocation(node);
    if (!rewriter.builder().ok()) break;
    GraphBuilder& b = rewriter.builder();
    const bool channels_last = options.channels_last && HasChannelsLastForm(node, b.shape(inputs[0]));
    Value y;
    if (node.op == OpCode::kConv)
      y = Conv(b, inputs, node, channels_last);
    else
      y = channels_last ? PoolChannelsLast(b, inputs[0], node) : Pool(b, inputs[0], node);
    rewriter.SetMap(node.id, y);
  }
  return rewriter.Finish();
}

}  // namespace tilefuse
