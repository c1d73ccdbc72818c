#include "passes/sink_transposes.h"

#include <algorithm>
#include <map>
#include <optional>

#include "passes/layout_perm.h"
#include "passes/rewriter.h"

namespace tilefuse {

namespace {

using layout::Perm;

Perm Identity(int rank) {
  Perm perm(rank);
  for (int i = 0; i < rank; ++i) perm[i] = i;
  return perm;
}

// Channels-last back to channels-first: the value before it is stored NHWC.
bool StartsLayout(const Perm& perm) { return perm == Perm{0, 3, 1, 2}; }

// A product's columns split into heads and moved before its rows ([B, T, H, D] → [B, H, T, D],
// q and k of attention): the value before it is the product's own layout. The pointwise ops
// after it (rotary embeddings: products by cos and sin, a rotated half) then compute in that
// layout, where the product's epilogue takes them, and attention reads the transposed view
// where it lies. (A LLaMA-style layer at batch 1 ran each rotary embedding as a kernel of its
// own, 4.5-5 µs, H200, 2026-12-02.)
bool StartsHeadsLayout(const Graph& graph, const Node& transpose) {
  if (transpose.attrs.perm != Perm{0, 2, 1, 3}) return false;
  const Node* source = &graph.node(transpose.inputs[0]);
  if (source->op != OpCode::kReshape) return false;
  while (source->op == OpCode::kReshape) source = &graph.node(source->inputs[0]);
  return source->op == OpCode::kMatMul;
}

Value BuildReshape(GraphBuilder& b, Value v, const Shape& shape) {
  if (!v.valid()) return v;  // the builder failed; Finish reports it
  if (b.node(v).op == OpCode::kReshape) v = Value{b.node(v).inputs[0]};
  return b.Reshape(v, shape);
}

// transpose(v, perm), simplified: see the header.
Value BuildTranspose(GraphBuilder& b, Value v, const Perm& perm) {
  if (!v.valid() || layout::IsIdentity(perm)) return v;
  const Node node = b.node(v);  // a copy: building adds nodes
  if (node.op == OpCode::kTranspose) return BuildTranspose(b, Value{node.inputs[0]}, layout::Compose(node.attrs.perm, perm));
  if (layout::MovesOnlyUnitDims(node.shape, perm)) return BuildReshape(b, v, layout::Permuted(node.shape, perm));
  if (node.op == OpCode::kBroadcast) {
    Value input{node.inputs[0]};
    Shape aligned = b.shape(input);  // numpy-aligned to the right: leading 1s
    aligned.insert(aligned.begin(), node.shape.size() - aligned.size(), 1);
    Value transposed = BuildTranspose(b, BuildReshape(b, input, aligned), perm);
    return b.BroadcastTo(transposed, layout::Permuted(node.shape, perm));
  }
  return b.Transpose(v, perm);
}

// Old node x as a value of the new graph: x = transpose(value, perm).
struct Laid {
  Value value;
  Perm perm;
  bool pending() const { return !layout::IsIdentity(perm); }
};

class TransposeSinker {
 public:
  TransposeSinker(const Graph& graph, const SinkTransposesOptions& options)
      : options_(options), rewriter_(graph), users_(graph.ComputeUsers()), laid_(graph.num_nodes()), built_(graph.num_nodes()) {}

  StatusOr<Graph> Run() {
    for (const Node& node : rewriter_.source().nodes()) {
      rewriter_.SetLocation(node);
      if (!b().ok()) break;
      laid_[node.id] = Visit(node);
    }
    if (b().ok())
      for (const Graph::Output& out : rewriter_.source().outputs()) rewriter_.SetMap(out.node, Built(out.node));
    return rewriter_.Finish();
  }

 private:
  GraphBuilder& b() { return rewriter_.builder(); }

