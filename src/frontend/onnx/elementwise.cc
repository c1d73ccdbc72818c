// Pointwise ONNX ops: arithmetic, math functions, comparisons, logic, casts, Clip and
// the variadic Max/Min/Sum/Mean. Broadcasting is numpy's, which the builder's Binary
// implements.
#include <fmt/format.h>

#include <limits>

#include "frontend/onnx/handler_util.h"
#include "frontend/onnx/op_registry.h"
#include "frontend/onnx/tensor_proto.h"

namespace tilefuse::onnx_import {

namespace {

// Max, Min, Sum, Mean take one or more inputs, folded left.
template <OpCode kOp>
Value FoldInputs(NodeContext& ctx) {
  std::vector<Value> xs = ctx.Inputs();
  Value acc = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) acc = ctx.b().Binary(kOp, acc, xs[i]);
  return acc;
}

template <OpCode kOp>
Status ImportVariadic(NodeContext& ctx) {
  ctx.SetOutput(0, FoldInputs<kOp>(ctx));
  return Status::Ok();
}

Status ImportMean(NodeContext& ctx) {
  Value sum = FoldInputs<OpCode::kAdd>(ctx);
  size_t count = ctx.Inputs().size();
  ctx.SetOutput(0, count == 1 ? sum : ctx.b().Div(sum, ScalarLike(ctx.b(), sum, static_cast<double>(count))));
  return Status::Ok();
}

// ONNX lets the exponent have its own type; the result has the base's.
Status ImportPow(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value base = ctx.Input(0);
  ctx.SetOutput(0, b.Binary(OpCode::kPow, base, b.Cast(ctx.Input(1), b.dtype(base))));
  return Status::Ok();
}

Status ImportMod(NodeContext& ctx) {
  OpCode op = ctx.Int("fmod", 0) ? OpCode::kFMod : OpCode::kMod;
  ctx.SetOutput(0, ctx.b().Binary(op, ctx.Input(0), ctx.Input(1)));
  return Status::Ok();
}

Status ImportWhere(NodeContext& ctx) {
  ctx.SetOutput(0, ctx.b().Where(ctx.Input(0), ctx.Input(1), ctx.Input(2)));
  return Status::Ok();
}

Status ImportCast(NodeContext& ctx) {
  if (!ctx.HasAttr("to")) return InvalidArgument("attribute 'to' is missing");
  ASSIGN_OR_RETURN(DType to, RequireDType(static_cast<int32_t>(ctx.Int("to", 0)), "the cast target"));
  ctx.SetOutput(0, ctx.b().Cast(ctx.Input(0), to, ctx.Int("saturate", 1) != 0));
  return Status::Ok();
}

Status ImportCastLike(NodeContext& ctx) {
  ctx.SetOutput(0, ctx.b().Cast(ctx.Input(0), ctx.b().dtype(ctx.Input(1)), ctx.Int("saturate", 1) != 0));
  return Status::Ok();
}

Status ImportIsInf(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  bool negative = ctx.Int("detect_negative", 1) != 0, positive = ctx.Int("detect_positive", 1) != 0;
  Value inf = b.Unary(OpCode::kIsInf, x);
  if (!negative && !positive) {
    ctx.SetOutput(0, b.BroadcastTo(b.Scalar(0, DType::kBool), b.shape(x)));
  } else if (negative != positive) {
    Value sign = b.Binary(positive ? OpCode::kGreater : OpCode::kLess, x, ScalarLike(b, x, 0));
    ctx.SetOutput(0, b.Binary(OpCode::kAnd, inf, sign));
  } else {
    ctx.SetOutput(0, inf);
  }
  return Status::Ok();
}

// Clip(x, min, max) = min(max(x, lo), hi); bounds are attributes before opset 11 and
// optional inputs (any value, not only constants) from then on.
Status ImportClip(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  Value lo = ctx.Input(1), hi = ctx.Input(2);
  if (ctx.opset() < 11) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    double min = ctx.Float("min", -kInf), max = ctx.Float("max", kInf);
    if (min != -kInf) lo = ScalarLike(b, x, min);
    if (max != kInf) hi = ScalarLike(b, x, max);
  }
  for (Value bound : {lo, hi})
    if (bound.valid() && b.rank(bound) != 0 && NumElements(b.shape(bound)) != 1)
      return InvalidArgument(fmt::format("Clip bounds must be scalars, got shape {}", ShapeToString(b.shape(bound))));
  Value y = x;
  if (lo.valid()) y = b.Binary(OpCode::kMax, y, b.Reshape(lo, {}));
  if (hi.valid()) y = b.Binary(OpCode::kMin, y, b.Reshape(hi, {}));
  ctx.SetOutput(0, y);
  return Status::Ok();
}

