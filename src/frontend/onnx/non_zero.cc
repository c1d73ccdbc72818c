// NonZero: the [rank, count] int64 coordinates of the non-zero elements, in row-major
// order. The output's shape depends on the input's values and tilefuse's shapes are
// static, so the input must be known at import time (a constant, or computed from
// constants); the result is then a constant too.
#include <fmt/format.h>

#include "frontend/onnx/op_registry.h"

namespace tilefuse::onnx_import {

namespace {

Status ImportNonZero(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  // The standard "must be known at import time" error, which lets `tilefuse run` bind a
  // backend test's input as a constant and try again.
  ASSIGN_OR_RETURN(Tensor input, ctx.ConstInput(0, "X, whose values decide the output shape"));
  if (input.rank() == 0) return InvalidArgument("NonZero needs an input of rank >= 1");
  const Shape& shape = input.shape();
  auto rank = static_cast<int64_t>(shape.size());
  std::vector<double> values = input.ToDoubles();
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < static_cast<int64_t>(values.size()); ++i)
    if (values[i] != 0) hits.push_back(i);  // NaN is non-zero
  auto count = static_cast<int64_t>(hits.size());
  std::vector<double> coordinates(rank * count);
  for (int64_t h = 0; h < count; ++h) {
    int64_t rest = hits[h];
    for (int64_t d = rank - 1; d >= 0; --d) {
      coordinates[d * count + h] = static_cast<double>(rest % shape[d]);
      rest /= shape[d];
    }
  }
  ctx.SetOutput(0, b.Constant(Tensor::FromDoubles(DType::kI64, {rank, count}, coordinates)));
  return Status::Ok();
}

}  // namespace

void RegisterNonZeroOps(OpRegistry& r) { r.Add("NonZero", ImportNonZero, 1, 1); }

}  // namespace tilefuse::onnx_import
