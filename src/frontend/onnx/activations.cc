// Activation functions. Gelu, Softmax and LogSoftmax become the builder's composites
// (decomposed later by passes/); the rest (Hardmax included) are written out in
// primitives here.
#include <fmt/format.h>

#include "frontend/onnx/handler_util.h"
#include "frontend/onnx/op_registry.h"

namespace tilefuse::onnx_import {

namespace {

Value IsNegative(GraphBuilder& b, Value x) { return b.Binary(OpCode::kLess, x, ScalarLike(b, x, 0)); }

// max(0, min(1, alpha * x + beta))
Value HardSigmoid(GraphBuilder& b, Value x, double alpha, double beta) {
  Value linear = AddScalar(b, MulScalar(b, x, alpha), beta);
  return b.Binary(OpCode::kMax, b.Binary(OpCode::kMin, linear, ScalarLike(b, x, 1)), ScalarLike(b, x, 0));
}

// log(exp(x) + 1), as the ONNX reference computes it
Value Softplus(GraphBuilder& b, Value x) { return b.Unary(OpCode::kLog, AddScalar(b, b.Unary(OpCode::kExp, x), 1)); }

Status ImportLeakyRelu(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  ctx.SetOutput(0, b.Where(IsNegative(b, x), MulScalar(b, x, ctx.Float("alpha", 0.01)), x));
  return Status::Ok();
}

Status ImportPRelu(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  ctx.SetOutput(0, b.Where(IsNegative(b, x), b.Mul(x, ctx.Input(1)), x));
  return Status::Ok();
}

Status ImportElu(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  Value negative = MulScalar(b, AddScalar(b, b.Unary(OpCode::kExp, x), -1), ctx.Float("alpha", 1.0));
  ctx.SetOutput(0, b.Where(IsNegative(b, x), negative, x));
  return Status::Ok();
}

Status ImportSelu(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  double alpha = ctx.Float("alpha", 1.67326319217681884765625), gamma = ctx.Float("gamma", 1.05070102214813232421875);
  Value non_positive = b.Binary(OpCode::kLessEqual, x, ScalarLike(b, x, 0));
  Value negative = AddScalar(b, MulScalar(b, b.Unary(OpCode::kExp, x), alpha), -alpha);
  ctx.SetOutput(0, MulScalar(b, b.Where(non_positive, negative, x), gamma));
  return Status::Ok();
}

Status ImportCelu(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  double alpha = ctx.Float("alpha", 1.0);
  Value zero = ScalarLike(b, x, 0);
  Value negative = MulScalar(b, AddScalar(b, b.Unary(OpCode::kExp, MulScalar(b, x, 1 / alpha)), -1), alpha);
  ctx.SetOutput(0, b.Add(b.Binary(OpCode::kMax, x, zero), b.Binary(OpCode::kMin, negative, zero)));
  return Status::Ok();
}

Status ImportThresholdedRelu(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  Value above = b.Binary(OpCode::kGreater, x, ScalarLike(b, x, ctx.Float("alpha", 1.0)));
  ctx.SetOutput(0, b.Where(above, x, ScalarLike(b, x, 0)));
  return Status::Ok();
}

Status ImportHardSigmoid(NodeContext& ctx) {
  ctx.SetOutput(0, HardSigmoid(ctx.b(), ctx.Input(0), ctx.Float("alpha", 0.2), ctx.Float("beta", 0.5)));
  return Status::Ok();
}

Status ImportHardSwish(NodeContext& ctx) {
  Value x = ctx.Input(0);
  ctx.SetOutput(0, ctx.b().Mul(x, HardSigmoid(ctx.b(), x, 1.0 / 6, 0.5)));
  return Status::Ok();
}

Status ImportSoftplus(NodeContext& ctx) {
  ctx.SetOutput(0, Softplus(ctx.b(), ctx.Input(0)));
  return Status::Ok();
}

Status ImportSoftsign(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  ctx.SetOutput(0, b.Div(x, AddScalar(b, b.Unary(OpCode::kAbs, x), 1)));
  return Status::Ok();
}

Status ImportMish(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  ctx.SetOutput(0, b.Mul(x, b.Unary(OpCode::kTanh, Softplus(b, x))));
  return Status::Ok();
}

Status ImportGelu(NodeContext& ctx) {
  std::string approximate = ctx.String("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return InvalidArgument(fmt::format("attribute 'approximate' must be \"none\" or \"tanh\", got \"{}\"", approximate));
  ctx.SetOutput(0, ctx.b().Gelu(ctx.Input(0), approximate == "tanh"));
  return Status::Ok();
}

// Before opset 13, (Log)Softmax flattened the input to 2-D at `axis` (default 1) and
// normalized each row; from 13 on it normalizes along `axis` (default -1) alone.
template <bool kLog>
Status ImportSoftmax(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  auto softmax = [&](Value v, int64_t axis) { return kLog ? b.LogSoftmax(v, axis) : b.Softmax(v, axis); };
  if (ctx.opset() >= 13) {
    ctx.SetOutput(0, softmax(x, ctx.Int("axis", -1)));
    return Status::Ok();
  }
  Shape shape = b.shape(x);
  ASSIGN_OR_RETURN(int64_t axis, NormalizeOnnxAxis(ctx.Int("axis", 1), std::max<int64_t>(b.rank(x), 1), "axis"));
  Shape outer(shape.begin(), shape.begin() + std::min<int64_t>(axis, shape.size()));
  Shape inner(shape.begin() + std::min<int64_t>(axis, shape.size()), shape.end());
  Value rows = b.Reshape(x, {NumElements(outer), NumElements(inner)});
  ctx.SetOutput(0, b.Reshape(softmax(rows, 1), shape));
  return Status::Ok();
}

// Hardmax: 1 at the first largest element along `axis`, 0 elsewhere; before opset 13
// over the rows of the input flattened to 2-D at `axis`, like Softmax.
Status ImportHardmax(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  Shape shape = b.shape(x);
  if (shape.empty()) return InvalidArgument("Hardmax needs an input of rank >= 1");
  int64_t axis = 0;
  Value rows = x;
  if (ctx.opset() >= 13) {
    ASSIGN_OR_RETURN(axis, NormalizeOnnxAxis(ctx.Int("axis", -1), b.rank(x), "axis"));
  } else {
    ASSIGN_OR_RETURN(int64_t split, NormalizeOnnxAxis(ctx.Int("axis", 1), b.rank(x), "axis"));
    Shape outer(shape.begin(), shape.begin() + split), inner(shape.begin() + split, shape.end());
    rows = b.Reshape(x, {NumElements(outer), NumElements(inner)});
    axis = 1;
  }
  if (!b.ok()) return b.status();  // `rows` was not built
  if (b.shape(rows)[axis] == 0) {
    ctx.SetOutput(0, x);
    return Status::Ok();
  }
  Value index = ArgExtreme(b, rows, axis, /*largest=*/true, /*last=*/false, /*keepdims=*/true);
  Value hot = b.Binary(OpCode::kEqual, b.Iota(b.shape(rows), axis, DType::kI64), index);
  ctx.SetOutput(0, b.Reshape(b.Where(hot, ScalarLike(b, x, 1), ScalarLike(b, x, 0)), shape));
  return Status::Ok();
}

// Shrink: x + bias below -lambd, x - bias above lambd, 0 between.
Status ImportShrink(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  double bias = ctx.Float("bias", 0.0), lambd = ctx.Float("lambd", 0.5);
  Value below = b.Binary(OpCode::kLess, x, ScalarLike(b, x, -lambd));
  Value above = b.Binary(OpCode::kGreater, x, ScalarLike(b, x, lambd));
  Value inner = b.Where(above, AddScalar(b, x, -bias), ScalarLike(b, x, 0));
  ctx.SetOutput(0, b.Where(below, AddScalar(b, x, bias), inner));
  return Status::Ok();
}

}  // namespace

