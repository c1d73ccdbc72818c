// Math functions the op table has no primitive for, written out in primitives with the
// textbook identities (evaluated in f64 by the reference interpreter; a generated f32
// kernel loses a few ulps near the identities' cancellations):
//   tan = sin / cos                      sinh = (e^x - e^-x) / 2    cosh = (e^x + e^-x) / 2
//   asinh = log(x + sqrt(x^2 + 1))       acosh = log(x + sqrt(x^2 - 1))
//   atanh = log((1 + x) / (1 - x)) / 2   Round = half to even, from floor and the fraction
// Asinh is odd: it is computed on |x| and the sign put back, so that large negative x
// does not cancel to log(0).
#include <fmt/format.h>

#include "frontend/onnx/handler_util.h"
#include "frontend/onnx/op_registry.h"

namespace tilefuse::onnx_import {

namespace {

enum class MathFunction { kTan, kSinh, kCosh, kAsinh, kAcosh, kAtanh, kRound };

Value Exp(GraphBuilder& b, Value x) { return b.Unary(OpCode::kExp, x); }
Value Log(GraphBuilder& b, Value x) { return b.Unary(OpCode::kLog, x); }


Value Compute(GraphBuilder& b, MathFunction f, Value x) {
  switch (f) {
    case MathFunction::kTan: return b.Div(b.Unary(OpCode::kSin, x), b.Unary(OpCode::kCos, x));
    case MathFunction::kSinh: return MulScalar(b, b.Sub(Exp(b, x), Exp(b, b.Unary(OpCode::kNeg, x))), 0.5);
    case MathFunction::kCosh: return MulScalar(b, b.Add(Exp(b, x), Exp(b, b.Unary(OpCode::kNeg, x))), 0.5);
    case MathFunction::kAsinh: {
      Value a = b.Unary(OpCode::kAbs, x);
      Value magnitude = Log(b, b.Add(a, b.Unary(OpCode::kSqrt, AddScalar(b, b.Mul(a, a), 1))));
      Value negative = b.Binary(OpCode::kLess, x, ScalarLike(b, x, 0));
      return b.Where(negative, b.Unary(OpCode::kNeg, magnitude), magnitude);
    }
    case MathFunction::kAcosh: return Log(b, b.Add(x, b.Unary(OpCode::kSqrt, AddScalar(b, b.Mul(x, x), -1))));
    case MathFunction::kAtanh: {
      Value one = ScalarLike(b, x, 1);
      return MulScalar(b, Log(b, b.Div(b.Add(one, x), b.Sub(one, x))), 0.5);
    }
    case MathFunction::kRound: return RoundHalfToEven(b, x);
  }
  return {};
}

template <MathFunction kFunction>
Status ImportMathFunction(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  if (!IsFloat(b.dtype(x)))
    return InvalidArgument(fmt::format("{} needs a floating-point input, got {}", ctx.op_type(), DTypeName(b.dtype(x))));
  ctx.SetOutput(0, Compute(b, kFunction, x));
  return Status::Ok();
}

}  // namespace

void RegisterMathFunctionOps(OpRegistry& r) {
  r.Add("Tan", ImportMathFunction<MathFunction::kTan>, 1, 1);
  r.Add("Sinh", ImportMathFunction<MathFunction::kSinh>, 1, 1);
  r.Add("Cosh", ImportMathFunction<MathFunction::kCosh>, 1, 1);
  r.Add("Asinh", ImportMathFunction<MathFunction::kAsinh>, 1, 1);
  r.Add("Acosh", ImportMathFunction<MathFunction::kAcosh>, 1, 1);
  r.Add("Atanh", ImportMathFunction<MathFunction::kAtanh>, 1, 1);
  r.Add("Round", ImportMathFunction<MathFunction::kRound>, 1, 1);
}

}  // namespace tilefuse::onnx_import
