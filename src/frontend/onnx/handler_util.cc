#include "frontend/onnx/handler_util.h"

#include <fmt/format.h>

namespace tilefuse::onnx_import {

StatusOr<int64_t> NormalizeOnnxAxis(int64_t axis, int64_t rank, const char* what) {
  if (axis < -rank || axis >= rank)
    return InvalidArgument(fmt::format("{} {} is out of range for rank {}", what, axis, rank));
  return axis < 0 ? axis + rank : axis;
}

Value RoundHalfToEven(GraphBuilder& b, Value x) {
  Value floor = b.Unary(OpCode::kFloor, x);
  Value fraction = b.Sub(x, floor);  // exact below 2^mantissa; 0 above (x is whole there)
  Value half = ScalarLike(b, x, 0.5);
  Value even = b.Add(floor, b.Binary(OpCode::kMod, floor, ScalarLike(b, x, 2)));  // a tie goes to the even one
  Value rounded = b.Where(b.Binary(OpCode::kGreater, fraction, half), AddScalar(b, floor, 1),
                          b.Where(b.Binary(OpCode::kLess, fraction, half), floor, even));
  return b.Where(b.Unary(OpCode::kIsInf, x), x, rounded);  // inf - inf would be NaN
}

Value ArgExtreme(GraphBuilder& b, Value x, int64_t axis, bool largest, bool last, bool keepdims) {
  if (!b.ok()) return {};
  Shape shape = b.shape(x);
  Value extreme = b.Reduce(largest ? OpCode::kReduceMax : OpCode::kReduceMin, x, {axis}, true);
  Value hit = b.Binary(OpCode::kEqual, x, extreme);
  // max/min propagate NaN, so a NaN extreme means the NaNs are the hits (and no element
  // is NaN otherwise).
  if (IsFloat(b.dtype(x))) hit = b.Binary(OpCode::kOr, hit, b.Unary(OpCode::kIsNaN, x));
  Value iota = b.Iota(shape, axis, DType::kI64);
  Value miss = b.Scalar(last ? -1.0 : static_cast<double>(shape[axis]), DType::kI64);
  return b.Reduce(last ? OpCode::kReduceMax : OpCode::kReduceMin, b.Where(hit, iota, miss), {axis}, keepdims);
}

}  // namespace tilefuse::onnx_import
