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

}  // namespace

void RegisterMatMulOps(OpRegistry& r) {
  r.Add("MatMul", ImportMatMul, 2, 2);
  r.Add("Gemm", ImportGemm, 2, 3);
}

}  // namespace tilefuse::onnx_import