  Laid Visit(const Node& node) {
    if (node.op == OpCode::kTranspose) return VisitTranspose(node);
    if ((node.info().kind == OpKind::Pointwise && !node.inputs.empty()) || node.op == OpCode::kConcat)
      return VisitElementwise(node);
    if (node.inputs.empty() || !laid_[node.inputs[0]].pending()) return Copy(node);
    std::optional<Laid> laid;
    if (node.op == OpCode::kBroadcast) laid = VisitBroadcast(node);
    else if (node.info().kind == OpKind::Reduction) laid = VisitReduction(node);
    else if (node.op == OpCode::kReshape) laid = VisitReshape(node);
    else if (node.op == OpCode::kSlice) laid = VisitSlice(node);
    else if (node.op == OpCode::kWindow) laid = VisitTap(node);
    else if (node.op == OpCode::kGather) laid = VisitGather(node);
    return laid ? *laid : Copy(node);
  }

  // Old node `id` in its own layout: its transpose, built once.
  Value Built(int id) {
    if (!built_[id].valid()) built_[id] = BuildTranspose(b(), laid_[id].value, laid_[id].perm);
    return built_[id];
  }

  // Old node `id` as v with x = transpose(v, perm).
  Value InLayout(int id, const Perm& perm) {
    return BuildTranspose(b(), laid_[id].value, layout::Compose(laid_[id].perm, layout::Inverse(perm)));
  }

  // Whether InLayout(id, perm) builds no transpose that stays one: constants fold, a
  // broadcast transposes its smaller input, transposes compose, unit dims reshape.
  bool IsFreeInLayout(int id, const Perm& perm) {
    const Laid& x = laid_[id];
    const Node& node = b().node(x.value);
    if (node.op == OpCode::kConstant || node.op == OpCode::kBroadcast || node.op == OpCode::kTranspose ||
        node.op == OpCode::kIota)
      return true;
    return layout::MovesOnlyUnitDims(node.shape, layout::Compose(x.perm, layout::Inverse(perm)));
  }

  Laid Copy(const Node& node) {
    Value v;
    if (node.op == OpCode::kReshape) {
      v = BuildReshape(b(), Built(node.inputs[0]), node.attrs.shape);
    } else {
      std::vector<Value> inputs;
      for (int input : node.inputs) inputs.push_back(Built(input));
      v = b().AddNode(node.op, std::move(inputs), node.attrs);
    }
    return Laid{v, Identity(node.rank())};
  }

  Laid VisitTranspose(const Node& node) {
    const Laid& x = laid_[node.inputs[0]];
    Perm composed = layout::Compose(x.perm, node.attrs.perm);
    if (x.pending() || StartsLayout(node.attrs.perm) || (options_.heads && StartsHeadsLayout(rewriter_.source(), node)))
      return Laid{x.value, composed};
    return Laid{BuildTranspose(b(), x.value, node.attrs.perm), Identity(node.rank())};
  }

  // Pointwise ops and concat compute in the layout most of their inputs are in, when those
  // outnumber the inputs that would need a transpose of their own.
  Laid VisitElementwise(const Node& node) {
    std::map<Perm, int> votes;
    const Perm* best = nullptr;
    for (int input : node.inputs) {
      if (!laid_[input].pending()) continue;
      const Perm& perm = laid_[input].perm;
      int count = ++votes[perm];
      if (best == nullptr || count > votes[*best]) best = &perm;
    }
    if (best == nullptr) return Copy(node);
    const Perm perm = *best;
    int costly = 0;
    for (int input : node.inputs) costly += laid_[input].perm != perm && !IsFreeInLayout(input, perm);
    if (costly > votes[perm]) return Copy(node);
    std::vector<Value> inputs;
    for (int input : node.inputs) inputs.push_back(InLayout(input, perm));
    Attrs attrs = node.attrs;
    if (node.op == OpCode::kConcat) attrs.axis = perm[node.attrs.axis];
    return Laid{b().AddNode(node.op, std::move(inputs), std::move(attrs)), perm};
  }

  std::optional<Laid> VisitBroadcast(const Node& node) {
    const Laid& x = laid_[node.inputs[0]];
    if (x.perm.size() != node.shape.size()) return std::nullopt;  // a rank-raising broadcast
    return Laid{b().BroadcastTo(x.value, layout::Permuted(node.shape, layout::Inverse(x.perm))), x.perm};
  }

