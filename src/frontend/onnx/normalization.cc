// Normalizations. LayerNormalization becomes the builder's composite; Batch- and
// InstanceNormalization (inference) are written out in primitives.
#include <fmt/format.h>

#include "frontend/onnx/handler_util.h"
#include "frontend/onnx/op_registry.h"
#include "frontend/onnx/tensor_proto.h"

namespace tilefuse::onnx_import {

namespace {

// Scale and bias may be given in any shape that broadcasts to the normalized dims.
Value FitToShape(GraphBuilder& b, Value v, const Shape& shape) {
  if (!v.valid() || !b.ok() || b.shape(v) == shape) return v;
  return b.BroadcastTo(v, shape);
}

// LayerNormalization's optional outputs 1 and 2: the mean and 1 / sqrt(var + epsilon)
// over the normalized dims, kept as dims of size 1. Spelled out here (only when a
// model asks for them) because the composite has a single output.
void SetLayerNormStatistics(NodeContext& ctx, Value x, int64_t axis, double epsilon) {
  GraphBuilder& b = ctx.b();
  if (!b.ok()) return;
  std::vector<int64_t> axes;
  for (int64_t d = axis; d < b.rank(x); ++d) axes.push_back(d);
  Value mean = b.Reduce(OpCode::kReduceMean, x, axes, true);
  Value centered = b.Sub(x, mean);
  Value var = b.Reduce(OpCode::kReduceMean, b.Mul(centered, centered), axes, true);
  ctx.SetOutput(1, mean);
  ctx.SetOutput(2, b.Unary(OpCode::kRsqrt, AddScalar(b, var, epsilon)));
}

Status ImportLayerNormalization(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  ASSIGN_OR_RETURN(int64_t axis, NormalizeOnnxAxis(ctx.Int("axis", -1), b.rank(x), "axis"));
  Shape x_shape = b.shape(x);
  Shape normalized(x_shape.begin() + axis, x_shape.end());
  Value scale = FitToShape(b, ctx.Input(1), normalized);
  Value bias = FitToShape(b, ctx.Input(2), normalized);
  double epsilon = ctx.Float("epsilon", 1e-5);
  ctx.SetOutput(0, b.LayerNorm(x, scale, bias, axis, epsilon));
  if (ctx.WantsOutput(1) || ctx.WantsOutput(2)) {
    ASSIGN_OR_RETURN(DType stash, RequireDType(static_cast<int32_t>(ctx.Int("stash_type", 1)), "stash_type"));
    SetLayerNormStatistics(ctx, b.Cast(x, stash), axis, epsilon);
  }
  return Status::Ok();
}

// A per-channel parameter [C] reshaped to [C, 1, ..., 1] so that it broadcasts over
// the spatial dims of an [N, C, ...] input.
Value PerChannel(GraphBuilder& b, Value param, Value x) {
  if (!b.ok()) return {};
  Shape shape = b.shape(param);
  shape.resize(shape.size() + std::max(b.rank(x) - 2, 0), 1);
  return b.Cast(b.Reshape(param, shape), b.dtype(x));
}

// y = (x - mean) * (scale / sqrt(var + epsilon)) + bias, with running statistics.
Status ImportBatchNormalization(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  if (ctx.Int("training_mode", 0) != 0) return Unimplemented("BatchNormalization in training mode is not supported");
  Value x = ctx.Input(0);
  if (b.rank(x) < 2) return InvalidArgument(fmt::format("BatchNormalization needs rank >= 2, got {}", b.rank(x)));
  for (int i = 1; i <= 4; ++i)
    if (b.shape(ctx.Input(i)) != Shape{b.shape(x)[1]})
      return InvalidArgument(fmt::format("input {} must have shape [{}] (one value per channel), got {}", i,
                                         b.shape(x)[1], ShapeToString(b.shape(ctx.Input(i)))));
  Value scale = PerChannel(b, ctx.Input(1), x), bias = PerChannel(b, ctx.Input(2), x);
  Value mean = PerChannel(b, ctx.Input(3), x), var = PerChannel(b, ctx.Input(4), x);
  Value inv_std = b.Unary(OpCode::kRsqrt, AddScalar(b, var, ctx.Float("epsilon", 1e-5)));
  ctx.SetOutput(0, b.Add(b.Mul(b.Sub(x, mean), b.Mul(scale, inv_std)), bias));
  return Status::Ok();
}

// y = scale * (x - mean) / sqrt(var + epsilon) + bias over each sample's spatial dims.
Status ImportInstanceNormalization(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  if (b.rank(x) < 3) return InvalidArgument(fmt::format("InstanceNormalization needs rank >= 3, got {}", b.rank(x)));
  std::vector<int64_t> spatial;
  for (int d = 2; d < b.rank(x); ++d) spatial.push_back(d);
  Value centered = b.Sub(x, b.Reduce(OpCode::kReduceMean, x, spatial, true));
  Value var = b.Reduce(OpCode::kReduceMean, b.Mul(centered, centered), spatial, true);
  Value normalized = b.Mul(centered, b.Unary(OpCode::kRsqrt, AddScalar(b, var, ctx.Float("epsilon", 1e-5))));
  ctx.SetOutput(0, b.Add(b.Mul(normalized, PerChannel(b, ctx.Input(1), x)), PerChannel(b, ctx.Input(2), x)));
  return Status::Ok();
}

}  // namespace

void RegisterNormalizationOps(OpRegistry& r) {
  r.Add("LayerNormalization", ImportLayerNormalization, 2, 3);
  r.Add("BatchNormalization", ImportBatchNormalization, 5, 5);
  r.Add("InstanceNormalization", ImportInstanceNormalization, 3, 3);
}

}  // namespace tilefuse::onnx_import
