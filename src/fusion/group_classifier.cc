#include "fusion/group_classifier.h"

#include <algorithm>
#include <optional>
#include <fmt/format.h>

namespace tilefuse {

namespace {

int64_t Elements(const Graph& g, int id) { return NumElements(g.node(id).shape); }

std::string Label(const Node& n) { return fmt::format("{} %{}", OpName(n.op), n.id); }

bool IsMember(const std::vector<int>& members, int id) { return std::find(members.begin(), members.end(), id) != members.end(); }

bool IsElementwiseLike(OpKind kind) {
  return kind == OpKind::Pointwise || kind == OpKind::Broadcast || kind == OpKind::View;
}

// Position of `id` in the sorted member list, or -1. Classification runs for every
// candidate merge, so its scratch space is sized by the group, never by the graph.
int PositionOf(const std::vector<int>& members, int id) {
  auto it = std::lower_bound(members.begin(), members.end(), id);
  return it != members.end() && *it == id ? static_cast<int>(it - members.begin()) : -1;
}

// For each member position: does the member `sink` depend on it (the gemm prologue)?
std::vector<bool> AncestorsWithin(const Graph& g, const std::vector<int>& members, int sink) {
  std::vector<bool> ancestor(members.size(), false);
  ancestor[PositionOf(members, sink)] = true;
  for (int pos = static_cast<int>(members.size()) - 1; pos >= 0; --pos) {
    if (!ancestor[pos]) continue;
    for (int input : g.node(members[pos]).inputs)
      if (int p = PositionOf(members, input); p >= 0) ancestor[p] = true;
  }
  ancestor[PositionOf(members, sink)] = false;
  return ancestor;
}

// For each member position: does it depend on the member `source` (within the group)?
std::vector<bool> DescendantsWithin(const Graph& g, const std::vector<int>& members, int source) {
  std::vector<bool> descendant(members.size(), false);
  for (size_t pos = 0; pos < members.size(); ++pos)
    for (int input : g.node(members[pos]).inputs)
      if (int p = PositionOf(members, input); p >= 0 && (input == source || descendant[p])) descendant[pos] = true;
  return descendant;
}

bool IndexArithmeticOfInputs(const Graph& g, const std::vector<int>& members, int id, std::vector<std::vector<int>>& users);
bool ConvertedWhereRead(const Graph& g, const std::vector<int>& members, int id, std::vector<std::vector<int>>& users);

// Does a member with fewer elements than the group's domain need no iteration space of its
// own (it is evaluated inside its readers' loads)?
bool EvaluatedWhereRead(const Graph& g, const std::vector<int>& members, int id, std::vector<std::vector<int>>& users) {
  return IndexArithmeticOfInputs(g, members, id, users) || ConvertedWhereRead(g, members, id, users);
}

GroupClassification Forbid(std::string reason) { return {GroupKind::kPointwise, FusionDecision::Forbid(std::move(reason))}; }

bool ComputedWhereConcatReadsIt(const Graph& g, const std::vector<int>& members, int64_t domain, int id,
                                std::vector<std::vector<int>>& users);

GroupClassification ClassifyGemm(const Graph& g, const std::vector<int>& members, int matmul) {
  std::vector<bool> prologue = AncestorsWithin(g, members, matmul);
  std::vector<bool> after = DescendantsWithin(g, members, matmul);
  int64_t out_elements = Elements(g, matmul);
  std::vector<std::vector<int>> users;  // computed only when a member's space differs
  for (size_t pos = 0; pos < members.size(); ++pos) {
    int id = members[pos];
    if (id == matmul) continue;
    const Node& n = g.node(id);
    if (!IsElementwiseLike(n.info().kind))
      return Forbid(fmt::format("a gemm group takes only pointwise, broadcast and view ops besides its matmul, not {}", Label(n)));
    if (prologue[pos]) {
      if (n.op != OpCode::kCast && n.info().kind != OpKind::View)
        return Forbid(fmt::format("gemm prologue is limited to casts and views; {} is neither", Label(n)));
    } else if (Elements(g, id) != out_elements && (after[pos] || n.info().kind == OpKind::Pointwise) &&
               !ComputedWhereConcatReadsIt(g, members, out_elements, id, users)) {
      // Views and broadcasts of the group's inputs (a bias viewed as [C, 1, 1]) are index
      // arithmetic in the epilogue's loads, whatever their size; a rotary embedding's halves
      // are computed where its concat reads them (the product's partner columns,
      // codegen/gemm_partner_columns.h).
      return Forbid(fmt::format("gemm epilogue {} has {} elements, the matmul output {}", Label(n), Elements(g, id), out_elements));
    }
  }
  return {GroupKind::kGemm, FusionDecision::Allow()};
}

// The first member after a reduction (reading one's result, directly or through other
// members) that is a view moving elements (a transpose, a slice, a concat, a gather; a
// reshape keeps every element's offset), or nullopt. Reduction kernels evaluate what follows
// a reduction where its result is, which such a view would read elsewhere.
std::optional<int> ViewMovingReducedValues(const Graph& g, const std::vector<int>& members) {
  std::vector<bool> after_reduction(members.size(), false);  // by member position
  for (size_t pos = 0; pos < members.size(); ++pos) {
    const Node& n = g.node(members[pos]);
    after_reduction[pos] = std::any_of(n.inputs.begin(), n.inputs.end(), [&](int i) {
      int p = PositionOf(members, i);
      return p >= 0 && (after_reduction[p] || g.node(i).info().kind == OpKind::Reduction);
    });
    if (after_reduction[pos] && n.info().kind == OpKind::View && n.op != OpCode::kReshape) return n.id;
  }
  return std::nullopt;
}

GroupClassification ClassifyReductions(const Graph& g, const std::vector<int>& members,
                                       const std::vector<int>& reductions) {
  // Row reduction: every reduction reduces trailing dims with one (rows, row length).
  int64_t rows = -1, row_length = -1;
  bool row_form = true;
  for (int r : reductions) {
    int64_t rr, rl;
    if (!TrailingReductionSpace(g, g.node(r), &rr, &rl) || (rows >= 0 && (rr != rows || rl != row_length))) {
      row_form = false;
      break;
    }
    rows = rr;
    row_length = rl;
  }
  if (row_form) {
    // The kernel computes one row at a time, so a member after a reduction is evaluated
    // where the row's statistics are: a view that moves elements would need another row's.
    if (std::optional<int> view = ViewMovingReducedValues(g, members))
      return Forbid(fmt::format("{} reorders the row reduction's results; the kernel computes one row at a time",
                                Label(g.node(*view))));
    std::vector<std::vector<int>> users;  // computed only when a member's space differs
    for (int id : members) {
      int64_t e = Elements(g, id);
      if (e != rows * row_length && e != rows && !EvaluatedWhereRead(g, members, id, users))
        return Forbid(fmt::format("{} has {} elements; the row reduction works on {} rows of {}", Label(g.node(id)), e,
                                  rows, row_length));
    }
    return {GroupKind::kRowReduction, FusionDecision::Allow()};
  }
  // General reduction: one input space, one output space, prologue then epilogue. The kernel
  // computes each result at its own output position, so a member after a reduction is
  // evaluated there: a view that moves elements (the transpose after a GQA backward's sum over
  // the repeated heads) would read another position's result.
  if (std::optional<int> view = ViewMovingReducedValues(g, members))
    return Forbid(fmt::format("{} reorders the reduction's results; the kernel computes each at its own output position",
                              Label(g.node(*view))));
  const Node& first = g.node(reductions[0]);
  int64_t in_elements = Elements(g, first.inputs[0]), out_elements = NumElements(first.shape);
  for (int r : reductions) {
    const Node& n = g.node(r);
    if (Elements(g, n.inputs[0]) != in_elements || n.attrs.axes != first.attrs.axes)
      return Forbid(fmt::format("reductions over different iteration spaces: {} and {}", Label(first), Label(n)));
  }
  std::vector<bool> after_reduction(members.size(), false);  // by member position
  for (size_t pos = 0; pos < members.size(); ++pos) {
    int id = members[pos];
    const Node& n = g.node(id);
    bool after = std::any_of(n.inputs.begin(), n.inputs.end(), [&](int i) {
      int p = PositionOf(members, i);
      return p >= 0 && after_reduction[p];
    });
    if (n.info().kind == OpKind::Reduction) {
      if (after) return Forbid(fmt::format("{} reduces the result of another reduction", Label(n)));
      after_reduction[pos] = true;
      continue;
    }
    after_reduction[pos] = after;
    int64_t expected = after ? out_elements : in_elements;
    if (Elements(g, id) != expected)
      return Forbid(fmt::format("{} has {} elements; this reduction's {} is {}", Label(n), Elements(g, id),
                                after ? "output" : "input", expected));
  }
  return {GroupKind::kReduction, FusionDecision::Allow()};
}

// A member with fewer elements than the group's domain needs no iteration space of its own
// when only concats in the group read it, directly or through other such members: the
// kernel evaluates it where the concat reads it (rotary embedding's two halves, computed and
// concatenated in one pass). It must not leave the group (nothing would store it) and must
// not reach a domain-sized member other than a concat (a broadcast would recompute it per
// element of the domain).
bool ComputedWhereConcatReadsIt(const Graph& g, const std::vector<int>& members, int64_t domain, int id,
                                std::vector<std::vector<int>>& users) {
  if (users.empty()) users = g.ComputeUsers();
  for (const Graph::Output& o : g.outputs())
    if (o.node == id) return false;
  if (users[id].empty()) return false;
  for (int u : users[id]) {
    if (!IsMember(members, u)) return false;
    if (g.node(u).op == OpCode::kConcat) continue;
    if (Elements(g, u) == domain || !ComputedWhereConcatReadsIt(g, members, domain, u, users)) return false;
  }
  return true;
}

// A view or broadcast of the group's inputs (directly or through other such members) needs
// no iteration space of its own when only members read it: the kernel evaluates it as index
// arithmetic inside its readers' loads, recomputing nothing (a pool's taps reading windows
// of one shared reshape or transpose of the input, a bias viewed as [C, 1, 1] before its
// broadcast). It must not leave the group: nothing would store it.
bool IndexArithmeticOfInputs(const Graph& g, const std::vector<int>& members, int id, std::vector<std::vector<int>>& users) {
  const Node& n = g.node(id);
  if (n.info().kind != OpKind::View && n.info().kind != OpKind::Broadcast) return false;
  if (users.empty()) users = g.ComputeUsers();
  for (const Graph::Output& o : g.outputs())
    if (o.node == id) return false;
  if (users[id].empty()) return false;
  for (int u : users[id])
    if (PositionOf(members, u) < 0) return false;
  for (int input : n.inputs)
    if (PositionOf(members, input) >= 0 && !EvaluatedWhereRead(g, members, input, users)) return false;
  return true;
}

// A cast of the group's inputs (directly or through views, broadcasts and other such casts)
// that members read only through broadcasts and views needs no iteration space either: the
// kernel converts each element where a reader loads it (a layer norm's bf16 scale and bias,
// cast to f32 and read once per column), one conversion per read instead of a kernel of its
// own. It must not leave the group: nothing would store it.
bool ConvertedWhereRead(const Graph& g, const std::vector<int>& members, int id, std::vector<std::vector<int>>& users) {
  const Node& n = g.node(id);
  if (n.op != OpCode::kCast) return false;
  if (users.empty()) users = g.ComputeUsers();
  for (const Graph::Output& o : g.outputs())
    if (o.node == id) return false;
  if (users[id].empty()) return false;
  for (int u : users[id]) {
    const OpKind kind = g.node(u).info().kind;
    if (PositionOf(members, u) < 0 || (kind != OpKind::View && kind != OpKind::Broadcast)) return false;
  }
  for (int input : n.inputs)
    if (PositionOf(members, input) >= 0 && !EvaluatedWhereRead(g, members, input, users)) return false;
  return true;
}

}  // namespace

std::vector<bool> FindInlinedGenerators(const Graph& g) {
  // A graph output is stored by its own group, so it is no generator, and neither is what
  // reads it: a reader would load it from the output's buffer, which no group order would
  // then put before the load (a training backward's zeros gradient, also sliced into a
  // rotary's slice_scatter, was read before it was written).
  std::vector<bool> output(g.num_nodes(), false);
  for (const Graph::Output& o : g.outputs()) output[o.node] = true;
  std::vector<bool> generator(g.num_nodes(), false);
  for (const Node& n : g.nodes()) {
    OpKind kind = n.info().kind;
    if (output[n.id]) continue;
    if (n.op == OpCode::kIota) generator[n.id] = true;
    else if (kind == OpKind::Pointwise || kind == OpKind::Broadcast || kind == OpKind::View)
      generator[n.id] = !n.inputs.empty() && std::all_of(n.inputs.begin(), n.inputs.end(), [&](int i) {
        return generator[i] || g.node(i).op == OpCode::kConstant;
      });
  }
  return generator;
}

bool TrailingReductionSpace(const Graph& g, const Node& reduction, int64_t* rows, int64_t* row_length) {
  const Shape& in = g.node(reduction.inputs[0]).shape;
  const auto& axes = reduction.attrs.axes;
  int rank = static_cast<int>(in.size());
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != rank - static_cast<int64_t>(axes.size()) + static_cast<int64_t>(i)) return false;
  *rows = 1;
  *row_length = 1;
  for (int d = 0; d < rank; ++d) (d < rank - static_cast<int>(axes.size()) ? *rows : *row_length) *= in[d];
  return true;
}

