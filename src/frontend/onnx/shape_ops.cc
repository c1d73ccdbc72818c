// Ops that reorganise data: Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat,
// Split, Slice, Expand, Tile, and the shape queries Shape and Size (which become
// constants, since shapes are static).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "frontend/onnx/handler_util.h"
#include "frontend/onnx/op_registry.h"
#include "frontend/onnx/tensor_proto.h"

namespace tilefuse::onnx_import {

namespace {

// ONNX Reshape's shape input: 0 copies the input's dim (unless allowzero), -1 is
// inferred from the element count.
StatusOr<Shape> ResolveReshape(const Shape& in, const std::vector<int64_t>& spec, bool allowzero) {
  Shape out;
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == 0 && !allowzero) {
      if (i >= in.size()) return InvalidArgument(fmt::format("shape {} copies dim {} of a rank-{} input", spec, i, in.size()));
      d = in[i];
    } else if (d == -1) {
      if (inferred >= 0) return InvalidArgument(fmt::format("shape {} has more than one -1", spec));
      inferred = static_cast<int>(i);
      d = 1;
    } else if (d < 0) {
      return InvalidArgument(fmt::format("shape {} has a negative dim", spec));
    }
    out.push_back(d);
    if (d > 0 && known > kMaxValueElements / d)
      return InvalidArgument(fmt::format("shape {} has more than {} elements", spec, kMaxValueElements));
    known *= d;
  }
  int64_t total = NumElements(in);
  if (inferred >= 0) {
    if (known == 0 || total % known != 0)
      return InvalidArgument(fmt::format("cannot reshape {} to {}", ShapeToString(in), spec));
    out[inferred] = total / known;
  }
  if (NumElements(out) != total) return InvalidArgument(fmt::format("cannot reshape {} to {}", ShapeToString(in), spec));
  return out;
}

Status ImportReshape(NodeContext& ctx) {
  Value x = ctx.Input(0);
  ASSIGN_OR_RETURN(std::vector<int64_t> spec, ctx.ConstInts(1, "shape"));
  ASSIGN_OR_RETURN(Shape shape, ResolveReshape(ctx.b().shape(x), spec, ctx.Int("allowzero", 0) != 0));
  ctx.SetOutput(0, ctx.b().Reshape(x, shape));
  return Status::Ok();
}

Status ImportFlatten(NodeContext& ctx) {
  Value x = ctx.Input(0);
  Shape shape = ctx.b().shape(x);
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t axis = ctx.Int("axis", 1);
  if (axis < -rank || axis > rank) return InvalidArgument(fmt::format("axis {} is out of range for rank {}", axis, rank));
  if (axis < 0) axis += rank;
  Shape outer(shape.begin(), shape.begin() + axis), inner(shape.begin() + axis, shape.end());
  ctx.SetOutput(0, ctx.b().Reshape(x, {NumElements(outer), NumElements(inner)}));
  return Status::Ok();
}

Status ImportTranspose(NodeContext& ctx) {
  Value x = ctx.Input(0);
  std::vector<int64_t> perm = ctx.Ints("perm");
  if (!ctx.HasAttr("perm"))  // default: reverse the dims
    for (int d = ctx.b().rank(x) - 1; d >= 0; --d) perm.push_back(d);
  for (int64_t& p : perm) {
    ASSIGN_OR_RETURN(p, NormalizeOnnxAxis(p, ctx.b().rank(x), "perm entry"));
  }
  ctx.SetOutput(0, ctx.b().Transpose(ctx.Input(0), perm));
  return Status::Ok();
}

Status ImportSqueeze(NodeContext& ctx) {
  ASSIGN_OR_RETURN(auto axes, ctx.IntsAttrOrInput("axes", 1));
  int rank = ctx.b().rank(ctx.Input(0));
  for (size_t i = 0; axes && i < axes->size(); ++i) {  // the builder takes axis 0 of a scalar
    RETURN_IF_ERROR(NormalizeOnnxAxis((*axes)[i], rank, "squeeze axis").status());
  }
  ctx.SetOutput(0, ctx.b().Squeeze(ctx.Input(0), axes.value_or(std::vector<int64_t>{})));
  return Status::Ok();
}

Status ImportUnsqueeze(NodeContext& ctx) {
  ASSIGN_OR_RETURN(auto axes, ctx.IntsAttrOrInput("axes", 1));
  if (!axes) return InvalidArgument("Unsqueeze needs axes (an attribute before opset 13, an input from 13)");
  ctx.SetOutput(0, ctx.b().Unsqueeze(ctx.Input(0), *axes));
  return Status::Ok();
}

Status ImportConcat(NodeContext& ctx) {
  if (!ctx.HasAttr("axis")) return InvalidArgument("attribute 'axis' is missing");
  ctx.SetOutput(0, ctx.b().Concat(ctx.Inputs(), ctx.Int("axis", 0)));
  return Status::Ok();
}