void RegisterActivationOps(OpRegistry& r) {
  r.Add("Shrink", ImportShrink, 1, 1);
  r.Add("Relu", ImportUnaryOp<OpCode::kRelu>, 1, 1);
  r.Add("Sigmoid", ImportUnaryOp<OpCode::kSigmoid>, 1, 1);
  r.Add("Tanh", ImportUnaryOp<OpCode::kTanh>, 1, 1);
  r.Add("LeakyRelu", ImportLeakyRelu, 1, 1);
  r.Add("PRelu", ImportPRelu, 2, 2);
  r.Add("Elu", ImportElu, 1, 1);
  r.Add("Selu", ImportSelu, 1, 1);
  r.Add("Celu", ImportCelu, 1, 1);
  r.Add("ThresholdedRelu", ImportThresholdedRelu, 1, 1);
  r.Add("HardSigmoid", ImportHardSigmoid, 1, 1);
  r.Add("HardSwish", ImportHardSwish, 1, 1);
  r.Add("Softplus", ImportSoftplus, 1, 1);
  r.Add("Softsign", ImportSoftsign, 1, 1);
  r.Add("Mish", ImportMish, 1, 1);
  r.Add("Gelu", ImportGelu, 1, 1);
  r.Add("Hardmax", ImportHardmax, 1, 1);
  r.Add("Softmax", ImportSoftmax<false>, 1, 1);
  r.Add("LogSoftmax", ImportSoftmax<true>, 1, 1);
}

}  // namespace tilefuse::onnx_import