bool IsConvAnchor(const Node& n) { return n.op == OpCode::kConv && n.dtype == DType::kF32; }

// The members that read `id`.
std::vector<int> UsersIn(const Graph& g, const std::vector<int>& members, int id) {
  std::vector<int> readers;
  for (int m : members) {
    const std::vector<int>& in = g.node(m).inputs;
    if (std::find(in.begin(), in.end(), id) != in.end()) readers.push_back(m);
  }
  return readers;
}

// A window combined tap by tap (a depthwise convolution or a pool: one window per tap) reads
// its input at each tap's offset: where that input is computed in the group, every tap
// recomputes it (ConvNeXt's depthwise 7x7 over the residual sum a GEMM's epilogue computes:
// 49 times the sum's loads per element). Such windows read values other kernels wrote.
std::optional<std::string> TapsRecompute(const Graph& g, const std::vector<int>& members) {
  std::vector<int> windows;
  for (int id : members)
    if (g.node(id).op == OpCode::kWindow) windows.push_back(id);
  if (windows.size() < 2) return std::nullopt;
  for (int w : windows) {
    int input = g.node(w).inputs[0];
    while (IsMember(members, input) && g.node(input).info().kind == OpKind::View) input = g.node(input).inputs[0];
    if (IsMember(members, input))
      return fmt::format("{} is one of {} taps over {}, which the group computes: each tap would recompute it", Label(g.node(w)),
                         windows.size(), Label(g.node(input)));
  }
  return std::nullopt;
}

