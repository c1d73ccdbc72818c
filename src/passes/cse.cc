#include "passes/cse.h"

#include <bit>
#include <string>
#include <unordered_map>

#include "passes/rewriter.h"

namespace tilefuse {

namespace {

// Constants up to this size are compared by value: scalars and small tables that
// importers and decompositions create over and over.
constexpr size_t kMaxValueKeyBytes = 4096;

// Keys are raw bytes, not text: CSE builds one per node, and formatting them would
// make it the slowest pass on large graphs.
class KeyWriter {
 public:
  template <typename T>
  void Add(const T& value) {
    key_.append(reinterpret_cast<const char*>(&value), sizeof(value));
  }
  void Add(const std::vector<int64_t>& values) {
    Add(values.size());
    if (!values.empty()) AddBytes(values.data(), values.size() * sizeof(int64_t));
  }
  void AddBytes(const void* data, size_t size) {
    if (size > 0) key_.append(static_cast<const char*>(data), size);
  }
  std::string Take() { return std::move(key_); }

 private:
  std::string key_;
};

void AddConstant(KeyWriter& key, const Tensor& value) {
  key.Add(value.dtype());
  key.Add(value.shape());
  bool by_value = value.num_bytes() <= kMaxValueKeyBytes;
  key.Add(by_value);
  if (by_value) key.AddBytes(value.data(), value.num_bytes());
  else key.Add(static_cast<const void*>(value.data()));
}

// Every attribute takes part, whether or not the op reads it: a field an op ignores
// keeps its default in graphs we build, and a spurious difference only costs a merge.
void AddAttrs(KeyWriter& key, const Attrs& a) {
  for (const std::vector<int64_t>* v : {&a.shape, &a.axes, &a.perm, &a.starts, &a.steps, &a.kernel, &a.strides,
                                        &a.pads, &a.dilations})
    key.Add(*v);
  key.Add(a.keepdims);
  key.Add(a.axis);
  key.Add(a.to);
  key.Add(a.seed);
  key.Add(std::bit_cast<uint64_t>(a.epsilon));
  key.Add(a.approximate_tanh);
  key.Add(std::bit_cast<uint64_t>(a.scale));
  key.Add(a.causal);
  key.Add(a.saturate);
  key.Add(a.group);
  key.Add(a.count_include_pad);
  key.Add(a.tf32);
  if (a.value) AddConstant(key, *a.value);
}

std::string NodeKey(const Node& node, const std::vector<Value>& inputs) {
  KeyWriter key;
  key.Add(node.op);
  key.Add(inputs.size());
  for (Value v : inputs) key.Add(v.id);
  AddAttrs(key, node.attrs);
  return key.Take();
}

}  // namespace

StatusOr<Graph> EliminateCommonSubexpressions(const Graph& graph) {
  GraphRewriter rewriter(graph);
  std::unordered_map<std::string, Value> seen;
  seen.reserve(graph.num_nodes());
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
