#include <array>

#include "support/check.h"
#include "tilefuse/graph.h"

namespace tilefuse {

namespace {
constexpr OpInfo kOps[] = {
#define TF_OP(Enum, name, arity, kind, result, expr) \
  {OpCode::k##Enum, name, arity, OpKind::kind, ResultDType::result, #expr},
#include "tilefuse/ops.def"
#undef TF_OP
};
}  // namespace

const OpInfo& GetOpInfo(OpCode op) {
  auto index = static_cast<size_t>(op);
  TF_CHECK(index < std::size(kOps));
  return kOps[index];
}

std::string_view OpName(OpCode op) { return GetOpInfo(op).name; }

int NumOps() { return static_cast<int>(std::size(kOps)); }

const OpInfo* FindOpByName(std::string_view name) {
  for (const OpInfo& info : kOps)
    if (info.name == name) return &info;
  return nullptr;
}

std::string_view OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::Source: return "source";
    case OpKind::Pointwise: return "pointwise";
    case OpKind::Broadcast: return "broadcast";
    case OpKind::View: return "view";
    case OpKind::Reduction: return "reduction";
    case OpKind::Contraction: return "contraction";
    case OpKind::Opaque: return "opaque";
    case OpKind::Composite: return "composite";
  }
  return "?";
}

int Graph::AddNode(Node node) {
  node.id = static_cast<int>(nodes_.size());
  for (int input : node.inputs) TF_CHECK(input >= 0 && input < node.id);
  if (node.op == OpCode::kParameter) inputs_.push_back(node.id);
  nodes_.push_back(std::move(node));
  return nodes_.back().id;
}

std::vector<std::vector<int>> Graph::ComputeUsers() const {
  std::vector<std::vector<int>> users(nodes_.size());
  for (const Node& n : nodes_)
    for (int input : n.inputs) users[input].push_back(n.id);
  return users;
}

}  // namespace tilefuse
