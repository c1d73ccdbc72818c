#include "frontend/onnx/handler_util.h"

#include <fmt/format.h>

namespace tilefuse::onnx_import {

StatusOr<int64_t> NormalizeOnnxAxis(int64_t axis, int64_t rank, const char* what) {
  if (axis < -rank || axis >= rank)
    return InvalidArgument(fmt::format("{} {} is out of range for rank {}", what, axis, rank));
  return axis < 0 ? axis + rank : axis;
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
