// ConvTranspose as the direct convolution it equals, so that it needs no op of its own:
// the window rewrite and both backends compile it like any Conv.
//
// Note on the equivalence (one axis, stride s, kernel k, dilation d, pads pb and pe,
// output_padding op). ConvTranspose scatters x[i]·w[t] to output (i·s - pb + t·d). The
// same sums come from a stride-1 convolution with the kernel flipped over the input
// with s-1 zeros between its elements, padded by d·(k-1) - pb before and
// d·(k-1) - pe + op after:
//
//   x          a b c                       s = 2, k = 3, d = 1, pb = pe = 1, op = 1
//   dilated    a 0 b 0 c                   (s-1 zeros between elements: views only)
//   padded   0 a 0 b 0 c 0 0               1 = 2 - 1 before, 2 = 2 - 1 + 1 after
//   conv       [w2 w1 w0] slid with stride 1 → 6 outputs = 2·(3-1) + 1 + 3 - 1 - 1
//
// A pad larger than d·(k-1) makes the direct pad negative: the dilated input is cropped
// (one Slice with the zero insertion) instead. The weight [C_in, C_out/g, k...] becomes
// the conv's [C_out, C_in/g, k...] group by group, flipped along every spatial axis;
// when it is constant, the folder computes that once.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "frontend/onnx/handler_util.h"
#include "frontend/onnx/op_registry.h"
#include "frontend/onnx/tensor_proto.h"
#include "support/check.h"

