// ScatterElements (and its old name Scatter) and ScatterND, for indices known at import
// time. The importer works out which update elements land on each data element, in the
// order the ONNX reference applies them; with at most K writers per element the result is
// K rounds of
//
//   acc = where(has_writer_k, combine(acc, updates[writer_k]), acc)    acc_0 = data
//
// over the flattened data, where combine is the reduction (none: the update itself; add,
// mul, max, min). Indices computed at run time are refused with the input named.
#include <fmt/format.h>

#include <algorithm>

#include "frontend/onnx/handler_util.h"
#include "frontend/onnx/op_registry.h"
#include "frontend/onnx/tensor_proto.h"

namespace tilefuse::onnx_import {

namespace {

std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d) strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

StatusOr<int64_t> CheckedIndex(int64_t index, int64_t dim) {
  if (index < -dim || index >= dim)
    return InvalidArgument(fmt::format("index {} is out of range for a dim of size {}", index, dim));
  return index < 0 ? index + dim : index;
}

// The writes are worked out per data element and applied as constants of the data's size
// per round: bounded, so that a huge data input is refused rather than allocated.
constexpr int64_t kMaxScatterElements = int64_t{1} << 24;  // data elements
constexpr int64_t kMaxScatterWork = int64_t{1} << 26;      // data elements x rounds

// One (empty) writer list per data element, or why the data is too large.
StatusOr<std::vector<std::vector<int64_t>>> NoWriters(const Shape& shape) {
  const int64_t elements = NumElements(shape);
  if (elements > kMaxScatterElements)
    return InvalidArgument(fmt::format("data has {} elements; scatters with indices known at import time are written out over "
                                       "at most {} elements",
                                       elements, kMaxScatterElements));
  return std::vector<std::vector<int64_t>>(elements);
}

// Applies the writes: writers[t] lists the flat update elements landing on flat data
// element t, in order.
StatusOr<Value> ApplyWrites(NodeContext& ctx, Value data, Value updates,
                            const std::vector<std::vector<int64_t>>& writers) {
  GraphBuilder& b = ctx.b();
  std::string reduction = ctx.String("reduction", "none");
  OpCode combine = OpCode::kAdd;  // "none" combines nothing
  if (reduction == "add") combine = OpCode::kAdd;
  else if (reduction == "mul") combine = OpCode::kMul;
  else if (reduction == "max") combine = OpCode::kMax;
  else if (reduction == "min") combine = OpCode::kMin;
  else if (reduction != "none") return InvalidArgument(fmt::format("reduction '{}' must be none, add, mul, max or min", reduction));
  Shape shape = b.shape(data);
  auto n = static_cast<int64_t>(writers.size());
  size_t rounds = 0;
  for (const auto& w : writers) rounds = std::max(rounds, w.size());
  if (static_cast<int64_t>(rounds) * n > kMaxScatterWork)
    return InvalidArgument(fmt::format("{} updates land on one data element of {}: {} rounds over the data exceed the {} "
                                       "element-rounds the importer writes out",
                                       rounds, n, rounds, kMaxScatterWork));
  Value acc = b.Reshape(data, {n});
  Value flat_updates = b.Reshape(updates, {NumElements(b.shape(updates))});
  for (size_t k = 0; k < rounds; ++k) {
    std::vector<double> source(n, 0), has(n, 0);
    for (int64_t t = 0; t < n; ++t)
      if (k < writers[t].size()) source[t] = static_cast<double>(writers[t][k]), has[t] = 1;
    Value update = b.Gather(flat_updates, b.Constant(Tensor::FromDoubles(DType::kI64, {n}, source)), 0);
    Value combined = reduction == "none" ? update : b.Binary(combine, acc, update);
    acc = b.Where(b.Constant(Tensor::FromDoubles(DType::kBool, {n}, has)), combined, acc);
  }
  return b.Reshape(acc, shape);
}

StatusOr<std::vector<int64_t>> KnownIndices(NodeContext& ctx) {
  ASSIGN_OR_RETURN(Tensor indices, ctx.ConstInput(1, "indices"));
  if (!IsInteger(indices.dtype()))
    return InvalidArgument(fmt::format("indices must be integers, got {}", DTypeName(indices.dtype())));
  return TensorToInt64s(indices);
}

Status CheckUpdatesDType(GraphBuilder& b, Value data, Value updates) {
  if (b.dtype(data) != b.dtype(updates))
    return InvalidArgument(fmt::format("updates are {} but data is {}", DTypeName(b.dtype(updates)), DTypeName(b.dtype(data))));
  return Status::Ok();
}

// out[p with p[axis] = indices[p]] = updates[p] for every position p of indices.
Status ImportScatterElements(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value data = ctx.Input(0), updates = ctx.Input(2);
  RETURN_IF_ERROR(CheckUpdatesDType(b, data, updates));
  ASSIGN_OR_RETURN(std::vector<int64_t> indices, KnownIndices(ctx));
  Shape shape = b.shape(data), index_shape = b.shape(ctx.Input(1));
  if (index_shape != b.shape(updates)) return InvalidArgument("indices and updates must have the same shape");
  if (index_shape.size() != shape.size()) return InvalidArgument("indices must have the rank of data");
  ASSIGN_OR_RETURN(int64_t axis, NormalizeOnnxAxis(ctx.Int("axis", 0), b.rank(data), "axis"));
  std::vector<int64_t> strides = Strides(shape), index_strides = Strides(index_shape);
  ASSIGN_OR_RETURN(std::vector<std::vector<int64_t>> writers, NoWriters(shape));
  for (int64_t u = 0; u < static_cast<int64_t>(indices.size()); ++u) {
    int64_t target = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      int64_t position = (u / index_strides[d]) % index_shape[d];
      if (static_cast<int64_t>(d) == axis) {
        ASSIGN_OR_RETURN(position, CheckedIndex(indices[u], shape[d]));
      } else if (position >= shape[d]) {
        return InvalidArgument(fmt::format("indices dim {} ({}) is larger than data's ({})", d, index_shape[d], shape[d]));
      }
      target += position * strides[d];
    }
    writers[target].push_back(u);
  }
  ASSIGN_OR_RETURN(Value out, ApplyWrites(ctx, data, updates, writers));
  ctx.SetOutput(0, out);
  return Status::Ok();
}