// Split sizes come from the `split` attribute (before 13) or input (from 13); without
// them the dim is split evenly among the outputs, or (opset 18) into `num_outputs`
// chunks of ceil(dim / n), the last one smaller.
StatusOr<std::vector<int64_t>> SplitSizes(NodeContext& ctx, int64_t dim) {
  ASSIGN_OR_RETURN(auto sizes, ctx.IntsAttrOrInput("split", 1));
  if (sizes) {
    int64_t total = 0;  // checked as it goes: the sum of arbitrary sizes may overflow
    for (int64_t size : *sizes) {
      if (size < 0 || size > dim - total)
        return InvalidArgument(fmt::format("split sizes {} do not add up to the dim of size {}", *sizes, dim));
      total += size;
    }
    return *sizes;
  }
  int64_t parts = ctx.HasAttr("num_outputs") ? ctx.Int("num_outputs", 1) : ctx.num_outputs();
  if (parts <= 0 || parts != ctx.num_outputs())
    return InvalidArgument(fmt::format("num_outputs {} differs from the node's {} outputs", parts, ctx.num_outputs()));
  bool uneven_allowed = ctx.HasAttr("num_outputs");
  int64_t chunk = uneven_allowed ? (dim + parts - 1) / parts : dim / parts;
  if (!uneven_allowed && dim % parts != 0)
    return InvalidArgument(fmt::format("cannot split a dim of {} evenly into {} outputs", dim, parts));
  std::vector<int64_t> result;
  for (int64_t i = 0, left = dim; i < parts; ++i, left -= chunk) result.push_back(std::clamp<int64_t>(left, 0, chunk));
  return result;
}

Status ImportSplit(NodeContext& ctx) {
  Value x = ctx.Input(0);
  ASSIGN_OR_RETURN(int64_t axis, NormalizeOnnxAxis(ctx.Int("axis", 0), ctx.b().rank(x), "axis"));
  ASSIGN_OR_RETURN(std::vector<int64_t> sizes, SplitSizes(ctx, ctx.b().shape(x)[axis]));
  if (static_cast<int>(sizes.size()) != ctx.num_outputs())
    return InvalidArgument(fmt::format("split has {} sizes for {} outputs", sizes.size(), ctx.num_outputs()));
  std::vector<Value> parts = ctx.b().Split(x, axis, sizes);
  for (size_t i = 0; i < parts.size(); ++i) ctx.SetOutput(static_cast<int>(i), parts[i]);
  return Status::Ok();
}

// starts/ends/axes are attributes before opset 10 and inputs from then on.
Status ImportSlice(NodeContext& ctx) {
  ASSIGN_OR_RETURN(auto starts, ctx.IntsAttrOrInput("starts", 1));
  ASSIGN_OR_RETURN(auto ends, ctx.IntsAttrOrInput("ends", 2));
  ASSIGN_OR_RETURN(auto axes, ctx.IntsAttrOrInput("axes", 3));
  ASSIGN_OR_RETURN(auto steps, ctx.IntsAttrOrInput("steps", 4));
  if (!starts || !ends) return InvalidArgument("Slice needs starts and ends");
  if (ctx.b().rank(ctx.Input(0)) == 0)  // the builder takes axis 0 of a scalar
    return InvalidArgument("Slice needs an input of rank 1 or more, got a scalar");
  for (size_t i = 0; steps && i < steps->size(); ++i)  // a step past every dim only overflows
    if ((*steps)[i] < -kMaxValueElements || (*steps)[i] > kMaxValueElements)
      return InvalidArgument(fmt::format("Slice steps {} exceed {} in magnitude", *steps, kMaxValueElements));
  ctx.SetOutput(0, ctx.b().Slice(ctx.Input(0), *starts, *ends, axes.value_or(std::vector<int64_t>{}),
                                 steps.value_or(std::vector<int64_t>{})));
  return Status::Ok();
}

// Expand broadcasts both ways: the result has the numpy broadcast of both shapes.
Status ImportExpand(NodeContext& ctx) {
  Value x = ctx.Input(0);
  ASSIGN_OR_RETURN(std::vector<int64_t> target, ctx.ConstInts(1, "shape"));
  Shape in = ctx.b().shape(x);
  size_t rank = std::max(in.size(), target.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t a = i + in.size() >= rank ? in[i + in.size() - rank] : 1;
    int64_t t = i + target.size() >= rank ? target[i + target.size() - rank] : 1;
    if (a != t && a != 1 && t != 1)
      return InvalidArgument(fmt::format("cannot expand {} to {}", ShapeToString(in), target));
    out[i] = a == 1 ? t : a;
  }
  ctx.SetOutput(0, ctx.b().BroadcastTo(x, out));
  return Status::Ok();
}