namespace tilefuse::onnx_import {

namespace {

struct TransposeParams {
  std::vector<int64_t> kernel, strides, dilations, output_padding;
  std::vector<int64_t> pads;  // begins then ends; negative when output_shape asks for more
  int64_t group = 1;
};

// floor(v / 2), as the ONNX reference splits a negative total padding.
int64_t FloorHalf(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

// The output size along spatial axis i without any pads: s·(n-1) + op + d·(k-1) + 1.
int64_t FullSize(const Shape& x, const TransposeParams& p, size_t i) {
  return p.strides[i] * (x[2 + i] - 1) + p.output_padding[i] + p.dilations[i] * (p.kernel[i] - 1) + 1;
}

// Ranks, channels, group and kernel_shape against the input and the weight.
Status CheckOperands(NodeContext& ctx, const Shape& x, const Shape& w, TransposeParams& p) {
  GraphBuilder& b = ctx.b();
  if (x.size() < 3 || w.size() != x.size())
    return InvalidArgument(fmt::format("input must be [N, C, spatial...] and the weight [C, M/group, kernel...] "
                                       "of the same rank, got {} and {}", ShapeToString(x), ShapeToString(w)));
  DType dtype = b.dtype(ctx.Input(0));
  bool bias_fits = !ctx.HasInput(2) || b.dtype(ctx.Input(2)) == dtype;
  if (!IsFloat(dtype) || b.dtype(ctx.Input(1)) != dtype || !bias_fits)
    return InvalidArgument("input, weight and bias must have one float dtype");
  for (size_t d = 0; d < w.size(); ++d)
    if (w[d] <= 0) return InvalidArgument(fmt::format("weight {} has an empty dim", ShapeToString(w)));
  for (size_t d = 2; d < x.size(); ++d)
    if (x[d] <= 0) return InvalidArgument(fmt::format("input {} has an empty spatial dim", ShapeToString(x)));
  p.group = ctx.Int("group", 1);
  if (p.group <= 0 || x[1] % p.group != 0 || w[0] != x[1] || w[1] > kMaxValueElements / p.group)
    return InvalidArgument(fmt::format("weight {} does not fit input {} with group {} (the weight is [C, M/group, "
                                       "kernel...])", ShapeToString(w), ShapeToString(x), p.group));
  p.kernel.assign(w.begin() + 2, w.end());
  if (ctx.HasAttr("kernel_shape") && ctx.Ints("kernel_shape") != p.kernel)
    return InvalidArgument(fmt::format("kernel_shape {} disagrees with the weight {}", ctx.Ints("kernel_shape"),
                                       ShapeToString(w)));
  return Status::Ok();
}

// strides, dilations, output_padding and the given pads, checked and bounded so that
// the size arithmetic below cannot overflow.
Status ReadWindowAttrs(NodeContext& ctx, const Shape& x, TransposeParams& p) {
  const size_t spatial = x.size() - 2;
  auto ints_or = [&](const char* name, size_t size, int64_t fallback) {
    return ctx.HasAttr(name) ? ctx.Ints(name) : std::vector<int64_t>(size, fallback);
  };
  p.strides = ints_or("strides", spatial, 1);
  p.dilations = ints_or("dilations", spatial, 1);
  p.output_padding = ints_or("output_padding", spatial, 0);
  p.pads = ints_or("pads", 2 * spatial, 0);
  if (p.strides.size() != spatial || p.dilations.size() != spatial || p.output_padding.size() != spatial ||
      p.pads.size() != 2 * spatial)
    return InvalidArgument(fmt::format("strides {}, dilations {}, output_padding {} and pads {} do not fit {} "
                                       "spatial dims", p.strides, p.dilations, p.output_padding, p.pads, spatial));
  for (size_t i = 0; i < spatial; ++i) {
    int64_t s = p.strides[i], d = p.dilations[i], n = x[2 + i];
    if (s <= 0 || d <= 0 || p.pads[i] < 0 || p.pads[spatial + i] < 0 || p.output_padding[i] < 0)
      return InvalidArgument(fmt::format("strides {} and dilations {} must be positive, pads {} and output_padding "
                                         "{} non-negative", p.strides, p.dilations, p.pads, p.output_padding));
    if (s > kMaxValueElements / n || d > kMaxValueElements / p.kernel[i] || p.pads[i] > kMaxValueElements ||
        p.pads[spatial + i] > kMaxValueElements)
      return InvalidArgument(fmt::format("strides {}, dilations {} or pads {} exceed {} with input {} and kernel {}",
                                         p.strides, p.dilations, p.pads, kMaxValueElements, ShapeToString(x),
                                         p.kernel));
    if (p.output_padding[i] >= std::max(s, d))
      return InvalidArgument(fmt::format("output_padding {} must be less than the stride or the dilation ({} and {})",
                                         p.output_padding, p.strides, p.dilations));
  }
  return Status::Ok();
}

// Pads from auto_pad and output_shape (ONNX ConvTranspose-11): a given output_shape,
// or in·stride for SAME_*, fixes the total; SAME_UPPER puts the odd element at the end,
// everything else at the begin. Explicit pads are ignored then, as the spec says.
Status ResolvePads(NodeContext& ctx, const Shape& x, TransposeParams& p) {
  const size_t spatial = x.size() - 2;
  std::string auto_pad = ctx.String("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    return InvalidArgument(fmt::format("unknown auto_pad '{}'", auto_pad));
  bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  bool has_output_shape = ctx.HasAttr("output_shape");
  if (ctx.opset() < 11 && (same || has_output_shape))
    return Unimplemented("ConvTranspose before opset 11 splits the padding of auto_pad and output_shape differently; "
                         "only explicit pads are supported there");
  if (auto_pad == "VALID") p.pads.assign(2 * spatial, 0);
  if (!has_output_shape && !same) return Status::Ok();
  std::vector<int64_t> target(spatial);
  for (size_t i = 0; i < spatial; ++i) target[i] = x[2 + i] * p.strides[i];  // bounded by ReadWindowAttrs
  if (has_output_shape) {
    target = ctx.Ints("output_shape");
    if (target.size() != spatial)
      return InvalidArgument(fmt::format("output_shape {} must have one size per spatial dim ({})", target, spatial));
    for (int64_t size : target)
      if (size <= 0 || size > kMaxValueElements)
        return InvalidArgument(
            fmt::format("output_shape {} must be positive and at most {}", target, kMaxValueElements));
  }
  for (size_t i = 0; i < spatial; ++i) {
    int64_t total = FullSize(x, p, i) - target[i];
    if (auto_pad == "VALID" && total != 0)
      return InvalidArgument(fmt::format("output_shape {} needs padding, which auto_pad VALID excludes", target));
    int64_t half = FloorHalf(total);
    p.pads[i] = auto_pad == "SAME_UPPER" ? half : total - half;
    p.pads[spatial + i] = total - p.pads[i];
  }
  return Status::Ok();
}

// Inserts stride-1 zeros between the elements of x along `axis` and keeps
// [crop_begin, length - crop_end) of the result, through views only:
// [.., n, ..] → [.., n, 1, ..] ++ zeros [.., n, s-1, ..] → [.., n·s, ..] → slice.
Value DilateAndCrop(GraphBuilder& b, Value x, int64_t axis, int64_t stride, int64_t crop_begin, int64_t crop_end) {
  Shape shape = b.shape(x);
  const int64_t n = shape[axis];
  if (stride > 1 && n > 1) {
    Shape column = shape;
    column.insert(column.begin() + axis + 1, 1);
    Shape zeros = column;
    zeros[axis + 1] = stride - 1;
    Value spread = b.Concat({b.Reshape(x, column), b.BroadcastTo(ScalarLike(b, x, 0), zeros)}, axis + 1);
    shape[axis] = n * stride;
    x = b.Reshape(spread, shape);
  }
  const int64_t length = stride * (n - 1) + 1;
  return b.Slice(x, {crop_begin}, {length - crop_end}, {axis}, {1});
}

// [C_in, C_out/g, k...] → [C_out, C_in/g, k...] per group, flipped along every spatial axis.
Value DirectWeight(GraphBuilder& b, Value w, int64_t group) {
  Shape shape = b.shape(w);
  const int64_t cig = shape[0] / group, cog = shape[1];
  Shape grouped = {group, cig, cog};
  grouped.insert(grouped.end(), shape.begin() + 2, shape.end());
  std::vector<int64_t> perm = {0, 2, 1};
  for (size_t d = 3; d < grouped.size(); ++d) perm.push_back(static_cast<int64_t>(d));
  Shape direct = {group * cog, cig};
  direct.insert(direct.end(), shape.begin() + 2, shape.end());
  Value v = b.Reshape(b.Transpose(b.Reshape(w, grouped), perm), direct);
  std::vector<int64_t> starts, ends, axes, steps;
  for (size_t d = 2; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    starts.push_back(-1);
    ends.push_back(-shape[d] - 1);  // before element 0
    axes.push_back(static_cast<int64_t>(d));
    steps.push_back(-1);
  }
  return axes.empty() ? v : b.Slice(v, starts, ends, axes, steps);
}

// The direct convolution that equals the transposed one, and the crop of its input.
struct DirectConv {
  PoolParams params;                          // stride 1, pads non-negative
  std::vector<int64_t> crop_begin, crop_end;  // of the zero-dilated input, per spatial dim
  Shape out;
  Shape spread;            // the input with its zeros before the crop: the largest view built
  bool input_left = true;  // false when the crops remove every input element
};

StatusOr<DirectConv> PlanDirectConv(const Shape& x, const TransposeParams& p, int64_t c_out) {
  const size_t spatial = x.size() - 2;
  DirectConv c;
  c.params.kernel = p.kernel;
  c.params.strides.assign(spatial, 1);
  c.params.dilations = p.dilations;
  c.params.pads.assign(2 * spatial, 0);
  c.params.group = p.group;
  c.out = {x[0], c_out};
  c.spread = {x[0], x[1]};
  for (size_t i = 0; i < spatial; ++i) {
    int64_t size = FullSize(x, p, i) - p.pads[i] - p.pads[spatial + i];
    if (size <= 0)
      return InvalidArgument(fmt::format("pads {} leave no output along spatial dim {} of input {}", p.pads, i,
                                         ShapeToString(x)));
    c.out.push_back(size);
    const int64_t span = p.dilations[i] * (p.kernel[i] - 1);
    const int64_t begin = span - p.pads[i], end = span - p.pads[spatial + i] + p.output_padding[i];
    c.params.pads[i] = std::max<int64_t>(begin, 0);
    c.params.pads[spatial + i] = std::max<int64_t>(end, 0);
    c.crop_begin.push_back(std::max<int64_t>(-begin, 0));
    c.crop_end.push_back(std::max<int64_t>(-end, 0));
    c.input_left = c.input_left && p.strides[i] * (x[2 + i] - 1) + 1 - c.crop_begin[i] - c.crop_end[i] > 0;
    c.spread.push_back(p.strides[i] * x[2 + i]);
  }
  RETURN_IF_ERROR(CheckShapeSize(c.out, kMaxValueElements, "the output"));
  RETURN_IF_ERROR(CheckShapeSize(c.spread, kMaxValueElements, "the input with zeros between its elements"));
  return c;
}

Status ImportConvTranspose(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0), w = ctx.Input(1), bias = ctx.Input(2);
  const Shape x_shape = b.shape(x), w_shape = b.shape(w);
  TransposeParams p;
  RETURN_IF_ERROR(CheckOperands(ctx, x_shape, w_shape, p));
  RETURN_IF_ERROR(ReadWindowAttrs(ctx, x_shape, p));
  RETURN_IF_ERROR(ResolvePads(ctx, x_shape, p));
  RETURN_IF_ERROR(b.status());  // a mistyped attribute
  const int64_t c_out = w_shape[1] * p.group;
  if (bias.valid() && b.shape(bias) != Shape{c_out})
    return InvalidArgument(fmt::format("bias {} must have one value per output channel ({})",
                                       ShapeToString(b.shape(bias)), c_out));
  ASSIGN_OR_RETURN(DirectConv direct, PlanDirectConv(x_shape, p, c_out));
  Value y;
  if (!direct.input_left) {  // only zeros (and the bias) reach the output
    Shape channel(direct.out.size() - 1, 1);
    channel[0] = c_out;
    y = b.BroadcastTo(ScalarLike(b, x, 0), direct.out);
    if (bias.valid()) y = b.Add(y, b.Reshape(bias, channel));
  } else {
    for (size_t i = 0; i + 2 < x_shape.size(); ++i)
      x = DilateAndCrop(b, x, static_cast<int64_t>(2 + i), p.strides[i], direct.crop_begin[i], direct.crop_end[i]);
    y = b.Conv(x, DirectWeight(b, w, p.group), bias, direct.params);
  }
  RETURN_IF_ERROR(b.status());
  TF_CHECK(b.shape(y) == direct.out);
  ctx.SetOutput(0, y);
  return Status::Ok();
}

}  // namespace

void RegisterConvTransposeOps(OpRegistry& r) { r.Add("ConvTranspose", ImportConvTranspose, 2, 3); }

}  // namespace tilefuse::onnx_import