Status ImportSign(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0), zero = ScalarLike(b, x, 0);
  Value negative_or_zero = b.Where(b.Binary(OpCode::kLess, x, zero), ScalarLike(b, x, -1), zero);
  ctx.SetOutput(0, b.Where(b.Binary(OpCode::kGreater, x, zero), ScalarLike(b, x, 1), negative_or_zero));
  return Status::Ok();
}

Status ImportIdentity(NodeContext& ctx) {
  ctx.SetOutput(0, ctx.Input(0));
  return Status::Ok();
}

}  // namespace

void RegisterElementwiseOps(OpRegistry& r) {
  r.Add("Add", ImportBinaryOp<OpCode::kAdd>, 2, 2);
  r.Add("Sub", ImportBinaryOp<OpCode::kSub>, 2, 2);
  r.Add("Mul", ImportBinaryOp<OpCode::kMul>, 2, 2);
  r.Add("Div", ImportBinaryOp<OpCode::kDiv>, 2, 2);
  r.Add("Pow", ImportPow, 2, 2);
  r.Add("Mod", ImportMod, 2, 2);
  r.Add("Equal", ImportBinaryOp<OpCode::kEqual>, 2, 2);
  r.Add("Less", ImportBinaryOp<OpCode::kLess>, 2, 2);
  r.Add("LessOrEqual", ImportBinaryOp<OpCode::kLessEqual>, 2, 2);
  r.Add("Greater", ImportBinaryOp<OpCode::kGreater>, 2, 2);
  r.Add("GreaterOrEqual", ImportBinaryOp<OpCode::kGreaterEqual>, 2, 2);
  r.Add("And", ImportBinaryOp<OpCode::kAnd>, 2, 2);
  r.Add("Or", ImportBinaryOp<OpCode::kOr>, 2, 2);
  r.Add("Xor", ImportBinaryOp<OpCode::kXor>, 2, 2);
  r.Add("Not", ImportUnaryOp<OpCode::kNot>, 1, 1);
  r.Add("Neg", ImportUnaryOp<OpCode::kNeg>, 1, 1);
  r.Add("Abs", ImportUnaryOp<OpCode::kAbs>, 1, 1);
  r.Add("Exp", ImportUnaryOp<OpCode::kExp>, 1, 1);
  r.Add("Log", ImportUnaryOp<OpCode::kLog>, 1, 1);
  r.Add("Sqrt", ImportUnaryOp<OpCode::kSqrt>, 1, 1);
  r.Add("Reciprocal", ImportUnaryOp<OpCode::kReciprocal>, 1, 1);
  r.Add("Erf", ImportUnaryOp<OpCode::kErf>, 1, 1);
  r.Add("Sin", ImportUnaryOp<OpCode::kSin>, 1, 1);
  r.Add("Cos", ImportUnaryOp<OpCode::kCos>, 1, 1);
  r.Add("Asin", ImportUnaryOp<OpCode::kAsin>, 1, 1);
  r.Add("Acos", ImportUnaryOp<OpCode::kAcos>, 1, 1);
  r.Add("Atan", ImportUnaryOp<OpCode::kAtan>, 1, 1);
  r.Add("Floor", ImportUnaryOp<OpCode::kFloor>, 1, 1);
  r.Add("Ceil", ImportUnaryOp<OpCode::kCeil>, 1, 1);
  r.Add("IsNaN", ImportUnaryOp<OpCode::kIsNaN>, 1, 1);
  r.Add("IsInf", ImportIsInf, 1, 1);
  r.Add("Sign", ImportSign, 1, 1);
  r.Add("Where", ImportWhere, 3, 3);
  r.Add("Cast", ImportCast, 1, 1);
  r.Add("CastLike", ImportCastLike, 2, 2);
  r.Add("Clip", ImportClip, 1, 3);
  r.Add("Identity", ImportIdentity, 1, 1);
  r.Add("Max", ImportVariadic<OpCode::kMax>, 1, -1);
  r.Add("Min", ImportVariadic<OpCode::kMin>, 1, -1);
  r.Add("Sum", ImportVariadic<OpCode::kAdd>, 1, -1);
  r.Add("Mean", ImportMean, 1, -1);
}

}  // namespace tilefuse::onnx_import