// Tile as views: [d0, d1] → reshape [1, d0, 1, d1] → broadcast [r0, d0, r1, d1] →
// reshape [r0 * d0, r1 * d1].
Status ImportTile(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  ASSIGN_OR_RETURN(std::vector<int64_t> repeats, ctx.ConstInts(1, "repeats"));
  Shape in = b.shape(x);
  if (repeats.size() != in.size())
    return InvalidArgument(fmt::format("repeats {} must have one entry per dim of {}", repeats, ShapeToString(in)));
  Shape interleaved, broadcast, out;
  for (size_t d = 0; d < in.size(); ++d) {
    if (repeats[d] < 0) return InvalidArgument(fmt::format("negative repeat {}", repeats[d]));
    if (repeats[d] > kMaxValueElements / std::max<int64_t>(in[d], 1))  // bounded on empty dims too
      return InvalidArgument(fmt::format("repeats {} make dim {} of {} larger than {}", repeats, d, ShapeToString(in),
                                         kMaxValueElements));
    interleaved.insert(interleaved.end(), {1, in[d]});
    broadcast.insert(broadcast.end(), {repeats[d], in[d]});
    out.push_back(repeats[d] * in[d]);
  }
  // The whole broadcast too (its non-zero dims, as CheckShapeSize counts): the final
  // reshape counts its elements before the importer checks the result.
  if (!CheckShapeSize(broadcast, kMaxValueElements, "").ok())
    return InvalidArgument(fmt::format("repeats {} make a result of more than {} elements from {}", repeats,
                                       kMaxValueElements, ShapeToString(in)));
  ctx.SetOutput(0, b.Reshape(b.BroadcastTo(b.Reshape(x, interleaved), broadcast), out));
  return Status::Ok();
}

Status ImportShape(NodeContext& ctx) {
  Shape shape = ctx.b().shape(ctx.Input(0));
  int64_t rank = static_cast<int64_t>(shape.size());
  auto clamp_index = [rank](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + rank : i, 0, rank); };
  int64_t start = clamp_index(ctx.Int("start", 0)), end = clamp_index(ctx.Int("end", rank));
  std::vector<double> dims;
  for (int64_t d = start; d < end; ++d) dims.push_back(static_cast<double>(shape[d]));
  ctx.SetOutput(0, ctx.b().Constant(Tensor::FromDoubles(DType::kI64, {static_cast<int64_t>(dims.size())}, dims)));
  return Status::Ok();
}

Status ImportSize(NodeContext& ctx) {
  double count = static_cast<double>(NumElements(ctx.b().shape(ctx.Input(0))));
  ctx.SetOutput(0, ctx.b().Scalar(count, DType::kI64));
  return Status::Ok();
}

// DepthToSpace and SpaceToDepth move blocks between channels and pixels: a reshape
// that splits the block dims out, a transpose, and a reshape that merges them back.
template <bool kToSpace>
Status ImportDepthSpace(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  Shape s = b.shape(x);
  int64_t k = ctx.Int("blocksize", 0);
  if (s.size() != 4 || k <= 0) return InvalidArgument("needs an [N, C, H, W] input and a positive blocksize");
  int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  if (kToSpace) {
    // k > c / k first: k² beyond the channels never divides them (and may overflow).
    if (k > c / k || c % (k * k) != 0)
      return InvalidArgument(fmt::format("channels {} are not divisible by blocksize² ({}²)", c, k));
    bool crd = ctx.String("mode", "DCR") == "CRD";
    Shape split = crd ? Shape{n, c / (k * k), k, k, h, w} : Shape{n, k, k, c / (k * k), h, w};
    std::vector<int64_t> perm = crd ? std::vector<int64_t>{0, 1, 4, 2, 5, 3} : std::vector<int64_t>{0, 3, 4, 1, 5, 2};
    ctx.SetOutput(0, b.Reshape(b.Transpose(b.Reshape(x, split), perm), {n, c / (k * k), h * k, w * k}));
  } else {
    if (h % k != 0 || w % k != 0) return InvalidArgument(fmt::format("height and width must be divisible by {}", k));
    Value split = b.Reshape(x, {n, c, h / k, k, w / k, k});
    ctx.SetOutput(0, b.Reshape(b.Transpose(split, {0, 3, 5, 1, 2, 4}), {n, c * k * k, h / k, w / k}));
  }
  return Status::Ok();
}

}  // namespace

void RegisterShapeOps(OpRegistry& r) {
  r.Add("DepthToSpace", ImportDepthSpace<true>, 1, 1);
  r.Add("SpaceToDepth", ImportDepthSpace<false>, 1, 1);
  r.Add("Reshape", ImportReshape, 2, 2);
  r.Add("Flatten", ImportFlatten, 1, 1);
  r.Add("Transpose", ImportTranspose, 1, 1);
  r.Add("Squeeze", ImportSqueeze, 1, 2);
  r.Add("Unsqueeze", ImportUnsqueeze, 1, 2);
  r.Add("Concat", ImportConcat, 1, -1);
  r.Add("Split", ImportSplit, 1, 2);
  r.Add("Slice", ImportSlice, 1, 5);
  r.Add("Expand", ImportExpand, 2, 2);
  r.Add("Tile", ImportTile, 2, 2);
  r.Add("Shape", ImportShape, 1, 1);
  r.Add("Size", ImportSize, 1, 1);
}

}  // namespace tilefuse::onnx_import
