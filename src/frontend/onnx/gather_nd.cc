// GatherND: indices [B..., q..., k] pick slices data[B..., i_0, ..., i_{k-1}, :...] (the
// first b = batch_dims dims of data and indices are shared). It is one IR gather: data is
// flattened to [B·D_0·…·D_{k-1}, rest...] and every index tuple becomes one row number,
//
//   row = batch_position · (D_0·…·D_{k-1}) + Σ_j wrap(i_j) · stride_j
//
// with wrap(i) = i + D_j for a negative i. Known indices are turned into rows (and checked)
// here; indices computed at run time get the same arithmetic as graph nodes.
#include <fmt/format.h>

#include <algorithm>

#include "frontend/onnx/handler_util.h"
#include "frontend/onnx/op_registry.h"
#include "frontend/onnx/tensor_proto.h"

namespace tilefuse::onnx_import {

namespace {

// The shape facts of one GatherND node, checked.
struct GatherNDShape {
  Shape index_prefix;     // indices' shape without its last dim: the output's leading dims
  Shape tuple_dims;       // D_0..D_{k-1}: the data dims an index tuple addresses
  Shape rest;             // data's dims after them: the slice each tuple picks
  int64_t batches = 1;    // B: product of the batch dims
  int64_t tuples = 1;     // index tuples per batch position
  int64_t tuple_span = 1; // D_0·…·D_{k-1}
};

StatusOr<GatherNDShape> CheckShapes(const Shape& data, const Shape& indices, int64_t batch_dims) {
  auto r = static_cast<int64_t>(data.size()), q = static_cast<int64_t>(indices.size());
  if (r < 1 || q < 1) return InvalidArgument("data and indices must have rank >= 1");
  if (batch_dims < 0 || batch_dims >= std::min(r, q))
    return InvalidArgument(fmt::format("batch_dims {} must be in [0, {}) (the smaller rank of data and indices)",
                                       batch_dims, std::min(r, q)));
  int64_t k = indices.back();
  if (k < 1 || k > r - batch_dims)
    return InvalidArgument(fmt::format("indices' last dim ({}) must be in [1, {}] (data's rank less batch_dims)", k,
                                       r - batch_dims));
  GatherNDShape s;
  for (int64_t d = 0; d < batch_dims; ++d) {
    if (data[d] != indices[d])
      return InvalidArgument(fmt::format("batch dim {} differs: data has {}, indices {}", d, data[d], indices[d]));
    s.batches *= data[d];
  }
  s.index_prefix.assign(indices.begin(), indices.end() - 1);
  for (int64_t d = batch_dims; d < q - 1; ++d) s.tuples *= indices[d];
  s.tuple_dims.assign(data.begin() + batch_dims, data.begin() + batch_dims + k);
  s.rest.assign(data.begin() + batch_dims + k, data.end());
  for (int64_t dim : s.tuple_dims) s.tuple_span *= dim;
  return s;
}

std::vector<int64_t> TupleStrides(const Shape& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (int64_t d = static_cast<int64_t>(dims.size()) - 2; d >= 0; --d) strides[d] = strides[d + 1] * dims[d + 1];
  return strides;
}

// Rows for indices known at import time; InvalidArgument names an index out of range.
StatusOr<Value> KnownRows(GraphBuilder& b, const GatherNDShape& s, const Tensor& indices) {
  std::vector<int64_t> values = TensorToInt64s(indices);
  std::vector<int64_t> strides = TupleStrides(s.tuple_dims);
  auto k = static_cast<int64_t>(s.tuple_dims.size());
  std::vector<double> rows;
  rows.reserve(values.size() / k);
  for (int64_t t = 0; t < s.batches * s.tuples; ++t) {
    int64_t row = (t / s.tuples) * s.tuple_span;
    for (int64_t j = 0; j < k; ++j) {
      int64_t i = values[t * k + j], dim = s.tuple_dims[j];
      if (i < -dim || i >= dim)
        return InvalidArgument(fmt::format("index {} (position {} of tuple {}) is out of range for a dim of size {}", i,
                                           j, t, dim));
      row += (i < 0 ? i + dim : i) * strides[j];
    }
    rows.push_back(static_cast<double>(row));
  }
  return b.Constant(Tensor::FromDoubles(DType::kI64, s.index_prefix, rows));
}

// The same rows as graph nodes, for indices computed at run time.
Value RuntimeRows(GraphBuilder& b, const GatherNDShape& s, Value indices) {
  auto k = static_cast<int64_t>(s.tuple_dims.size());
  std::vector<double> dims(s.tuple_dims.begin(), s.tuple_dims.end());
  std::vector<int64_t> stride_ints = TupleStrides(s.tuple_dims);
  std::vector<double> strides(stride_ints.begin(), stride_ints.end());
  Value index = b.Reshape(b.Cast(indices, DType::kI64), {s.batches, s.tuples, k});
  Value negative = b.Binary(OpCode::kLess, index, b.Scalar(0, DType::kI64));
  Value wrapped = b.Where(negative, b.Add(index, b.Constant(Tensor::FromDoubles(DType::kI64, {k}, dims))), index);
  Value offsets = b.Mul(wrapped, b.Constant(Tensor::FromDoubles(DType::kI64, {k}, strides)));
  Value rows = b.Reduce(OpCode::kReduceSum, offsets, {2}, false);
  Value batch_start = b.MulScalar(b.Iota({s.batches, s.tuples}, 0, DType::kI64), static_cast<double>(s.tuple_span));
  return b.Reshape(b.Add(rows, batch_start), s.index_prefix);
}

Status ImportGatherND(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value data = ctx.Input(0), indices = ctx.Input(1);
  if (!IsInteger(b.dtype(indices)))
    return InvalidArgument(fmt::format("indices must be integers, got {}", DTypeName(b.dtype(indices))));
  ASSIGN_OR_RETURN(GatherNDShape s, CheckShapes(b.shape(data), b.shape(indices), ctx.Int("batch_dims", 0)));
  Value rows;
  if (const Tensor* known = ctx.KnownInput(1)) {
    ASSIGN_OR_RETURN(rows, KnownRows(b, s, *known));
  } else {
    rows = RuntimeRows(b, s, indices);
  }
  Shape table = {s.batches * s.tuple_span};
  table.insert(table.end(), s.rest.begin(), s.rest.end());
  ctx.SetOutput(0, b.Gather(b.Reshape(data, table), rows, 0));
  return Status::Ok();
}

}  // namespace

void RegisterGatherNDOps(OpRegistry& r) { r.Add("GatherND", ImportGatherND, 2, 2); }

}  // namespace tilefuse::onnx_import
