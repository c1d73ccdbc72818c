// Gather and GatherElements. ONNX indices may be negative (counting from the end of
// the gathered dim); the IR's gather takes indices in [0, dim), so the importer
// normalizes them: known indices right here, others with where(i < 0, i + dim, i).
#include <fmt/format.h>

#include "frontend/onnx/handler_util.h"
#include "frontend/onnx/op_registry.h"
#include "frontend/onnx/tensor_proto.h"

namespace tilefuse::onnx_import {

namespace {

StatusOr<Value> NonNegativeIndices(NodeContext& ctx, int64_t dim) {
  GraphBuilder& b = ctx.b();
  Value indices = ctx.Input(1);
  DType dtype = b.dtype(indices);
  if (!IsInteger(dtype)) return InvalidArgument(fmt::format("indices must be integers, got {}", DTypeName(dtype)));
  if (const Tensor* known = ctx.KnownInput(1)) {
    std::vector<int64_t> values = TensorToInt64s(*known);
    bool any_negative = false;
    for (int64_t v : values) {
      if (v < -dim || v >= dim)
        return InvalidArgument(fmt::format("index {} is out of range for a dim of size {}", v, dim));
      any_negative = any_negative || v < 0;
    }
    if (!any_negative) return indices;
    std::vector<double> fixed;
    for (int64_t v : values) fixed.push_back(static_cast<double>(v < 0 ? v + dim : v));
    return b.Constant(Tensor::FromDoubles(dtype, known->shape(), fixed));
  }
  if (dtype == DType::kU8) return indices;
  Value negative = b.Binary(OpCode::kLess, indices, ScalarLike(b, indices, 0));
  return b.Where(negative, AddScalar(b, indices, static_cast<double>(dim)), indices);
}

template <bool kElements>
Status ImportGather(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value data = ctx.Input(0);
  ASSIGN_OR_RETURN(int64_t axis, NormalizeOnnxAxis(ctx.Int("axis", 0), b.rank(data), "axis"));
  ASSIGN_OR_RETURN(Value indices, NonNegativeIndices(ctx, b.shape(data)[axis]));
  ctx.SetOutput(0, kElements ? b.GatherElements(data, indices, axis) : b.Gather(data, indices, axis));
  return Status::Ok();
}

// OneHot: out[..., j, ...] = (j == index) ? on : off, with the new dim of size
// `depth` at `axis`; negative indices count from depth.
Status ImportOneHot(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value indices = ctx.Input(0), values = ctx.Input(2);
  ASSIGN_OR_RETURN(double depth, ctx.ConstScalar(1, "depth"));
  if (!(depth >= 1 && depth <= static_cast<double>(kMaxValueElements)))  // NaN too
    return InvalidArgument(fmt::format("depth {} must be in [1, {}]", depth, kMaxValueElements));
  if (NumElements(b.shape(values)) != 2) return InvalidArgument("values must hold [off, on]");
  int64_t out_rank = b.rank(indices) + 1;
  ASSIGN_OR_RETURN(int64_t axis, NormalizeOnnxAxis(ctx.Int("axis", -1), out_rank, "axis"));
  Value index = b.Cast(indices, DType::kI64);
  Value wrapped = b.Where(b.Binary(OpCode::kLess, index, ScalarLike(b, index, 0)), AddScalar(b, index, depth), index);
  Value expanded = b.Unsqueeze(wrapped, {axis});
  if (!b.ok()) return Status::Ok();
  Shape out = b.shape(expanded);
  out[axis] = static_cast<int64_t>(depth);
  Value hot = b.Binary(OpCode::kEqual, expanded, b.Iota(out, axis, DType::kI64));
  Value flat = b.Reshape(values, {2});
  Value off = b.Reshape(b.Slice(flat, {0}, {1}, {0}, {1}), {});
  Value on = b.Reshape(b.Slice(flat, {1}, {2}, {0}, {1}), {});
  ctx.SetOutput(0, b.Where(hot, on, off));
  return Status::Ok();
}

}  // namespace

void RegisterIndexingOps(OpRegistry& r) {
  r.Add("OneHot", ImportOneHot, 3, 3);
  r.Add("Gather", ImportGather<false>, 2, 2);
  r.Add("GatherElements", ImportGather<true>, 2, 2);
}

}  // namespace tilefuse::onnx_import
