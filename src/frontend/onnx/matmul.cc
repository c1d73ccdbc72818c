// Contractions: MatMul (numpy semantics, from the builder) and Gemm, written out as
// alpha * op(A) @ op(B) + beta * C.
#include <fmt/format.h>

#include "frontend/onnx/handler_util.h"
#include "frontend/onnx/op_registry.h"

namespace tilefuse::onnx_import {

namespace {

Status ImportMatMul(NodeContext& ctx) {
  ctx.SetOutput(0, ctx.b().MatMul(ctx.Input(0), ctx.Input(1)));
  return Status::Ok();
}

Status ImportGemm(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value a = ctx.Input(0), w = ctx.Input(1);
  if (b.rank(a) != 2 || b.rank(w) != 2)
    return InvalidArgument(fmt::format("Gemm needs 2-D A and B, got {} and {}", ShapeToString(b.shape(a)),
                                       ShapeToString(b.shape(w))));
  if (ctx.Int("transA", 0)) a = b.Transpose(a, {1, 0});
  if (ctx.Int("transB", 0)) w = b.Transpose(w, {1, 0});
  double alpha = ctx.Float("alpha", 1.0), beta = ctx.Float("beta", 1.0);
  Value y = b.MatMul(a, w);
  if (alpha != 1.0) y = MulScalar(b, y, alpha);
  if (ctx.HasInput(2) && beta != 0.0) {
    Value c = ctx.Input(2);
    if (beta != 1.0) c = MulScalar(b, c, beta);
    // C broadcasts to [M, N] only, never the other way.
    if (b.ok()) c = b.BroadcastTo(c, b.shape(y));
    y = b.Add(y, c);
  }
  ctx.SetOutput(0, y);
  return Status::Ok();
}

// MatMulInteger: (A - a_zero_point) @ (B - b_zero_point) in int32, A and B int8 or uint8, a zero
// point per tensor or per row of A (1-D [M]) and per column of B (1-D [N]). Computed in f64,
// exact (every sum of 8-bit products a model can have is far below 2^53), then made int32.
// onnxruntime's dynamic quantization writes it, with the scales multiplied after.
Status ImportMatMulInteger(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  auto operand = [&](int input, int zero_input, const char* name) -> StatusOr<Value> {
    Value q = ctx.Input(input);
    if (b.dtype(q) != DType::kI8 && b.dtype(q) != DType::kU8)
      return Unimplemented(fmt::format("{} is {} (int8 and uint8 are supported)", name, DTypeName(b.dtype(q))));
    Value v = b.Cast(q, DType::kF64);
    if (!ctx.HasInput(zero_input)) return v;
    Value zero = ctx.Input(zero_input);
    if (b.dtype(zero) != b.dtype(q))
      return InvalidArgument(fmt::format("{}'s zero point is {}, {} {}", name, DTypeName(b.dtype(zero)), name, DTypeName(b.dtype(q))));
    if (b.rank(zero) > 1) return InvalidArgument(fmt::format("{}'s zero point has rank {} (a scalar or 1-D)", name, b.rank(zero)));
    zero = b.Cast(zero, DType::kF64);
    // A's per-row zero points [M] stand along A's rows: [M, 1]. B's per-column ones [N]
    // broadcast along B's last dim as they are.
    if (b.rank(zero) == 1 && input == 0 && b.rank(q) >= 2) zero = b.Reshape(zero, {b.shape(zero)[0], 1});
    return b.Sub(v, zero);
  };
  ASSIGN_OR_RETURN(Value a, operand(0, 2, "A"));
  ASSIGN_OR_RETURN(Value w, operand(1, 3, "B"));
  ctx.SetOutput(0, b.Cast(b.MatMul(a, w), DType::kI32));
  return Status::Ok();
}

}  // namespace

void RegisterMatMulOps(OpRegistry& r) {
  r.Add("MatMul", ImportMatMul, 2, 2);
  r.Add("MatMulInteger", ImportMatMulInteger, 2, 4);
  r.Add("Gemm", ImportGemm, 2, 3);
}

}  // namespace tilefuse::onnx_import
