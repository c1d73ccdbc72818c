// TopK for a K known at import time, as primitives: each element's place in the sorted
// order is the number of elements that come before it,
//
//   place[i] = Σ_j before(j, i)      before(j, i) = x_j beats x_i, or x_j ties x_i and j < i
//
// (a [..., n, n] compare and a sum over it: quadratic in the axis length, like CumSum),
// then output slot p takes the index whose place is p, and the values are gathered
// from x at those indices. Ties go to the lower index, as the ONNX spec asks; NaN counts
// as larger than every number (numpy's sort order, which the ONNX reference uses). The
// outputs are always sorted, which `sorted = 0` (order unspecified) allows.
#include <fmt/format.h>

#include "frontend/onnx/handler_util.h"
#include "frontend/onnx/op_registry.h"
#include "frontend/onnx/tensor_proto.h"

namespace tilefuse::onnx_import {

namespace {

// K from the attribute (opsets 1-9) or the input (10+), checked against the axis length.
StatusOr<int64_t> ReadK(NodeContext& ctx, int64_t axis_length) {
  double k = 0;
  if (ctx.opset() < 10) {
    if (!ctx.HasAttr("k")) return InvalidArgument("attribute 'k' is missing");
    k = static_cast<double>(ctx.Int("k", 0));
  } else {
    if (!ctx.HasInput(1)) return InvalidArgument("input 1 (K) is missing");
    if (!IsInteger(ctx.b().dtype(ctx.Input(1))))
      return InvalidArgument(fmt::format("K must be an integer, got {}", DTypeName(ctx.b().dtype(ctx.Input(1)))));
    ASSIGN_OR_RETURN(k, ctx.ConstScalar(1, "K"));
  }
  if (!(k >= 0 && k <= static_cast<double>(axis_length)))
    return InvalidArgument(fmt::format("K = {} must be in [0, {}] (the length of the axis)", k, axis_length));
  return static_cast<int64_t>(k);
}

// before(j, i) over [..., n (i at dim axis), n (j at dim axis + 1), ...].
Value ComesBefore(GraphBuilder& b, Value x, int64_t axis, bool largest) {
  Value xi = b.Unsqueeze(x, {axis + 1}), xj = b.Unsqueeze(x, {axis});
  Value beats = b.Binary(largest ? OpCode::kGreater : OpCode::kLess, xj, xi);
  Value ties = b.Binary(OpCode::kEqual, xj, xi);
  if (IsFloat(b.dtype(x))) {
    Value nan_i = b.Unary(OpCode::kIsNaN, xi), nan_j = b.Unary(OpCode::kIsNaN, xj);
    // Largest first: a NaN beats every number; smallest first: every number beats a NaN.
    Value nan_beats = largest ? b.Binary(OpCode::kAnd, nan_j, b.Unary(OpCode::kNot, nan_i))
                              : b.Binary(OpCode::kAnd, nan_i, b.Unary(OpCode::kNot, nan_j));
    beats = b.Binary(OpCode::kOr, beats, nan_beats);
    ties = b.Binary(OpCode::kOr, ties, b.Binary(OpCode::kAnd, nan_i, nan_j));
  }
  int64_t n = b.shape(x)[axis];
  Shape pair_shape(b.rank(x) + 1, 1);
  pair_shape[axis] = pair_shape[axis + 1] = n;
  Value j_lower = b.Binary(OpCode::kLess, b.Iota(pair_shape, axis + 1, DType::kI64), b.Iota(pair_shape, axis, DType::kI64));
  return b.Binary(OpCode::kOr, beats, b.Binary(OpCode::kAnd, ties, j_lower));
}

Status ImportTopK(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value x = ctx.Input(0);
  if (b.rank(x) == 0) return InvalidArgument("TopK needs an input of rank >= 1");
  if (b.dtype(x) == DType::kBool) return InvalidArgument("TopK does not take bool inputs");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeOnnxAxis(ctx.Int("axis", -1), b.rank(x), "axis"));
  Shape shape = b.shape(x);
  int64_t n = shape[axis];
  ASSIGN_OR_RETURN(int64_t k, ReadK(ctx, n));
  Shape pairs = shape;
  pairs.insert(pairs.begin() + axis + 1, n);
  RETURN_IF_ERROR(CheckShapeSize(pairs, kMaxValueElements, "the pairwise comparison along the axis"));
  bool largest = ctx.Int("largest", 1) != 0;

  Value zero = b.Scalar(0, DType::kI64);
  Value place = b.Reduce(OpCode::kReduceSum, b.Where(ComesBefore(b, x, axis, largest), b.Scalar(1, DType::kI64), zero),
                         {axis + 1}, false);
  // slot_match over [..., n (element at axis), k (slot at axis + 1), ...].
  Shape slot_shape(shape.size() + 1, 1), element_shape(shape.size() + 1, 1);
  slot_shape[axis + 1] = k;
  element_shape[axis] = n;
  Value slot_match = b.Binary(OpCode::kEqual, b.Unsqueeze(place, {axis + 1}), b.Iota(slot_shape, axis + 1, DType::kI64));
  Value indices = b.Reduce(OpCode::kReduceSum, b.Where(slot_match, b.Iota(element_shape, axis, DType::kI64), zero),
                           {axis}, false);
  ctx.SetOutput(0, b.GatherElements(x, indices, axis));
  ctx.SetOutput(1, indices);
  return Status::Ok();
}

}  // namespace

void RegisterTopKOps(OpRegistry& r) { r.Add("TopK", ImportTopK, 1, 2); }

}  // namespace tilefuse::onnx_import
