#include "backend/cuda/cuda_in_place_outputs.h"

#include <algorithm>
#include <map>

namespace tilefuse {
namespace {

// The position in program order of the step that runs each group's kernels: a group whose
// work another group's kernel does (launched together, grouped over N, a gate or a norm
// computed in a product's tiles) runs at that group's step.
std::map<int, int> StepOfGroup(const CudaProgram& program) {
  std::map<int, int> position, into;
  for (size_t i = 0; i < program.groups.size(); ++i) {
    const CudaGroupProgram& p = program.groups[i];
    position[p.group] = static_cast<int>(i);
    for (int other : {p.launched_with, p.grouped_into, p.gated_into, p.normed_into})
      if (other >= 0) into[p.group] = other;
  }
  std::map<int, int> step;
  for (const auto& [group, at] : position) {
    int root = group;
    for (int hops = 0; into.count(root) && hops < static_cast<int>(position.size()); ++hops) root = into[root];
    step[group] = position.count(root) ? position[root] : at;
  }
  return step;
}

}  // namespace

bool OutputMayOverwriteInput(const Graph& g, const FusionPlan& plan, const CudaProgram& program, int output, int input) {
  if (output < 0 || output >= static_cast<int>(g.outputs().size()) || input < 0 || input >= static_cast<int>(g.inputs().size()))
    return false;
  const int x = g.inputs()[input];
  const int v = g.outputs()[output].node;
  const Node& xn = g.node(x);
  const Node& vn = g.node(v);
  if (v == x || vn.dtype != xn.dtype || vn.shape != xn.shape) return false;
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    if (static_cast<int>(o) != output && g.outputs()[o].node == v) return false;  // written once, at v's step
    if (g.outputs()[o].node == x) return false;  // x returned as it was: copied out after the run, from x's memory
  }
  const int group = plan.group_of[v];  // (group_of has an entry per node)
  if (group < 0) return false;
  if (plan.groups.at(group).kind != GroupKind::kPointwise) return false;
  const std::map<int, int> step = StepOfGroup(program);
  if (!step.count(group)) return false;
  const int v_step = step.at(group);
  // Every member of v's group that depends on x, and every reader of x outside it.
  std::vector<bool> depends(g.num_nodes(), false);
  depends[x] = true;
  for (const Node& n : g.nodes()) {
    if (n.id <= x) continue;
    const bool reads_x = std::find(n.inputs.begin(), n.inputs.end(), x) != n.inputs.end();
    const int reader = plan.group_of[n.id];
    const bool in_group = reader == group;
    if (reads_x && !in_group) {
      if (reader < 0 || !step.count(reader) || step.at(reader) >= v_step) return false;
      continue;
    }
    if (!in_group || std::none_of(n.inputs.begin(), n.inputs.end(), [&](int i) { return depends[i]; })) continue;
    depends[n.id] = true;
    if (n.info().kind != OpKind::Pointwise || n.shape != xn.shape) return false;
  }
  return depends[v];
}

}  // namespace tilefuse
