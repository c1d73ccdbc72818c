// Convolution and pooling as the IR's conv and pool ops (rewritten into window views,
// matmuls and reductions by passes/window_ops; their reference kernels stay the oracle).
// Global pools are reductions over the spatial dims.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "frontend/onnx/handler_util.h"
#include "frontend/onnx/op_registry.h"
#include "frontend/onnx/tensor_proto.h"

namespace tilefuse::onnx_import {

namespace {

// Pads for auto_pad SAME_*: the output has ceil(in / stride) elements, the total
// padding is split evenly, the odd element at the end (UPPER) or the begin (LOWER).
void SamePads(const Shape& x, PoolParams& p, bool upper) {
  size_t spatial = p.kernel.size();
  for (size_t i = 0; i < spatial; ++i) {
    int64_t in = x[2 + i], stride = p.strides[i];
    int64_t out = (in + stride - 1) / stride;
    int64_t effective = (p.kernel[i] - 1) * p.dilations[i] + 1;
    int64_t total = std::max<int64_t>((out - 1) * stride + effective - in, 0);
    int64_t small = total / 2, large = total - small;
    p.pads[i] = upper ? small : large;
    p.pads[spatial + i] = upper ? large : small;
  }
}

// ceil_mode: one more output element where a partial window remains, provided it
// starts inside the input or its begin padding; emulated by padding the end.
void ApplyCeilMode(const Shape& x, PoolParams& p) {
  size_t spatial = p.kernel.size();
  for (size_t i = 0; i < spatial; ++i) {
    int64_t in = x[2 + i], stride = p.strides[i], begin = p.pads[i], end = p.pads[spatial + i];
    int64_t effective = (p.kernel[i] - 1) * p.dilations[i] + 1;
    int64_t span = in + begin + end - effective;
    if (span < 0) continue;
    int64_t out = (span + stride - 1) / stride + 1;
    if ((out - 1) * stride >= in + begin) --out;
    p.pads[spatial + i] = std::max<int64_t>(end, (out - 1) * stride + effective - in - begin);
  }
}

// Window attributes shared by Conv and the pools. `kernel` comes from kernel_shape or,
// for Conv, from the weight.
StatusOr<PoolParams> WindowParams(NodeContext& ctx, const Shape& x, std::vector<int64_t> kernel) {
  if (x.size() < 3) return InvalidArgument(fmt::format("input must be [N, C, spatial...], got {}", ShapeToString(x)));
  size_t spatial = x.size() - 2;
  PoolParams p;
  p.kernel = ctx.HasAttr("kernel_shape") ? ctx.Ints("kernel_shape") : std::move(kernel);
  p.strides = ctx.HasAttr("strides") ? ctx.Ints("strides") : std::vector<int64_t>(spatial, 1);
  p.dilations = ctx.HasAttr("dilations") ? ctx.Ints("dilations") : std::vector<int64_t>(spatial, 1);
  p.pads = ctx.HasAttr("pads") ? ctx.Ints("pads") : std::vector<int64_t>(2 * spatial, 0);
  if (p.kernel.size() != spatial || p.strides.size() != spatial || p.dilations.size() != spatial ||
      p.pads.size() != 2 * spatial)
    return InvalidArgument(fmt::format("kernel_shape {}, strides {}, dilations {} and pads {} do not fit {} spatial dims",
                                       p.kernel, p.strides, p.dilations, p.pads, spatial));
  for (size_t i = 0; i < spatial; ++i)
    if (p.kernel[i] <= 0 || p.strides[i] <= 0 || p.dilations[i] <= 0 || p.pads[i] < 0 || p.pads[spatial + i] < 0)
      return InvalidArgument("kernel_shape, strides and dilations must be positive, pads non-negative");
  // Bounded so that window arithmetic ((kernel - 1) * dilation + 1, in + pads) cannot
  // overflow: no real window comes near.
  for (size_t i = 0; i < spatial; ++i)
    if (p.strides[i] > kMaxValueElements || p.pads[i] > kMaxValueElements || p.pads[spatial + i] > kMaxValueElements ||
        p.kernel[i] > kMaxValueElements || p.dilations[i] > kMaxValueElements / p.kernel[i])
      return InvalidArgument(fmt::format("kernel_shape {}, strides {}, dilations {} or pads {} exceed {}", p.kernel,
                                         p.strides, p.dilations, p.pads, kMaxValueElements));
  std::string auto_pad = ctx.String("auto_pad", "NOTSET");
  if (auto_pad == "VALID") p.pads.assign(2 * spatial, 0);
  else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") SamePads(x, p, auto_pad == "SAME_UPPER");
  else if (auto_pad != "NOTSET") return InvalidArgument(fmt::format("unknown auto_pad '{}'", auto_pad));
  return p;
}

Status ImportConv(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0), w = ctx.Input(1);
  Shape weight = b.shape(w);
  std::vector<int64_t> kernel(weight.size() > 2 ? weight.begin() + 2 : weight.end(), weight.end());
  ASSIGN_OR_RETURN(PoolParams p, WindowParams(ctx, b.shape(x), kernel));
  p.group = ctx.Int("group", 1);
  ctx.SetOutput(0, b.Conv(x, w, ctx.Input(2), p));
  return Status::Ok();
}

template <bool kMax>
Status ImportPool(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  if (!ctx.HasAttr("kernel_shape")) return InvalidArgument("attribute 'kernel_shape' is missing");
  ASSIGN_OR_RETURN(PoolParams p, WindowParams(ctx, b.shape(x), {}));
  p.count_include_pad = ctx.Int("count_include_pad", 0) != 0;
  if (ctx.Int("ceil_mode", 0) != 0) {
    // The extra end padding must not count as elements of the window.
    if (!kMax && p.count_include_pad)
      return Unimplemented("AveragePool with both ceil_mode and count_include_pad is not supported");
    ApplyCeilMode(b.shape(x), p);
  }
  if (kMax && ctx.Int("storage_order", 0) != 0) return Unimplemented("MaxPool storage_order 1 is not supported");
  // MaxPool's Indices output stays unset: an error only if used.
  ctx.SetOutput(0, kMax ? b.MaxPool(x, p) : b.AveragePool(x, p));
  return Status::Ok();
}

template <OpCode kReduce>
Status ImportGlobalPool(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  if (b.rank(x) < 3) return InvalidArgument(fmt::format("input must be [N, C, spatial...], got {}", ShapeToString(b.shape(x))));
  std::vector<int64_t> spatial;
  for (int d = 2; d < b.rank(x); ++d) spatial.push_back(d);
  ctx.SetOutput(0, b.Reduce(kReduce, x, spatial, true));
  return Status::Ok();
}

}  // namespace

void RegisterNnOps(OpRegistry& r) {
  r.Add("Conv", ImportConv, 2, 3);
  r.Add("MaxPool", ImportPool<true>, 1, 1);
  r.Add("AveragePool", ImportPool<false>, 1, 1);
  r.Add("GlobalAveragePool", ImportGlobalPool<OpCode::kReduceMean>, 1, 1);
  r.Add("GlobalMaxPool", ImportGlobalPool<OpCode::kReduceMax>, 1, 1);
}

}  // namespace tilefuse::onnx_import
