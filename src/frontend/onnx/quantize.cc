// QuantizeLinear and DequantizeLinear, written out in primitives as the ONNX reference
// defines them, per tensor or per axis (the scale and zero point scalars, or 1-D along
// `axis`) or in blocks along it (`block_size`), for int8, uint8 and the 8-bit floats:
//
//   DequantizeLinear  y = (x - zero_point) · scale, computed in f32, y of the scale's type
//   QuantizeLinear    integers: y = clamp(round_half_even(x / scale) + zero_point) to the type's range
//                     8-bit floats: y = cast(x / scale) with the `saturate` attribute
//   DynamicQuantizeLinear  uint8 with the scale and zero point computed from x's range (and 0)
//
// A blocked scale is repeated to x's shape (RepeatedBlocks), the form the FP8 product's
// block-scaled variant recognises (passes/fp8_products.h).
#include <fmt/format.h>

#include "frontend/onnx/handler_util.h"
#include "frontend/onnx/op_registry.h"
#include "frontend/onnx/tensor_proto.h"

namespace tilefuse::onnx_import {

namespace {

// A blocked scale or zero point (`block_size` B along `axis`: x's rank, one value per B
// elements there, x's extents elsewhere) repeated to x's shape: each value B times along the
// axis, the last block cut at x's extent.
StatusOr<Value> RepeatedBlocks(GraphBuilder& b, Value v, const Shape& x_shape, int64_t axis, int64_t block, const char* what) {
  Shape shape = b.shape(v);
  const int64_t extent = x_shape[axis], blocks = shape.size() == x_shape.size() ? shape[axis] : -1;
  bool fits = blocks > 0 && blocks * block >= extent && (blocks - 1) * block < extent;
  for (size_t d = 0; fits && d < shape.size(); ++d) fits = static_cast<int64_t>(d) == axis || shape[d] == x_shape[d];
  if (!fits)
    return InvalidArgument(fmt::format("the {} has shape {}; blocks of {} along axis {} of x {} need one value per block there "
                                       "and x's extents elsewhere",
                                       what, ShapeToString(shape), block, axis, ShapeToString(x_shape)));
  Shape split = shape, repeated = shape;
  split.insert(split.begin() + axis + 1, 1);
  repeated.insert(repeated.begin() + axis + 1, block);
  Shape whole = shape;
  whole[axis] = blocks * block;
  Value out = b.Reshape(b.BroadcastTo(b.Reshape(v, split), repeated), whole);
  return whole[axis] == extent ? out : b.Slice(out, {0}, {extent}, {axis}, {});
}

// `v` (a scale or zero point) shaped to broadcast against `x` along `axis`: a scalar stays
// one; a 1-D value of x's extent there becomes [1, .., extent, .., 1]; a blocked one
// (`block_size`) is repeated to x's shape.
StatusOr<Value> ShapedAlongAxis(NodeContext& ctx, Value v, Value x, const char* what) {
  GraphBuilder& b = ctx.b();
  const Shape& shape = b.shape(v);
  const Shape& x_shape = b.shape(x);
  if (NumElements(shape) == 1 && shape.size() <= 1) return b.Reshape(v, {});
  ASSIGN_OR_RETURN(int64_t axis, NormalizeOnnxAxis(ctx.Int("axis", 1), static_cast<int64_t>(x_shape.size()), "axis"));
  if (const int64_t block = ctx.Int("block_size", 0); block != 0) {
    if (block < 0) return InvalidArgument(fmt::format("block_size {} is negative", block));
    return RepeatedBlocks(b, v, x_shape, axis, block, what);
  }
  if (shape.size() != 1 || shape[0] != x_shape[axis])
    return InvalidArgument(fmt::format("the {} has shape {}; per-axis quantization along axis {} needs [{}]", what,
                                       ShapeToString(shape), axis, x_shape[axis]));
  Shape along(x_shape.size(), 1);
  along[axis] = x_shape[axis];
  return b.Reshape(v, along);
}

StatusOr<Value> AlongAxis(NodeContext& ctx, Value v, Value x, const char* what) {
  ASSIGN_OR_RETURN(Value shaped, ShapedAlongAxis(ctx, v, x, what));
  // A builder that refused a step (an attribute of the wrong type: NodeContext records it and
  // gives the fallback) has no value to hand back, and the callers read its type.
  RETURN_IF_ERROR(ctx.b().status());
  return shaped;
}

bool QuantizedType(DType d) { return d == DType::kI8 || d == DType::kU8 || IsFloat8(d); }

Status ImportDequantizeLinear(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  const DType in = b.dtype(x);
  if (!QuantizedType(in) && in != DType::kI32)
    return Unimplemented(fmt::format("dequantizing {} (int8, uint8, int32 and the 8-bit floats are supported)", DTypeName(in)));
  ASSIGN_OR_RETURN(Value scale, AlongAxis(ctx, ctx.Input(1), x, "scale"));
  const DType out = b.dtype(scale);
  if (!IsFloat(out) || IsFloat8(out)) return InvalidArgument(fmt::format("the scale is {}, not a float type", DTypeName(out)));
  Value value = b.Cast(x, DType::kF32);
  if (ctx.HasInput(2)) {
    ASSIGN_OR_RETURN(Value zero_point, AlongAxis(ctx, ctx.Input(2), x, "zero point"));
    if (b.dtype(zero_point) != in)
      return InvalidArgument(fmt::format("the zero point is {}, x {}", DTypeName(b.dtype(zero_point)), DTypeName(in)));
    value = b.Sub(value, b.Cast(zero_point, DType::kF32));
  }
  ctx.SetOutput(0, b.Cast(b.Mul(value, b.Cast(scale, DType::kF32)), out));
  return Status::Ok();
}

// y = x / scale (f32) rounded half to even, the zero point added, clamped to `out`'s range.
Value QuantizeToInteger(GraphBuilder& b, Value scaled, std::optional<Value> zero_point, DType out) {
  Value q = RoundHalfToEven(b, scaled);
  if (zero_point) q = b.Add(q, *zero_point);
  const double lo = out == DType::kI8 ? -128 : 0, hi = out == DType::kI8 ? 127 : 255;
  q = b.Binary(OpCode::kMin, b.Binary(OpCode::kMax, q, b.Scalar(lo, DType::kF32)), b.Scalar(hi, DType::kF32));
  return b.Cast(q, out);
}

Status ImportQuantizeLinear(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  if (!IsFloat(b.dtype(x)) || IsFloat8(b.dtype(x)))
    return InvalidArgument(fmt::format("x is {}, not f32, f16 or bf16", DTypeName(b.dtype(x))));
  ASSIGN_OR_RETURN(Value scale, AlongAxis(ctx, ctx.Input(1), x, "scale"));
  std::optional<Value> zero_point;
  DType out = DType::kU8;  // without a zero point or output_dtype
  if (ctx.HasInput(2)) {
    ASSIGN_OR_RETURN(Value zp, AlongAxis(ctx, ctx.Input(2), x, "zero point"));
    zero_point = zp;
    out = b.dtype(zp);
  } else if (int64_t output_dtype = ctx.Int("output_dtype", 0); output_dtype != 0) {
    ASSIGN_OR_RETURN(out, RequireDType(static_cast<int32_t>(output_dtype), "output_dtype"));
  }
  if (!QuantizedType(out))
    return Unimplemented(fmt::format("quantizing to {} (int8, uint8 and the 8-bit floats are supported)", DTypeName(out)));
  Value scaled = b.Div(b.Cast(x, DType::kF32), b.Cast(scale, DType::kF32));
  if (IsFloat8(out)) {  // the zero point of an 8-bit float is 0 (ONNX); it is not added
    ctx.SetOutput(0, b.Cast(scaled, out, ctx.Int("saturate", 1) != 0));
    return Status::Ok();
  }
  ctx.SetOutput(0, QuantizeToInteger(b, scaled, zero_point ? b.Cast(*zero_point, DType::kF32) : std::optional<Value>(), out));
  return Status::Ok();
}

// The uint8 range [0, 255] spread over [min(x, 0), max(x, 0)]: scale, zero point, and x.
Status ImportDynamicQuantizeLinear(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  if (b.dtype(x) != DType::kF32) return InvalidArgument(fmt::format("x is {}, not f32", DTypeName(b.dtype(x))));
  std::vector<int64_t> all(b.shape(x).size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  Value zero = b.Scalar(0, DType::kF32);
  Value high = b.Binary(OpCode::kMax, b.Reduce(OpCode::kReduceMax, x, all, false), zero);
  Value low = b.Binary(OpCode::kMin, b.Reduce(OpCode::kReduceMin, x, all, false), zero);
  Value scale = b.Div(b.Sub(high, low), b.Scalar(255, DType::kF32));
  Value zero_point = QuantizeToInteger(b, b.Div(b.Sub(zero, low), scale), std::nullopt, DType::kU8);
  ctx.SetOutput(0, QuantizeToInteger(b, b.Div(x, scale), b.Cast(zero_point, DType::kF32), DType::kU8));
  ctx.SetOutput(1, scale);
  ctx.SetOutput(2, zero_point);
  return Status::Ok();
}

}  // namespace

void RegisterQuantizeOps(OpRegistry& r) {
  r.Add("DequantizeLinear", ImportDequantizeLinear, 2, 3);
  r.Add("QuantizeLinear", ImportQuantizeLinear, 2, 3);
  r.Add("DynamicQuantizeLinear", ImportDynamicQuantizeLinear, 1, 1);
}

}  // namespace tilefuse::onnx_import