  std::optional<Laid> VisitReduction(const Node& node) {
    const Laid& x = laid_[node.inputs[0]];
    if (node.attrs.axes.empty()) return std::nullopt;
    Attrs attrs = node.attrs;
    for (int64_t& axis : attrs.axes) axis = x.perm[axis];
    std::sort(attrs.axes.begin(), attrs.axes.end());
    Perm perm = node.attrs.keepdims ? x.perm : layout::AfterReduction(x.perm, node.attrs.axes);
    return Laid{b().AddNode(node.op, {x.value}, std::move(attrs)), perm};
  }

  std::optional<Laid> VisitReshape(const Node& node) {
    const Laid& x = laid_[node.inputs[0]];
    std::optional<layout::ReshapedLayout> reshaped = layout::ReshapeInLayout(b().shape(x.value), x.perm, node.attrs.shape);
    if (!reshaped) return std::nullopt;
    return Laid{BuildReshape(b(), x.value, reshaped->stored), reshaped->perm};
  }

  std::optional<Laid> VisitSlice(const Node& node) {
    const Laid& x = laid_[node.inputs[0]];
    Attrs attrs = node.attrs;
    for (size_t i = 0; i < x.perm.size(); ++i) {
      attrs.shape[x.perm[i]] = node.attrs.shape[i];
      attrs.starts[x.perm[i]] = node.attrs.starts[i];
      attrs.steps[x.perm[i]] = node.attrs.steps[i];
    }
    return Laid{b().AddNode(OpCode::kSlice, {x.value}, std::move(attrs)), x.perm};
  }

  // Gather along one axis by a list of indices (a nearest-neighbour resize): along v's.
  std::optional<Laid> VisitGather(const Node& node) {
    const Laid& x = laid_[node.inputs[0]];
    if (rewriter_.source().node(node.inputs[1]).rank() != 1) return std::nullopt;
    Attrs attrs = node.attrs;
    attrs.axis = x.perm[node.attrs.axis];
    return Laid{b().AddNode(OpCode::kGather, {x.value, Built(node.inputs[1])}, std::move(attrs)), x.perm};
  }

  // A tap of a depthwise convolution or a pool (a window of kernel 1) over a value stored
  // NHWC reads v directly: a window over v seen as [N, 1, H, W, C], C a spatial dim of
  // kernel 1. A transpose view between the taps and v would be a node the taps share, of
  // the input's size where the taps have the output's, which a kernel would materialise.
  // The windows of a product (their im2col matrix, transposed channels-last: a strided 1×1
  // convolution's too) keep the form the implicit GEMM matches.
  std::optional<Laid> VisitTap(const Node& node) {
    const Laid& x = laid_[node.inputs[0]];
    const Attrs& a = node.attrs;
    if (!StartsLayout(x.perm) || a.kernel != std::vector<int64_t>{1, 1}) return std::nullopt;
    for (int user : users_[node.id])
      if (rewriter_.source().node(user).op == OpCode::kTranspose) return std::nullopt;
    const Shape v = b().shape(x.value), out = node.shape;  // [N, H, W, C]; [N, C, OH, OW, 1, 1]
    Attrs window = a;
    window.kernel = {1, 1, 1};
    window.strides = {a.strides[0], a.strides[1], 1};
    window.dilations = {a.dilations[0], a.dilations[1], 1};
    window.pads = {a.pads[0], a.pads[1], 0, a.pads[2], a.pads[3], 0};
    Value as_3d = BuildReshape(b(), x.value, {v[0], 1, v[1], v[2], v[3]});
    Value tap = b().AddNode(OpCode::kWindow, {as_3d, Built(node.inputs[1])}, std::move(window));
    return Laid{BuildReshape(b(), tap, {out[0], out[2], out[3], out[1], 1, 1}), Perm{0, 3, 1, 2, 4, 5}};
  }

  SinkTransposesOptions options_;
  GraphRewriter rewriter_;
  std::vector<std::vector<int>> users_;  // in the source graph
  std::vector<Laid> laid_;
  std::vector<Value> built_;  // each old node's transpose, once built
};

}  // namespace

StatusOr<Graph> SinkTransposes(const Graph& graph, const SinkTransposesOptions& options) { return TransposeSinker(graph, options).Run(); }

}  // namespace tilefuse
