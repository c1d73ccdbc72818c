#include "passes/fold_constants.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "reference/interpreter.h"
#include "passes/rewriter.h"
#include "passes/transpose_tiles.h"

namespace tilefuse {

namespace {

bool IsFoldable(const Node& node) {
  return node.info().kind != OpKind::Source && node.op != OpCode::kRandomUniform && node.op != OpCode::kBroadcast;
}

// A value whose contents are known at compile time: a constant, a broadcast of one or a
// small iota (which stay broadcast and iota nodes in the graph, so their full values are made
// on demand: an iota only its readers' folds need stays an index computation, which common
// subexpressions merge and the kernels' matchers read; as a 4096-element constant it was a
// load, and the keys' and values' updates of a small KV cache compared with two such
// constants, never merged).
struct KnownValue {
  const Node* node;      // the constant, the broadcast or the iota, in the new graph
  const Tensor* source;  // the constant's value (null for an iota)
  bool IsSplat() const { return node->op == OpCode::kBroadcast && source->num_elements() == 1; }
  int64_t SourceElements() const { return source ? source->num_elements() : NumElements(node->shape); }
};

std::optional<KnownValue> FindKnownValue(const GraphBuilder& b, Value v) {
  const Node& node = b.node(v);
  if (node.op == OpCode::kConstant) return KnownValue{&node, node.attrs.value.get()};
  if (node.op == OpCode::kIota && NumElements(node.shape) <= kMaxFoldedIotaElements) return KnownValue{&node, nullptr};
  if (node.op != OpCode::kBroadcast) return std::nullopt;
  const Node& input = b.graph().node(node.inputs[0]);
  if (input.op != OpCode::kConstant) return std::nullopt;
  return KnownValue{&node, input.attrs.value.get()};
}

// The known values of all of `node`'s inputs, or nothing when one is unknown.
std::optional<std::vector<KnownValue>> KnownInputs(GraphRewriter& rewriter, const Node& node) {
  std::vector<KnownValue> known;
  for (Value v : rewriter.MapInputs(node)) {
    std::optional<KnownValue> value = FindKnownValue(rewriter.builder(), v);
    if (!value) return std::nullopt;
    known.push_back(*value);
  }
  return known;
}

bool IsLargeExpansion(const Node& node, const std::vector<KnownValue>& inputs) {
  int64_t input_elements = 0;
  for (const KnownValue& k : inputs) input_elements += k.SourceElements();
  int64_t result_elements = NumElements(node.shape);
  return result_elements > kMaxFoldedExpansionElements && result_elements > input_elements;
}

Tensor AsScalar(const Tensor& single) {
  Tensor scalar(single.dtype(), {});
  std::memcpy(scalar.data(), single.data(), single.num_bytes());
  return scalar;
}

// op(splat a, splat b, ...) = splat(op(a, b, ...)): evaluated once, on rank-0 values.
Status FoldSplats(GraphRewriter& rewriter, const Node& node, const std::vector<KnownValue>& inputs) {
  std::vector<Tensor> scalars;
  std::vector<const Tensor*> pointers;
  for (const KnownValue& k : inputs) scalars.push_back(AsScalar(*k.source));
  for (const Tensor& t : scalars) pointers.push_back(&t);
  Node scalar_node = node;
  scalar_node.shape = {};
  ASSIGN_OR_RETURN(Tensor value, EvaluateNode(scalar_node, pointers));
  Value scalar = rewriter.ReplaceWithConstant(node, std::move(value));
  rewriter.SetMap(node.id, rewriter.builder().BroadcastTo(scalar, node.shape));
  return Status::Ok();
}

// out[i...] = in[sum i_d * stride[d]], row by row along the last output dim.
template <typename Element>
void PermuteRows(const Tensor& in, Tensor& out, const Shape& shape, const std::vector<int64_t>& stride) {
  const int rank = static_cast<int>(shape.size());
  const int64_t inner = shape[rank - 1], last_stride = stride[rank - 1];
  const auto* src = reinterpret_cast<const Element*>(in.data());
  auto* dst = reinterpret_cast<Element*>(out.data());
  std::vector<int64_t> index(rank, 0);  // the output index of the row being copied (last dim 0)
  for (int64_t row = 0; row < out.num_elements() / inner; ++row) {
    int64_t offset = 0;
    for (int d = 0; d < rank - 1; ++d) offset += index[d] * stride[d];
    for (int64_t i = 0; i < inner; ++i) *dst++ = src[offset + i * last_stride];
    for (int d = rank - 2; d >= 0 && ++index[d] == shape[d]; --d) index[d] = 0;
  }
}

// A reshape or transpose of a constant, moved as bytes: the interpreter's path goes through
// f64 element by element, which took seconds on a model's weights (the transposed 32000×2048
// embedding of a LLaMA, 2026-11-29). Same bits either way.
std::optional<Tensor> MoveBytes(const Node& node, const Tensor& in) {
  if (node.op == OpCode::kReshape) {
    Tensor out = Tensor::Uninitialized(in.dtype(), node.shape);
    if (out.num_bytes() > 0) std::memcpy(out.data(), in.data(), out.num_bytes());
    return out;
  }
  if (node.op != OpCode::kTranspose) return std::nullopt;
  const std::vector<int64_t>& perm = node.attrs.perm;
  const int rank = static_cast<int>(perm.size());
  if (rank != in.rank() || rank == 0) return std::nullopt;
  const size_t element = in.num_elements() > 0 ? in.num_bytes() / static_cast<size_t>(in.num_elements()) : 0;
  std::vector<int64_t> in_strides(rank, 1);
  for (int d = rank - 2; d >= 0; --d) in_strides[d] = in_strides[d + 1] * in.shape()[d + 1];
  std::vector<int64_t> stride(rank);  // the input stride of each output dim
  for (int d = 0; d < rank; ++d) stride[d] = in_strides[perm[d]];
  Tensor out = Tensor::Uninitialized(in.dtype(), node.shape);
  const int64_t count = out.num_elements();
  const int64_t inner = rank > 0 ? node.shape[rank - 1] : 1;
  if (count == 0 || inner == 0) return out;
  // The last two dims swapped, the others in place: a (batched) matrix transpose.
  bool matrix_transpose = rank >= 2 && perm[rank - 1] == rank - 2 && perm[rank - 2] == rank - 1;
  for (int d = 0; d < rank - 2; ++d) matrix_transpose = matrix_transpose && perm[d] == d;
  if (matrix_transpose) {
    const int64_t rows = in.shape()[rank - 2], cols = in.shape()[rank - 1], batches = count / std::max<int64_t>(1, rows * cols);
    if (TransposeLastTwoDims(in, out, batches, rows, cols)) return out;
  }
  switch (element) {  // a typed copy: a model's weights are tens of millions of elements
    case 1: PermuteRows<uint8_t>(in, out, node.shape, stride); break;
    case 2: PermuteRows<uint16_t>(in, out, node.shape, stride); break;
    case 4: PermuteRows<uint32_t>(in, out, node.shape, stride); break;
    case 8: PermuteRows<uint64_t>(in, out, node.shape, stride); break;
    default: return std::nullopt;
  }
  return out;
}

// Makes the full value of every input (materialising broadcasts and iotas) and evaluates `node`.
Status FoldFull(GraphRewriter& rewriter, const Node& node, const std::vector<KnownValue>& inputs) {
  std::vector<Tensor> expanded;
  expanded.reserve(inputs.size());  // (pointers into it stay valid)
  std::vector<const Tensor*> pointers;
  for (const KnownValue& k : inputs) {
    if (k.node->op == OpCode::kIota || k.node->op == OpCode::kBroadcast) {
      std::vector<const Tensor*> from;  // (an iota's value has no input)
      if (k.source) from.push_back(k.source);
      ASSIGN_OR_RETURN(Tensor full, EvaluateNode(*k.node, from));
      expanded.push_back(std::move(full));
      pointers.push_back(&expanded.back());
    } else {
      pointers.push_back(k.source);
    }
  }
  ASSIGN_OR_RETURN(Tensor value, EvaluateNode(node, pointers));
  rewriter.ReplaceWithConstant(node, std::move(value));
  return Status::Ok();
}

// Whether `node` is a transpose of an [N][K] value that only products read as their right
// operand, in the K-major form `options` stores their weights in (FoldConstantsOptions):
// where that value is a constant (after folding), the transpose stays.
bool IsKMajorWeight(const Graph& graph, const Node& node, const std::vector<std::vector<int>>& users,
                    const FoldConstantsOptions& options) {
  if (node.op != OpCode::kTranspose || node.attrs.perm != std::vector<int64_t>{1, 0} || users[node.id].empty()) return false;
  if (!StoresKMajor(node.dtype, node.shape, options.k_major)) return false;
  return std::all_of(users[node.id].begin(), users[node.id].end(), [&](int user) {
    const Node& u = graph.node(user);
    return u.op == OpCode::kMatMul && u.inputs[1] == node.id && u.inputs[0] != node.id;
  });
}

Status FoldNode(GraphRewriter& rewriter, const Node& node, bool k_major_weight) {
  std::optional<std::vector<KnownValue>> inputs;
  // (An iota stays one; its readers fold it where all their inputs are known: KnownValue.)
  if (IsFoldable(node) && node.op != OpCode::kIota && rewriter.builder().ok()) inputs = KnownInputs(rewriter, node);
  // A weight read K-major stays the transpose of its constant (FoldConstantsOptions).
  const bool keep = k_major_weight && inputs && inputs->size() == 1 && (*inputs)[0].node->op == OpCode::kConstant;
  if (!inputs || keep) {
    rewriter.CopyNode(node);
    return Status::Ok();
  }
  bool all_splats = !inputs->empty() && node.info().kind == OpKind::Pointwise;
  for (const KnownValue& k : *inputs) all_splats = all_splats && k.IsSplat();
  if (all_splats) return FoldSplats(rewriter, node, *inputs).WithContext("constant folding " + NodeLabel(node));
  // A slice, reshape or transpose of a splat is the same splat in its own shape: a
  // broadcast, not the elements stored (a backward's slice_scatter into zeros was a
  // megabyte constant uploaded and read).
  const bool moves_elements = node.op == OpCode::kSlice || node.op == OpCode::kReshape || node.op == OpCode::kTranspose;
  if (moves_elements && inputs->size() == 1 && (*inputs)[0].IsSplat()) {
    Value scalar = rewriter.ReplaceWithConstant(node, AsScalar(*(*inputs)[0].source));
    rewriter.SetMap(node.id, rewriter.builder().BroadcastTo(scalar, node.shape));
    return Status::Ok();
  }
  if (IsLargeExpansion(node, *inputs)) {
    rewriter.CopyNode(node);
    return Status::Ok();
  }
  if (inputs->size() == 1 && (*inputs)[0].node->op == OpCode::kConstant)
    if (std::optional<Tensor> moved = MoveBytes(node, *(*inputs)[0].source)) {
      rewriter.ReplaceWithConstant(node, std::move(*moved));
      return Status::Ok();
    }
  return FoldFull(rewriter, node, *inputs).WithContext("constant folding " + NodeLabel(node));
}

}  // namespace

StatusOr<Graph> FoldConstants(const Graph& graph, const FoldConstantsOptions& options) {
  GraphRewriter rewriter(graph);
  const bool k_major = options.k_major.f32 || options.k_major.unaligned_half;
  std::vector<std::vector<int>> users(k_major ? graph.num_nodes() : 0);
  if (k_major)
    for (const Node& n : graph.nodes())
      for (int input : n.inputs) users[input].push_back(n.id);
  for (const Node& node : graph.nodes())
    RETURN_IF_ERROR(FoldNode(rewriter, node, k_major && IsKMajorWeight(graph, node, users, options)));
  return rewriter.Finish();
}

}  // namespace tilefuse
