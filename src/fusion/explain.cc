#include "fusion/explain.h"

#include <fmt/format.h>

#include "fusion/group_classifier.h"

namespace tilefuse {

namespace {

double TensorBytes(const Node& n) { return static_cast<double>(NumElements(n.shape)) * DTypeSize(n.dtype); }

struct GroupBytes {
  double in = 0, out = 0;
};

// Bytes read and written, as the cost model counts them: inputs that are generators
// (broadcast constants, iotas) are recomputed inside the kernel, never read.
GroupBytes CountBytes(const Graph& g, const FusionGroup& group, const std::vector<bool>& inlined) {
  GroupBytes b;
  for (int id : group.inputs)
    if (!inlined[id]) b.in += TensorBytes(g.node(id));
  for (int id : group.outputs) b.out += TensorBytes(g.node(id));
  return b;
}

std::string HumanBytes(double bytes) {
  if (bytes >= 1e9) return fmt::format("{:.2f} GB", bytes / 1e9);
  if (bytes >= 1e6) return fmt::format("{:.2f} MB", bytes / 1e6);
  if (bytes >= 1e3) return fmt::format("{:.1f} kB", bytes / 1e3);
  return fmt::format("{:.0f} B", bytes);
}

std::string NodeLabel(const Node& n) {
  return n.name.empty() ? fmt::format("{} %{}", OpName(n.op), n.id) : fmt::format("{} %{} '{}'", OpName(n.op), n.id, n.name);
}

// Node and tensor names are user data: keep quotes and backslashes from breaking DOT.
std::string DotEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

double Speedup(const FusionPlan& plan) { return plan.predicted_us > 0 ? plan.unfused_predicted_us / plan.predicted_us : 1; }

}  // namespace

std::string ExplainText(const Graph& g, const FusionPlan& plan) {
  std::string out = fmt::format(
      "device {}: {} kernels unfused -> {} fused; predicted {:.2f} us fused vs {:.2f} us unfused ({:.2f}x)\n",
      plan.device, plan.unfused_kernels, plan.groups.size(), plan.predicted_us, plan.unfused_predicted_us, Speedup(plan));
  const std::vector<bool> inlined = FindInlinedGenerators(g);
  for (const std::string& m : plan.missed_attention) out += "attention not matched at " + m + "\n";
  for (const FusionGroup& group : plan.groups) {
    GroupBytes bytes = CountBytes(g, group, inlined);
    out += fmt::format("group {} {}: {} ops, in {}, out {}, {:.3g} flop, predicted {:.2f} us (unfused {:.2f} us)\n",
                       group.id, GroupKindName(group.kind), group.nodes.size(), HumanBytes(bytes.in),
                       HumanBytes(bytes.out), group.flops, group.predicted_us, group.unfused_predicted_us);
    std::string members;
    for (int id : group.nodes) members += (members.empty() ? "" : ", ") + NodeLabel(g.node(id));
    out += "    " + members + "\n";
    if (!group.cost_note.empty()) out += "    cost: " + group.cost_note + "\n";
    for (const RejectedMerge& r : plan.rejected)
      if (r.producer_group == group.id)
        out += fmt::format("    not merged with group {}: {}\n", r.consumer_group, r.reason);
  }
  return out;
}

nlohmann::json ExplainJson(const Graph& g, const FusionPlan& plan) {
  nlohmann::json groups = nlohmann::json::array();
  const std::vector<bool> inlined = FindInlinedGenerators(g);
  for (const FusionGroup& group : plan.groups) {
    nlohmann::json nodes = nlohmann::json::array();
    for (int id : group.nodes) {
      const Node& n = g.node(id);
      nodes.push_back({{"id", id}, {"op", std::string(OpName(n.op))}, {"name", n.name}});
    }
    GroupBytes bytes = CountBytes(g, group, inlined);
    groups.push_back({{"id", group.id}, {"kind", std::string(GroupKindName(group.kind))}, {"nodes", nodes},
                      {"inputs", group.inputs}, {"outputs", group.outputs}, {"bytes_in", bytes.in},
                      {"bytes_out", bytes.out}, {"flops", group.flops}, {"predicted_us", group.predicted_us},
                      {"unfused_predicted_us", group.unfused_predicted_us}});
    if (!group.cost_note.empty()) groups.back()["cost_note"] = group.cost_note;
  }
  nlohmann::json rejected = nlohmann::json::array();
  for (const RejectedMerge& r : plan.rejected)
    rejected.push_back({{"producer", r.producer_group}, {"consumer", r.consumer_group}, {"reason", r.reason}});
  return {{"device", plan.device},
          {"unfused_kernels", plan.unfused_kernels},
          {"fused_kernels", plan.groups.size()},
          {"predicted_us", plan.predicted_us},
          {"unfused_predicted_us", plan.unfused_predicted_us},
          {"predicted_speedup", Speedup(plan)},
          {"groups", groups},
          {"rejected", rejected},
          {"missed_attention", plan.missed_attention}};
}

std::string ExplainDot(const Graph& g, const FusionPlan& plan) {
  auto colour = [](GroupKind kind) {
    switch (kind) {
      case GroupKind::kPointwise: return "#cfe8fc";
      case GroupKind::kRowReduction: return "#d5f5d0";
      case GroupKind::kReduction: return "#fbeac4";
      case GroupKind::kGemm: return "#f9d0d0";
      case GroupKind::kAttention: return "#e6d5f7";
      case GroupKind::kOpaque: return "#dddddd";
    }
    return "#ffffff";
  };
  std::string out = "digraph tilefuse {\n  rankdir=TB;\n  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n";
  for (const FusionGroup& group : plan.groups) {
    out += fmt::format("  subgraph cluster_{} {{\n    style=filled; color=\"{}\"; label=\"group {}: {} ({:.2f} us)\";\n",
                       group.id, colour(group.kind), group.id, GroupKindName(group.kind), group.predicted_us);
    for (int id : group.nodes) {
      const Node& n = g.node(id);
      out += fmt::format("    n{} [label=\"{}\\n{}\\n{}{}\", style=filled, fillcolor=white];\n", id, OpName(n.op),
                         DotEscape(n.name), DTypeName(n.dtype), ShapeToString(n.shape));
    }
    out += "  }\n";
  }
  for (const Node& n : g.nodes()) {
    if (n.info().kind == OpKind::Source)
      out += fmt::format("  n{} [shape=ellipse, label=\"{}\\n{}{}\"];\n", n.id,
                         n.op == OpCode::kParameter ? DotEscape(n.name) : "constant", DTypeName(n.dtype), ShapeToString(n.shape));
    for (int input : n.inputs) out += fmt::format("  n{} -> n{};\n", input, n.id);
  }
  for (const Graph::Output& o : g.outputs())
    out += fmt::format("  out_{0} [shape=ellipse, label=\"{1}\"];\n  n{2} -> out_{0};\n", &o - &g.outputs()[0], DotEscape(o.name), o.node);
  return out + "}\n";
}

}  // namespace tilefuse
