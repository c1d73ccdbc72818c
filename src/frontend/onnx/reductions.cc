// Reductions. Axes are an attribute (ReduceSum before opset 13, the others before 18)
// or an input (from then on); both forms are accepted at every opset. ArgMax and ArgMin
// are reductions followed by a search for the matching index (handler_util's ArgExtreme).
#include <fmt/format.h>

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

// ArgMax / ArgMin: int64 indices along `axis` (default 0).
template <bool kLargest>
Status ImportArgExtreme(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  ASSIGN_OR_RETURN(int64_t axis, NormalizeOnnxAxis(ctx.Int("axis", 0), b.rank(x), "axis"));
  if (b.shape(x)[axis] == 0) return InvalidArgument(fmt::format("axis {} has no elements to pick from", axis));
  bool last = ctx.Int("select_last_index", 0) != 0;
  ctx.SetOutput(0, ArgExtreme(b, x, axis, kLargest, last, ctx.Int("keepdims", 1) != 0));
  return Status::Ok();
}

// CumSum along a known axis: out[..., i, ...] = sum over j of mask(i, j) * x[..., j, ...],
// with mask j <= i (j < i exclusive; j >= i and j > i reversed), as a where over a new
// dim and a sum over it. Quadratic in the axis length; the importer's element limit
// refuses sizes where that would hurt.
Status ImportCumSum(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  ASSIGN_OR_RETURN(double axis_value, ctx.ConstScalar(1, "axis"));
  if (b.rank(x) == 0) return InvalidArgument("CumSum needs an input of rank >= 1");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeOnnxAxis(static_cast<int64_t>(axis_value), b.rank(x), "axis"));
  bool exclusive = ctx.Int("exclusive", 0) != 0, reverse = ctx.Int("reverse", 0) != 0;
  int64_t n = b.shape(x)[axis];
  Value out_index = b.Iota({n, n}, 0, DType::kI64), in_index = b.Iota({n, n}, 1, DType::kI64);
  OpCode compare = reverse ? (exclusive ? OpCode::kGreater : OpCode::kGreaterEqual)
                           : (exclusive ? OpCode::kLess : OpCode::kLessEqual);
  Shape mask_shape(b.rank(x) + 1, 1);
  mask_shape[axis] = n;
  mask_shape[axis + 1] = n;
  Value mask = b.Reshape(b.Binary(compare, in_index, out_index), mask_shape);
  Value terms = b.Where(mask, b.Unsqueeze(x, {axis}), ScalarLike(b, x, 0));
  ctx.SetOutput(0, b.Reduce(OpCode::kReduceSum, terms, {axis + 1}, false));
  return Status::Ok();
}

}  // namespace

void RegisterReductionOps(OpRegistry& r) {
  r.Add("ArgMax", ImportArgExtreme<true>, 1, 1);
  r.Add("CumSum", ImportCumSum, 2, 2);
  r.Add("ArgMin", ImportArgExtreme<false>, 1, 1);
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
