// Small helpers shared by the op family files.
#pragma once

#include <cstdint>
#include <vector>

#include "frontend/onnx/node_context.h"
#include "tilefuse/builder.h"

namespace tilefuse::onnx_import {

// A rank-0 constant in the dtype of `like`. Like every builder call, a no-op once the
// builder has failed (and `like` may then be invalid).
inline Value ScalarLike(GraphBuilder& b, Value like, double value) {
  if (!b.ok() || !like.valid()) return {};
  return b.Scalar(value, b.dtype(like));
}
inline Value AddScalar(GraphBuilder& b, Value x, double s) { return b.Add(x, ScalarLike(b, x, s)); }
inline Value MulScalar(GraphBuilder& b, Value x, double s) { return b.Mul(x, ScalarLike(b, x, s)); }

// Handlers for ops that are one builder primitive.
template <OpCode kOp>
Status ImportUnaryOp(NodeContext& ctx) {
  ctx.SetOutput(0, ctx.b().Unary(kOp, ctx.Input(0)));
  return Status::Ok();
}

template <OpCode kOp>
Status ImportBinaryOp(NodeContext& ctx) {
  ctx.SetOutput(0, ctx.b().Binary(kOp, ctx.Input(0), ctx.Input(1)));
  return Status::Ok();
}

// The int64 index of the largest (or smallest) element along `axis` (in [0, rank)): the
// first such index, or the last with `last`; a NaN counts as the extreme, as in numpy.
// Written as reduce, compare with the input, and reduce the matching iota.
// x rounded to the nearest whole number, ties to the even one (ONNX's Round and the
// quantizers'); infinities kept.
Value RoundHalfToEven(GraphBuilder& b, Value x);

Value ArgExtreme(GraphBuilder& b, Value x, int64_t axis, bool largest, bool last, bool keepdims);

// Normalizes a possibly negative axis; InvalidArgument when out of [-rank, rank).
StatusOr<int64_t> NormalizeOnnxAxis(int64_t axis, int64_t rank, const char* what);

}  // namespace tilefuse::onnx_import