// indices [q..., k] address the slices data[i_0, ..., i_{k-1}, :...]; updates [q..., rest].
Status ImportScatterND(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  Value data = ctx.Input(0), updates = ctx.Input(2);
  RETURN_IF_ERROR(CheckUpdatesDType(b, data, updates));
  ASSIGN_OR_RETURN(std::vector<int64_t> indices, KnownIndices(ctx));
  Shape shape = b.shape(data), index_shape = b.shape(ctx.Input(1));
  if (index_shape.empty() || index_shape.back() > static_cast<int64_t>(shape.size()) || index_shape.back() < 1)
    return InvalidArgument(fmt::format("indices' last dim must be in [1, {}] (the rank of data)", shape.size()));
  auto k = static_cast<size_t>(index_shape.back());
  Shape expected(index_shape.begin(), index_shape.end() - 1);
  expected.insert(expected.end(), shape.begin() + k, shape.end());
  if (b.shape(updates) != expected)
    return InvalidArgument(fmt::format("updates have shape [{}], expected [{}]", fmt::join(b.shape(updates), ", "),
                                       fmt::join(expected, ", ")));
  std::vector<int64_t> strides = Strides(shape);
  int64_t slice = 1;
  for (size_t d = k; d < shape.size(); ++d) slice *= shape[d];
  ASSIGN_OR_RETURN(std::vector<std::vector<int64_t>> writers, NoWriters(shape));
  int64_t tuples = static_cast<int64_t>(indices.size() / k);
  for (int64_t q = 0; q < tuples; ++q) {
    int64_t base = 0;
    for (size_t d = 0; d < k; ++d) {
      ASSIGN_OR_RETURN(int64_t position, CheckedIndex(indices[q * k + d], shape[d]));
      base += position * strides[d];
    }
    for (int64_t e = 0; e < slice; ++e) writers[base + e].push_back(q * slice + e);
  }
  ASSIGN_OR_RETURN(Value out, ApplyWrites(ctx, data, updates, writers));
  ctx.SetOutput(0, out);
  return Status::Ok();
}

}  // namespace

void RegisterScatterOps(OpRegistry& r) {
  r.Add("Scatter", ImportScatterElements, 3, 3);  // opsets 9-10, ScatterElements' old name
  r.Add("ScatterElements", ImportScatterElements, 3, 3);
  r.Add("ScatterND", ImportScatterND, 3, 3);
}

}  // namespace tilefuse::onnx_import
