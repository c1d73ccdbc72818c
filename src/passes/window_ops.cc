#include "passes/window_ops.h"

#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>

#include "passes/rewriter.h"
#include "support/check.h"

namespace tilefuse {

namespace {

bool IsHalf(DType dtype) { return dtype == DType::kF16 || dtype == DType::kBF16; }

int64_t Product(const std::vector<int64_t>& v, size_t begin = 0) {
  return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(begin), v.end(), int64_t{1}, std::multiplies<>());
}

// Max pool's fill: below every value of the dtype.
double LowestValue(DType dtype) {
  switch (dtype) {
    case DType::kI64: return -std::ldexp(1.0, 63);
    case DType::kI32: return -std::ldexp(1.0, 31);
    case DType::kI8: return -128;
    case DType::kU8: case DType::kBool: return 0;
    default: return -std::numeric_limits<double>::infinity();
  }
}

PoolParams ParamsOf(const Attrs& a) {
  PoolParams p;
  p.kernel = a.kernel;
  p.strides = a.strides;
  p.pads = a.pads;
  p.dilations = a.dilations;
  return p;
}

// The last `count` axes of a rank-`rank` tensor.
std::vector<int64_t> TrailingAxes(int rank, int count) {
  std::vector<int64_t> axes;
  for (int d = rank - count; d < rank; ++d) axes.push_back(d);
  return axes;
}

bool IsPointwiseReshape(const Attrs& a) {
  for (size_t d = 0; d < a.kernel.size(); ++d)
    if (a.kernel[d] != 1 || a.strides[d] != 1 || a.pads[d] != 0 || a.pads[a.kernel.size() + d] != 0) return false;
  return true;
}

// Windows of at most this many taps are combined tap by tap as pointwise ops (a sum of
// products, a max): one pointwise kernel whose loads are affine along an output row, which
// vectorises across output positions on the CPU and gives each GPU thread one output. More
// taps are reduced as a row (the window's last axes).
constexpr int64_t kMaxUnrolledTaps = 49;

// Tap k (row-major over the kernel) of the windows of x: [N, C, out...], x at
// o·stride + k·dilation − pad, the fill outside. Each tap is a window of its own (kernel 1,
// the tap's offset as its padding, negative past the first pad) rather than a slice of one
// shared window: a window every tap read would be a node with many users, materialised.
Value Tap(GraphBuilder& b, Value x, Value fill, const Attrs& a, const Shape& out, int64_t k) {
  const int spatial = static_cast<int>(a.kernel.size());
  const Shape in = b.shape(x);
  PoolParams p;
  p.kernel.assign(spatial, 1);
  p.dilations.assign(spatial, 1);
  p.strides = a.strides;
  p.pads.assign(2 * spatial, 0);
  for (int d = spatial - 1; d >= 0; --d) {
    int64_t begin = a.pads[d] - (k % a.kernel[d]) * a.dilations[d];
    k /= a.kernel[d];
    p.pads[d] = begin;  // the output size (o_max·stride − begin < in + end) fixes the end
    p.pads[spatial + d] = (out[2 + d] - 1) * a.strides[d] + 1 - in[2 + d] - begin;
  }
  return b.Reshape(b.Window(x, fill, p), out);
}

// Combines the taps of x's windows pairwise with `op` (add, max), in tap order; `term`
// maps each tap first.
Value CombineTaps(GraphBuilder& b, Value x, Value fill, const Attrs& a, const Shape& out, OpCode op,
                  const std::function<Value(Value, int64_t)>& term) {
  Value y;
  for (int64_t k = 0; k < Product(a.kernel); ++k) {
    Value t = term(Tap(b, x, fill, a, out, k), k);
    y = k == 0 ? t : b.Binary(op, y, t);
  }
  return y;
}

// inputs: x [N, C, in...], w [Co, C/g, k...], [bias [Co]]; `out` the conv's shape.
Value Conv(GraphBuilder& b, const std::vector<Value>& inputs, const Attrs& a, const Shape& out) {
  Value x = inputs[0], w = inputs[1];
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
    if (IsPointwiseReshape(a)) {
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
      y = b.MatMul(b.Reshape(w, {co, cig * taps}), b.Reshape(columns, cols));
    } else {
      y = b.MatMul(b.Reshape(w, {g, cog, cig * taps}), columns);
    }
  }
  y = b.Reshape(y, out);
  if (inputs.size() > 2) {
    Shape bias_shape(out.size() - 1, 1);
    bias_shape[0] = co;
    y = b.Add(y, b.Reshape(inputs[2], bias_shape));
  }
  return y;
}

