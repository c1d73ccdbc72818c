// Reductions. Axes are an attribute (ReduceSum before opset 13, the others before 18)
// or an input (from then on); both forms are accepted at every opset.
#include "frontend/onnx/handler_util.h"
#include "frontend/onnx/op_registry.h"

namespace tilefuse::onnx_import {

namespace {

enum class Prologue { kNone, kSquare, kAbs, kExp };
enum class Epilogue { kNone, kSqrt, kLog };

// reduce(prologue(x)) then epilogue: covers ReduceSumSquare, ReduceL1, ReduceL2,
// ReduceLogSum and ReduceLogSumExp as written in the ONNX reference.
template <OpCode kOp, Prologue kPrologue = Prologue::kNone, Epilogue kEpilogue = Epilogue::kNone>
Status ImportReduce(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  ASSIGN_OR_RETURN(auto axes, ctx.IntsAttrOrInput("axes", 1));
  bool keepdims = ctx.Int("keepdims", 1) != 0;
  std::vector<int64_t> axis_list = axes.value_or(std::vector<int64_t>{});
  if (axis_list.empty() && ctx.Int("noop_with_empty_axes", 0) != 0) {
    ctx.SetOutput(0, x);
    return Status::Ok();
  }
  switch (kPrologue) {
    case Prologue::kNone: break;
    case Prologue::kSquare: x = b.Mul(x, x); break;
    case Prologue::kAbs: x = b.Unary(OpCode::kAbs, x); break;
    case Prologue::kExp: x = b.Unary(OpCode::kExp, x); break;
  }
  Value y = b.Reduce(kOp, x, axis_list, keepdims);
  switch (kEpilogue) {
    case Epilogue::kNone: break;
    case Epilogue::kSqrt: y = b.Unary(OpCode::kSqrt, y); break;
    case Epilogue::kLog: y = b.Unary(OpCode::kLog, y); break;
  }
  ctx.SetOutput(0, y);
  return Status::Ok();
}

}  // namespace

void RegisterReductionOps(OpRegistry& r) {
  r.Add("ReduceSum", ImportReduce<OpCode::kReduceSum>, 1, 2);
  r.Add("ReduceMean", ImportReduce<OpCode::kReduceMean>, 1, 2);
  r.Add("ReduceMax", ImportReduce<OpCode::kReduceMax>, 1, 2);
  r.Add("ReduceMin", ImportReduce<OpCode::kReduceMin>, 1, 2);
  r.Add("ReduceProd", ImportReduce<OpCode::kReduceProd>, 1, 2);
  r.Add("ReduceSumSquare", ImportReduce<OpCode::kReduceSum, Prologue::kSquare>, 1, 2);
  r.Add("ReduceL1", ImportReduce<OpCode::kReduceSum, Prologue::kAbs>, 1, 2);
  r.Add("ReduceL2", ImportReduce<OpCode::kReduceSum, Prologue::kSquare, Epilogue::kSqrt>, 1, 2);
  r.Add("ReduceLogSum", ImportReduce<OpCode::kReduceSum, Prologue::kNone, Epilogue::kLog>, 1, 2);
  r.Add("ReduceLogSumExp", ImportReduce<OpCode::kReduceSum, Prologue::kExp, Epilogue::kLog>, 1, 2);
}

}  // namespace tilefuse::onnx_import
