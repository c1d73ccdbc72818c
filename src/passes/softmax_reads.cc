#include "passes/softmax_reads.h"

namespace tilefuse {

bool ReadsSoftmax(const Graph& g, int value) {
  const Node* n = &g.node(value);
  while (n->op == OpCode::kCast || n->op == OpCode::kWhere) n = &g.node(n->inputs.back());  // where(c, 0, p): p last
  if (n->op != OpCode::kDiv || g.node(n->inputs[0]).op != OpCode::kExp) return false;
  const Node* sum = &g.node(n->inputs[1]);
  while (sum->op == OpCode::kBroadcast || sum->op == OpCode::kReshape) sum = &g.node(sum->inputs[0]);
  return sum->op == OpCode::kReduceSum;
}

}  // namespace tilefuse
