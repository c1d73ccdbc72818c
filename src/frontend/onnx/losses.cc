// Loss functions: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, written out in
// primitives as the ONNX reference defines them:
//
//   w[n, d...]    = weight[target[n, d...]]  (1 without weights; 0 where target == ignore_index)
//   loss[n, d...] = -input[n, target[n, d...], d...] * w[n, d...]
//   reduction     none: loss;  sum: sum(loss);  mean: sum(loss) / sum(w)
//
// SoftmaxCrossEntropyLoss is the same over LogSoftmax(scores, axis = 1), whose value is
// its optional second output.
#include <fmt/format.h>

#include "frontend/onnx/handler_util.h"
#include "frontend/onnx/op_registry.h"

namespace tilefuse::onnx_import {

namespace {

enum class LossReduction { kNone, kSum, kMean };

StatusOr<LossReduction> ParseReduction(NodeContext& ctx) {
  std::string reduction = ctx.String("reduction", "mean");
  if (reduction == "none") return LossReduction::kNone;
  if (reduction == "sum") return LossReduction::kSum;
  if (reduction == "mean") return LossReduction::kMean;
  return InvalidArgument(fmt::format("reduction '{}' must be none, sum or mean", reduction));
}

// The loss of log-probabilities `input` [N, C, d...] against class indices `target`
// [N, d...], with optional per-class `weight` [C].
StatusOr<Value> NegativeLogLikelihood(NodeContext& ctx, Value input, Value target, Value weight) {
  GraphBuilder& b = ctx.b();
  if (!b.ok()) return b.status();  // `input` was not built (SoftmaxCrossEntropyLoss's LogSoftmax failed)
  ASSIGN_OR_RETURN(LossReduction reduction, ParseReduction(ctx));
  Shape in_shape = b.shape(input), target_shape = b.shape(target);
  if (in_shape.size() < 2) return InvalidArgument(fmt::format("input must have rank >= 2, got {}", in_shape.size()));
  Shape expected_target = in_shape;
  expected_target.erase(expected_target.begin() + 1);
  if (target_shape != expected_target)
    return InvalidArgument(fmt::format("target has shape [{}], expected [{}] (input without its class dim)",
                                       fmt::join(target_shape, ", "), fmt::join(expected_target, ", ")));
  if (!IsInteger(b.dtype(target)))
    return InvalidArgument(fmt::format("target must hold integers, got {}", DTypeName(b.dtype(target))));
  int64_t classes = in_shape[1];
  if (weight.valid() && b.shape(weight) != Shape{classes})
    return InvalidArgument(fmt::format("weight must have shape [{}], got rank {}", classes, b.rank(weight)));

  Value index = b.Cast(target, DType::kI64);
  Value kept;  // bool, where target != ignore_index
  if (ctx.HasAttr("ignore_index")) {
    Value ignore_index = b.Scalar(static_cast<double>(ctx.Int("ignore_index", 0)), DType::kI64);
    kept = b.Unary(OpCode::kNot, b.Binary(OpCode::kEqual, index, ignore_index));
    index = b.Where(kept, index, b.Scalar(0, DType::kI64));  // any class in range: its term is zeroed
  }
  Value picked = b.Squeeze(b.GatherElements(input, b.Unsqueeze(index, {1}), 1), {1});
  Value w = weight.valid() ? b.Gather(weight, index, 0) : Value{};
  if (kept.valid()) w = b.Where(kept, w.valid() ? w : ScalarLike(b, picked, 1), ScalarLike(b, picked, 0));
  Value loss = b.Unary(OpCode::kNeg, w.valid() ? b.Mul(picked, w) : picked);
  if (!b.ok()) return loss;
  std::vector<int64_t> all_axes;
  for (int64_t i = 0; i < b.rank(loss); ++i) all_axes.push_back(i);
  switch (reduction) {
    case LossReduction::kNone: return loss;
    case LossReduction::kSum: return b.Reduce(OpCode::kReduceSum, loss, all_axes, false);
    case LossReduction::kMean:
      if (!w.valid()) return b.Reduce(OpCode::kReduceMean, loss, all_axes, false);
      return b.Div(b.Reduce(OpCode::kReduceSum, loss, all_axes, false),
                   b.Reduce(OpCode::kReduceSum, b.BroadcastTo(w, b.shape(loss)), all_axes, false));
  }
  return loss;
}

Status ImportNegativeLogLikelihoodLoss(NodeContext& ctx) {
  ASSIGN_OR_RETURN(Value loss, NegativeLogLikelihood(ctx, ctx.Input(0), ctx.Input(1), ctx.Input(2)));
  ctx.SetOutput(0, loss);
  return Status::Ok();
}

Status ImportSoftmaxCrossEntropyLoss(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value scores = ctx.Input(0);
  if (b.rank(scores) < 2) return InvalidArgument(fmt::format("scores must have rank >= 2, got {}", b.rank(scores)));
  Value log_prob = b.LogSoftmax(scores, 1);
  ASSIGN_OR_RETURN(Value loss, NegativeLogLikelihood(ctx, log_prob, ctx.Input(1), ctx.Input(2)));
  ctx.SetOutput(0, loss);
  ctx.SetOutput(1, log_prob);
  return Status::Ok();
}

}  // namespace

void RegisterLossOps(OpRegistry& r) {
  r.Add("NegativeLogLikelihoodLoss", ImportNegativeLogLikelihoodLoss, 2, 3);
  r.Add("SoftmaxCrossEntropyLoss", ImportSoftmaxCrossEntropyLoss, 2, 3);
}

}  // namespace tilefuse::onnx_import