// The divisor of each average-pool output position: the window positions inside the
// input, or inside the padded input with count_include_pad (ONNX). Nullopt when every
// position has the full window.
std::optional<Tensor> AverageDivisors(const Attrs& a, const Shape& in, const Shape& out) {
  const int spatial = static_cast<int>(a.kernel.size());
  Shape out_spatial(out.begin() + 2, out.end());
  std::vector<double> divisors;
  std::vector<int64_t> o(spatial, 0);
  bool uniform = true;
  const int64_t full = Product(a.kernel);
  for (int64_t flat = 0; flat < NumElements(out_spatial); ++flat) {
    int64_t count = 1;
    for (int d = 0; d < spatial; ++d) {
      int64_t inside = 0;
      for (int64_t k = 0; k < a.kernel[d]; ++k) {
        int64_t pos = o[d] * a.strides[d] + k * a.dilations[d] - a.pads[d];
        int64_t lo = a.count_include_pad ? -a.pads[d] : 0;
        int64_t hi = in[2 + d] + (a.count_include_pad ? a.pads[spatial + d] : 0);
        inside += pos >= lo && pos < hi;
      }
      count *= inside;
    }
    uniform = uniform && count == full;
    divisors.push_back(static_cast<double>(count));
    for (int d = spatial - 1; d >= 0 && ++o[d] == out_spatial[d]; --d) o[d] = 0;
  }
  if (uniform) return std::nullopt;
  return Tensor::FromDoubles(DType::kF32, out_spatial, divisors);
}

// A window sum divided by its count (AverageDivisors).
Value AverageOf(GraphBuilder& b, Value sum, const Attrs& a, const Shape& in, const Shape& out) {
  std::optional<Tensor> divisors = AverageDivisors(a, in, out);
  return divisors ? b.Div(sum, b.Cast(b.Constant(std::move(*divisors)), b.dtype(sum)))
                  : b.MulScalar(sum, 1.0 / static_cast<double>(Product(a.kernel)));
}

Value Pool(GraphBuilder& b, Value x, const Node& pool) {
  const Attrs& a = pool.attrs;
  const int spatial = static_cast<int>(a.kernel.size());
  const DType dtype = b.dtype(x);
  const bool is_max = pool.op == OpCode::kMaxPool;
  Value fill = b.Scalar(is_max ? LowestValue(dtype) : 0, dtype);
  std::vector<int64_t> taps = TrailingAxes(2 + 2 * spatial, spatial);
  const bool unrolled = Product(a.kernel) <= kMaxUnrolledTaps;
  const DType acc = IsHalf(dtype) && !is_max ? DType::kF32 : dtype;  // sums of halves in f32; max is exact
  auto upcast = [&](Value tap, int64_t) { return b.Cast(tap, acc); };
  if (unrolled) {
    Value combined = CombineTaps(b, x, fill, a, pool.shape, is_max ? OpCode::kMax : OpCode::kAdd, upcast);
    if (is_max) return combined;
    return b.Cast(AverageOf(b, combined, a, b.shape(x), pool.shape), dtype);
  }
  Value windows = b.Window(x, fill, ParamsOf(a));
  if (is_max) return b.Reduce(OpCode::kReduceMax, windows, taps, /*keepdims=*/false);
  Value sum = b.Reduce(OpCode::kReduceSum, b.Cast(windows, acc), taps, /*keepdims=*/false);
  return b.Cast(AverageOf(b, sum, a, b.shape(x), pool.shape), dtype);
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
    rewriter.SetMap(node.id, node.op == OpCode::kConv ? Conv(b, inputs, node.attrs, node.shape) : Pool(b, inputs[0], node));
  }
  return rewriter.Finish();
}

}  // namespace tilefuse
