// Broadcast and view ops of the reference interpreter: reshape, transpose, slice,
// concat, gather, gather_elements. Broadcast, transpose and slice are all one strided
// read of the input; the gathers check every index before reading.
#include <fmt/format.h>

#include "reference/interpreter_kernels.h"
#include "support/check.h"

namespace tilefuse::interpreter {

namespace {

// out[flat] = in[offset] over a strided walk of the output shape.
void StridedCopy(const Operand& in, const Shape& out_shape, const std::vector<int64_t>& strides, int64_t base,
                 Values& out) {
  const double* src = in.data();
  ForEachStrided(out_shape, strides, base, [&](int64_t flat, int64_t offset) { out[flat] = src[offset]; });
}

void Transpose(const Node& node, const Operand& in, Values& out) {
  std::vector<int64_t> in_strides = RowMajorStrides(*in.shape), strides;
  for (int64_t p : node.attrs.perm) strides.push_back(in_strides[p]);
  StridedCopy(in, node.shape, strides, 0, out);
}

void Slice(const Node& node, const Operand& in, Values& out) {
  std::vector<int64_t> in_strides = RowMajorStrides(*in.shape), strides;
  int64_t base = 0;
  for (int d = 0; d < in.rank(); ++d) {
    base += node.attrs.starts[d] * in_strides[d];
    strides.push_back(node.attrs.steps[d] * in_strides[d]);
  }
  StridedCopy(in, node.shape, strides, base, out);
}

// Concat as blocks: for every index of the dims before the axis, each input in turn
// contributes one contiguous block of (its axis extent × the inner dims).
void Concat(const Node& node, const std::vector<Operand>& in, Values& out) {
  int axis = static_cast<int>(node.attrs.axis);
  int64_t outer = DimProduct(node.shape, 0, axis);
  int64_t inner = DimProduct(node.shape, axis + 1, static_cast<int>(node.shape.size()));
  double* dst = out.data();
  for (int64_t o = 0; o < outer; ++o) {
    for (const Operand& operand : in) {
      int64_t block = operand.dim(axis) * inner;
      const double* src = operand.data() + o * block;
      dst = std::copy(src, src + block, dst);
    }
  }
}

// Resolves an ONNX index (negative counts from the end) into [0, extent).
StatusOr<int64_t> ResolveIndex(double raw, int64_t extent, int64_t axis) {
  int64_t index = static_cast<int64_t>(raw);
  if (index < -extent || index >= extent)
    return InvalidArgument(fmt::format("index {} out of range [{}, {}) for axis {}", index, -extent, extent, axis));
  return index < 0 ? index + extent : index;
}

// ONNX Gather: out[outer, j, inner] = data[outer, indices[j], inner].
Status Gather(const Node& node, const Operand& data, const Operand& indices, Values& out) {
  int axis = static_cast<int>(node.attrs.axis);
  int64_t extent = data.dim(axis);
  int64_t outer = DimProduct(*data.shape, 0, axis);
  int64_t inner = DimProduct(*data.shape, axis + 1, data.rank());
  int64_t count = static_cast<int64_t>(indices.values->size());
  std::vector<int64_t> resolved(count);
  for (int64_t j = 0; j < count; ++j) {
    ASSIGN_OR_RETURN(resolved[j], ResolveIndex(indices.data()[j], extent, axis));
  }
  double* dst = out.data();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < count; ++j) {
      const double* src = data.data() + (o * extent + resolved[j]) * inner;
      dst = std::copy(src, src + inner, dst);
    }
  }
  return Status::Ok();
}

// ONNX GatherElements: out[i] = data[i with i[axis] replaced by indices[i]].
Status GatherElements(const Node& node, const Operand& data, const Operand& indices, Values& out) {
  int axis = static_cast<int>(node.attrs.axis);
  int64_t extent = data.dim(axis);
  for (int d = 0; d < data.rank(); ++d)
    if (d != axis && indices.dim(d) > data.dim(d))
      return InvalidArgument(fmt::format("indices {} exceed data {} on dim {}", ShapeToString(*indices.shape),
                                         ShapeToString(*data.shape), d));
  std::vector<int64_t> strides = RowMajorStrides(*data.shape);
  int64_t axis_stride = strides[axis];
  strides[axis] = 0;  // the axis position comes from the index, not the walk
  Status status;
  ForEachStrided(*indices.shape, strides, 0, [&](int64_t flat, int64_t offset) {
    if (!status.ok()) return;
    StatusOr<int64_t> index = ResolveIndex(indices.data()[flat], extent, axis);
    if (!index.ok()) {
      status = index.status();
      return;
    }
    out[flat] = data.data()[offset + *index * axis_stride];
  });
  return status;
}

}  // namespace

Status ComputeView(const Node& node, const std::vector<Operand>& in, Values& out) {
  switch (node.op) {
    case OpCode::kBroadcast: StridedCopy(in[0], node.shape, BroadcastStrides(*in[0].shape, node.shape), 0, out); break;
    case OpCode::kReshape: std::copy(in[0].values->begin(), in[0].values->end(), out.begin()); break;
    case OpCode::kTranspose: Transpose(node, in[0], out); break;
    case OpCode::kSlice: Slice(node, in[0], out); break;
    case OpCode::kConcat: Concat(node, in, out); break;
    case OpCode::kGather: return Gather(node, in[0], in[1], out);
    case OpCode::kGatherElements: return GatherElements(node, in[0], in[1], out);
    case OpCode::kWindow: return ComputeWindow(node, in, out);
    default: TF_UNREACHABLE("not a view or broadcast op");
  }
  return Status::Ok();
}

}  // namespace tilefuse::interpreter
