#include "codegen/depthwise_template.h"

#include <algorithm>
#include <fmt/format.h>
#include <optional>

#include "codegen/lower.h"

namespace tilefuse {

namespace {

// One term of the sum as read from the graph: tap (dh, dw) of the window over `source`.
struct TapTerm {
  int source = -1;  // the materialised value the window reads, NHWC in memory
  Shape window_in;  // the window's input shape: [N, 1, H, W, C]
  Shape sum_shape;  // the term's shape: [N, OH, OW, C]
  int64_t dh = 0, dw = 0, stride_h = 1, stride_w = 1;
  int weight = -1;  // the [C] value the term's weights broadcast
};

class Matcher {
 public:
  Matcher(const Graph& g, const FusionGroup& group, const std::vector<bool>& inlined)
      : g_(g), inlined_(inlined), member_(g.num_nodes(), false), users_(g.ComputeUsers()) {
    for (int id : group.nodes) member_[id] = true;
  }

  // The terms of the add tree rooted at `root`, in order, through adds the tree alone reads.
  void Terms(int root, std::vector<int>& terms, bool is_root = true) const {
    const Node& n = g_.node(root);
    if (n.op == OpCode::kAdd && member_[root] && (is_root || users_[root].size() == 1)) {
      for (int input : n.inputs) Terms(input, terms, false);
      return;
    }
    terms.push_back(root);
  }

  std::optional<TapTerm> Term(int id) const {
    const Node& mul = g_.node(id);
    if (mul.op != OpCode::kMul || !member_[id] || mul.dtype != DType::kF32) return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      std::optional<TapTerm> t = Tap(mul.inputs[side]);
      if (!t) continue;
      t->weight = Weight(mul.inputs[1 - side], t->sum_shape.back());
      if (t->weight >= 0 && t->sum_shape == mul.shape) return t;
    }
    return std::nullopt;
  }

 private:
  // [cast to f32](reshape(window(x))), the window of kernel 1 over (H, W, C) with zero fill.
  std::optional<TapTerm> Tap(int id) const {
    const Node* n = &g_.node(id);
    if (n->op == OpCode::kCast && member_[n->id]) n = &g_.node(n->inputs[0]);
    if (n->dtype != DType::kF32 && n->dtype != DType::kBF16 && n->dtype != DType::kF16) return std::nullopt;
    if (n->op != OpCode::kReshape || !member_[n->id]) return std::nullopt;
    const Node& window = g_.node(n->inputs[0]);
    const Attrs& a = window.attrs;
    if (window.op != OpCode::kWindow || !member_[window.id] || window.shape.size() != 8 || a.kernel.size() != 3) return std::nullopt;
    if (a.kernel != std::vector<int64_t>{1, 1, 1} || a.strides[2] != 1 || a.pads[2] != 0 || a.pads[5] != 0) return std::nullopt;
    const Node& fill = g_.node(window.inputs[1]);
    if (fill.op != OpCode::kConstant || fill.attrs.value->num_elements() != 1 || fill.attrs.value->GetDouble(0) != 0) return std::nullopt;
    TapTerm t;
    t.window_in = g_.node(window.inputs[0]).shape;  // [N, 1, H, W, C]
    if (t.window_in.size() != 5 || t.window_in[1] != 1) return std::nullopt;
    t.sum_shape = {window.shape[0], window.shape[2], window.shape[3], window.shape[4]};
    if (n->shape != t.sum_shape || window.shape[4] != t.window_in[4]) return std::nullopt;
    t.dh = -a.pads[0];
    t.dw = -a.pads[1];
    t.stride_h = a.strides[0];
    t.stride_w = a.strides[1];
    // Reshapes keep the row-major order: the first value in memory up the chain is the source.
    int x = window.inputs[0];
    while (member_[x] && g_.node(x).op == OpCode::kReshape) x = g_.node(x).inputs[0];
    if (member_[x] || inlined_[x] || g_.node(x).dtype != window.dtype) return std::nullopt;
    if (n != &g_.node(id) && window.dtype == DType::kF32) return std::nullopt;
    t.source = x;
    return t;
  }

  // broadcast(w) of the tap's weights along the channels, w a loaded value of C elements.
  int Weight(int id, int64_t channels) const {
    const Node& b = g_.node(id);
    if (b.op != OpCode::kBroadcast) return -1;
    int w = b.inputs[0];
    while (member_[w] && g_.node(w).op == OpCode::kReshape) w = g_.node(w).inputs[0];
    const Node& weights = g_.node(w);
    if (member_[w] || inlined_[w] || NumElements(weights.shape) != channels || weights.shape.empty()) return -1;
    // Broadcasting aligns trailing dims: the weights must vary along the last one only.
    const Shape& from = g_.node(b.inputs[0]).shape;
    if (from.empty() || from.back() != channels) return -1;
    if (weights.op == OpCode::kConstant && weights.attrs.value->num_elements() == 1) return -1;  // lowered as a literal
    return w;
  }

  const Graph& g_;
  const std::vector<bool>& inlined_;
  std::vector<bool> member_;
  std::vector<std::vector<int>> users_;
};

}  // namespace

