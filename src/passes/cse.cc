#include "passes/cse.h"

#include <bit>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <string>
#include <unordered_map>

#include "passes/rewriter.h"

namespace tilefuse {

namespace {

// Constants up to this size are compared by value: scalars and small tables that
// importers and decompositions create over and over.
constexpr size_t kMaxValueKeyBytes = 4096;

std::string ConstantKey(const Tensor& value) {
  std::string key = fmt::format("{}{}", DTypeName(value.dtype()), ShapeToString(value.shape()));
  if (value.num_bytes() > kMaxValueKeyBytes)
    return key + fmt::format("@{}", static_cast<const void*>(value.data()));
  key += "=";
  key.append(reinterpret_cast<const char*>(value.data()), value.num_bytes());
  return key;
}

// Every attribute takes part, whether or not the op reads it: a field an op ignores
// keeps its default in graphs we build, and a spurious difference only costs a merge.
std::string AttrsKey(const Attrs& a) {
  std::string key = fmt::format(
      "shape={} axes={} keep={} axis={} perm={} starts={} steps={} to={} seed={} eps={:x} tanh={} "
      "kernel={} strides={} pads={} dil={} group={} incl={}",
      a.shape, a.axes, a.keepdims, a.axis, a.perm, a.starts, a.steps, DTypeName(a.to), a.seed,
      std::bit_cast<uint64_t>(a.epsilon), a.approximate_tanh, a.kernel, a.strides, a.pads, a.dilations, a.group,
      a.count_include_pad);
  if (a.value) key += " value=" + ConstantKey(*a.value);
  return key;
}

std::string NodeKey(const Node& node, const std::vector<Value>& inputs) {
  std::string key(OpName(node.op));
  key += "(";
  for (Value v : inputs) key += fmt::format("{},", v.id);
  return key + ") " + AttrsKey(node.attrs);
}

}  // namespace

StatusOr<Graph> EliminateCommonSubexpressions(const Graph& graph) {
  GraphRewriter rewriter(graph);
  std::unordered_map<std::string, Value> seen;
  for (const Node& node : graph.nodes()) {
    if (node.op == OpCode::kParameter) {
      rewriter.CopyNode(node);
      continue;
    }
    std::string key = NodeKey(node, rewriter.MapInputs(node));
    auto it = seen.find(key);
    if (it != seen.end()) {
      rewriter.SetMap(node.id, it->second);
      continue;
    }
    seen.emplace(std::move(key), rewriter.CopyNode(node));
  }
  return rewriter.Finish();
}

}  // namespace tilefuse
