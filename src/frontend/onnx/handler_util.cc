#include "frontend/onnx/handler_util.h"

#include <fmt/format.h>

namespace tilefuse::onnx_import {

StatusOr<int64_t> NormalizeOnnxAxis(int64_t axis, int64_t rank, const char* what) {
  if (axis < -rank || axis >= rank)
    return InvalidArgument(fmt::format("{} {} is out of range for rank {}", what, axis, rank));
  return axis < 0 ? axis + rank : axis;
}

}  // namespace tilefuse::onnx_import