StatusOr<DepthwiseTemplateKernel> LowerDepthwiseTemplate(const Graph& g, const FusionGroup& group, const std::vector<bool>& inlined) {
  if (group.kind != GroupKind::kPointwise) return Unimplemented("not a pointwise group");
  Matcher matcher(g, group, inlined);
  // The sum: the last add whose tree's terms are all taps of one window (members ascend in
  // a topological order, so the tree's root comes after its inner adds).
  int sum = -1;
  std::vector<TapTerm> taps;
  for (auto it = group.nodes.rbegin(); it != group.nodes.rend() && sum < 0; ++it) {
    if (g.node(*it).op != OpCode::kAdd) continue;
    std::vector<int> terms;
    matcher.Terms(*it, terms);
    if (terms.size() < 2) continue;
    std::vector<TapTerm> found;
    for (int t : terms) {
      std::optional<TapTerm> tap = matcher.Term(t);
      if (!tap || (!found.empty() && (tap->source != found[0].source || tap->window_in != found[0].window_in ||
                                      tap->sum_shape != found[0].sum_shape || tap->stride_h != found[0].stride_h ||
                                      tap->stride_w != found[0].stride_w)))
        break;
      found.push_back(*tap);
    }
    if (found.size() != terms.size()) continue;
    sum = *it;
    taps = std::move(found);
  }
  if (sum < 0) return Unimplemented("no sum of depthwise window taps over an NHWC value");

  // The sum's own ancestors in the group that only it reads: the taps, the products, the
  // inner adds. Everything else is the epilogue.
  const std::vector<std::vector<int>> users = g.ComputeUsers();
  std::vector<bool> member(g.num_nodes(), false), conv(g.num_nodes(), false), ancestor(g.num_nodes(), false);
  for (int id : group.nodes) member[id] = true;
  conv[sum] = ancestor[sum] = true;
  for (auto it = group.nodes.rbegin(); it != group.nodes.rend(); ++it) {
    if (!ancestor[*it]) continue;
    if (*it != sum) conv[*it] = std::all_of(users[*it].begin(), users[*it].end(), [&](int u) { return conv[u]; });
    for (int input : g.node(*it).inputs) ancestor[input] = true;
  }
  for (int out : group.outputs)
    if (conv[out] && out != sum) return Unimplemented(fmt::format("%{} inside the convolution is a group output", out));

  FusionGroup epilogue;
  epilogue.id = group.id;
  epilogue.kind = GroupKind::kPointwise;
  for (int id : group.nodes)
    if (!conv[id]) epilogue.nodes.push_back(id);
  for (int out : group.outputs)
    if (!conv[out]) epilogue.outputs.push_back(out);
  for (int id : epilogue.nodes)
    for (int input : g.node(id).inputs)
      if (!member[input] || conv[input]) epilogue.inputs.push_back(input);
  std::sort(epilogue.inputs.begin(), epilogue.inputs.end());
  epilogue.inputs.erase(std::unique(epilogue.inputs.begin(), epilogue.inputs.end()), epilogue.inputs.end());

  const Node& sum_node = g.node(sum);
  const int64_t elements = NumElements(sum_node.shape);
  DepthwiseTemplateKernel t;
  Kernel k;
  if (!epilogue.nodes.empty()) {
    ASSIGN_OR_RETURN(k, LowerGroup(g, epilogue, inlined));
    if (k.outer != elements || k.inner != 1 || !k.reductions.empty())
      return Unimplemented("the epilogue does not iterate over the convolution's outputs");
  } else {
    k.kind = GroupKind::kPointwise;
    k.outer = elements;
  }
  if (std::find(group.outputs.begin(), group.outputs.end(), sum) != group.outputs.end()) StoreAnchorItself(k, g, sum);
  for (size_t v = 0; v < k.values.size(); ++v) {
    const ScalarValue& value = k.values[v];
    if (value.kind != ScalarValue::Kind::kLoad || k.buffers[value.buffer].node != sum) continue;
    AffineIndex affine;
    if (UsesValue(value.index) || !AsAffine(value.index, &affine) || affine.c0 != 1 || affine.c1 != 0 || affine.offset != 0)
      return Unimplemented("the epilogue reads the convolution's sum through a view");
    t.sum_loads.push_back(static_cast<int>(v));
  }

  const TapTerm& first = taps[0];
  t.sum = sum;
  t.dtype = g.node(first.source).dtype;
  t.images = first.window_in[0];
  t.height = first.window_in[2];
  t.width = first.window_in[3];
  t.channels = first.window_in[4];
  t.out_height = first.sum_shape[1];
  t.out_width = first.sum_shape[2];
  t.stride_h = first.stride_h;
  t.stride_w = first.stride_w;
  t.source_buffer = KernelBufferFor(k, g, first.source);
  if (k.buffers[t.source_buffer].is_output) return Unimplemented("the group writes the convolution's input");
  for (const TapTerm& tap : taps) t.taps.push_back({tap.dh, tap.dw, KernelBufferFor(k, g, tap.weight)});
  k.nodes = group.nodes;
  t.epilogue = std::move(k);
  return t;
}

}  // namespace tilefuse