GroupClassification ClassifyGroup(const Graph& g, const std::vector<int>& members, bool conv_anchors) {
  if (static_cast<int>(members.size()) > kMaxGroupNodes)
    return Forbid(fmt::format("template limit: more than {} ops in one kernel", kMaxGroupNodes));
  if (std::optional<std::string> why = TapsRecompute(g, members)) return Forbid(std::move(*why));
  std::vector<int> matmuls, reductions;
  for (int id : members) {
    const Node& n = g.node(id);
    switch (n.info().kind) {
      case OpKind::Opaque:
        if (conv_anchors && IsConvAnchor(n)) {
          matmuls.push_back(id);
          break;
        }
        if (members.size() > 1) return Forbid(fmt::format("{} is opaque: it runs as its own kernel", Label(n)));
        return {GroupKind::kOpaque, FusionDecision::Allow()};
      case OpKind::Composite:
        return Forbid(fmt::format("{} is a composite op; decompose it before planning", Label(n)));
      case OpKind::Contraction: matmuls.push_back(id); break;
      case OpKind::Reduction: reductions.push_back(id); break;
      default: break;
    }
  }
  if (matmuls.size() > 1)
    return Forbid(conv_anchors ? "two matmuls or convolutions fuse only as attention (matmul, scale/mask, softmax, matmul)"
                               : "two matmuls fuse only as attention (matmul, scale/mask, softmax, matmul)");
  if (matmuls.size() == 1) {
    if (!reductions.empty())
      return Forbid(fmt::format("a gemm group cannot hold a reduction ({})", Label(g.node(reductions[0]))));
    return ClassifyGemm(g, members, matmuls[0]);
  }
  if (!reductions.empty()) {
    // A depthwise convolution or a pool combined tap by tap costs tens of loads and multiplies
    // per element: inside a reduction's kernel it is recomputed on every pass over a row, by as
    // few threads as the reduction has rows (ConvNeXt's depthwise 7x7 before its layer norm:
    // 29 ms against 0.04 ms apart, H100, 2026-11-24). A window stays in a reduction only as a
    // pool reduced over its own taps (window → casts and views → the reduction).
    for (int id : members) {
      if (g.node(id).op != OpCode::kWindow) continue;
      int at = id;
      while (true) {
        const std::vector<int> readers = UsersIn(g, members, at);
        if (readers.size() != 1) break;
        const Node& r = g.node(readers[0]);
        if (r.op != OpCode::kCast && r.info().kind != OpKind::View) {
          at = r.info().kind == OpKind::Reduction ? -1 : at;
          break;
        }
        at = r.id;
      }
      if (at >= 0)
        return Forbid(fmt::format("a reduction does not take the taps of a windowed combination ({}): each pass over a row "
                                  "would recompute them",
                                  Label(g.node(id))));
    }
    // Nor the combination without its taps: each tap left outside is a kernel copying the
    // whole input, which every pass over a row then reads (ConvNeXt-tiny at batch 1: a stage's
    // first depthwise 7x7 as 48 copies of its input and a layer norm summing them, 18 kB of
    // spills a thread, where the depthwise kernel and the norm apart take a few µs each).
    for (int id : members)
      for (int input : g.node(id).inputs) {
        if (IsMember(members, input)) continue;
        while (g.node(input).op != OpCode::kWindow && g.node(input).info().kind == OpKind::View) input = g.node(input).inputs[0];
        if (g.node(input).op == OpCode::kWindow)
          return Forbid(fmt::format("a reduction does not take a windowed combination whose taps ({}) are computed apart: "
                                    "each tap would be a copy of its input",
                                    Label(g.node(input))));
      }
    return ClassifyReductions(g, members, reductions);
  }
  int64_t domain = Elements(g, members.back());
  std::vector<std::vector<int>> users;  // computed only when a member's space differs
  for (int id : members)
    if (Elements(g, id) != domain && !ComputedWhereConcatReadsIt(g, members, domain, id, users) &&
        !EvaluatedWhereRead(g, members, id, users))
      return Forbid(fmt::format("iteration spaces differ: {} has {} elements, {} has {}", Label(g.node(id)),
                                Elements(g, id), Label(g.node(members.back())), domain));
  return {GroupKind::kPointwise, FusionDecision::Allow()};
}

}  // namespace tilefuse
