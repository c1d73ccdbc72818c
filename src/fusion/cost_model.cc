#include "fusion/cost_model.h"

#include <algorithm>
#include <iterator>
#include <fmt/format.h>

#include "fusion/group_classifier.h"

namespace tilefuse {

CostModel::CostModel(const Graph& graph, const DeviceSpec& spec, const TargetCapabilities* target)
    : graph_(graph), spec_(spec), target_(target), users_(graph.ComputeUsers()), is_output_(graph.num_nodes(), false),
      inlined_(FindInlinedGenerators(graph)) {
  for (const Graph::Output& o : graph.outputs()) is_output_[o.node] = true;
}

double CostModel::NodeBytes(int id) const {
  const Node& n = graph_.node(id);
  return static_cast<double>(NumElements(n.shape)) * DTypeSize(n.dtype);
}

double CostModel::NodeFlops(const Node& n) const {
  switch (n.info().kind) {
    case OpKind::Source: case OpKind::View: case OpKind::Broadcast: return 0;
    case OpKind::Contraction: {
      const Node& a = graph_.node(n.inputs[0]);
      return 2.0 * static_cast<double>(NumElements(n.shape)) * static_cast<double>(a.shape.back());
    }
    case OpKind::Reduction: return static_cast<double>(NumElements(graph_.node(n.inputs[0]).shape));
    case OpKind::Opaque: {
      if (n.op != OpCode::kConv) return static_cast<double>(NumElements(n.shape));
      const Node& w = graph_.node(n.inputs[1]);  // per output element: C/group · kernel MACs
      return 2.0 * static_cast<double>(NumElements(n.shape)) * static_cast<double>(NumElements(w.shape) / w.shape[0]);
    }
    default: return static_cast<double>(NumElements(n.shape));
  }
}

std::vector<int> CostModel::EpilogueOf(const std::vector<int>& members, int matmul) const {
  std::vector<bool> after(graph_.num_nodes(), false);
  after[matmul] = true;
  std::vector<int> epilogue;
  for (int id : members) {  // ascending ids are a topological order
    if (id == matmul) continue;
    const Node& n = graph_.node(id);
    if (std::any_of(n.inputs.begin(), n.inputs.end(), [&](int input) { return after[input]; })) {
      after[id] = true;
      epilogue.push_back(id);
    }
  }
  return epilogue;
}

GroupCost CostModel::PredictGroupTime(const std::vector<int>& members) const {
  if (target_) {
    auto matmul = std::find_if(members.begin(), members.end(),
                               [&](int id) { return graph_.node(id).info().kind == OpKind::Contraction; });
    if (matmul != members.end()) {
      std::vector<int> epilogue = EpilogueOf(members, *matmul);
      FusionDecision fused = epilogue.empty() ? FusionDecision::Allow() : target_->FusesGemmEpilogue(graph_, members, *matmul);
      if (!fused) {
        // Two kernels: the product (and any prologue) writing the product, the epilogue
        // reading it back.
        std::vector<int> product;
        std::set_difference(members.begin(), members.end(), epilogue.begin(), epilogue.end(), std::back_inserter(product));
        GroupCost first = OneKernel(product), second = OneKernel(epilogue);
        GroupCost cost{first.bytes + second.bytes, first.flops + second.flops, first.seconds + second.seconds, ""};
        cost.note = fmt::format("epilogue as its own kernel ({}): the product's {:.1f} MB go to memory and back", fused.Explain(),
                                2 * NodeBytes(*matmul) / 1e6);
        return cost;
      }
    }
  }
  GroupCost cost = OneKernel(members);
  if (target_ && target_->AnchorsConvolution() &&
      std::any_of(members.begin(), members.end(), [&](int id) { return IsConvAnchor(graph_.node(id)); }))
    cost.note = "the convolution on the target's library (the CPU: oneDNN), the epilogue as its post-ops where they express it "
                "(`tilefuse compile --backend cpu` names them)";
  return cost;
}

bool CostModel::Escapes(int id, const std::vector<int>& members) const {
  return is_output_[id] ||
         std::any_of(users_[id].begin(), users_[id].end(), [&](int u) { return !std::binary_search(members.begin(), members.end(), u); });
}

double CostModel::RowBlocksRate(const std::vector<int>& members) const {
  if (spec_.row_block_bytes_per_s <= 0) return 0;
  // The longest reduction's rows; none where the group is a product's or an opaque op's.
  int64_t rows = 0, row_elements = 0;
  for (int id : members) {
    const Node& n = graph_.node(id);
    if (n.info().kind == OpKind::Contraction || n.info().kind == OpKind::Opaque) return 0;
    if (n.info().kind != OpKind::Reduction) continue;
    const int64_t reduced = NumElements(graph_.node(n.inputs[0]).shape);
    if (reduced > row_elements) {
      row_elements = reduced;
      rows = std::max<int64_t>(1, NumElements(n.shape));
    }
  }
  if (row_elements == 0 || static_cast<double>(rows) * spec_.row_block_bytes_per_s >= spec_.bandwidth_bytes_per_s) return 0;
  // Stores along the rows: a stored member with as many elements as a row's whole input.
  bool along = false;
  for (int id : members)
    along = along || (graph_.node(id).info().kind != OpKind::Reduction && Escapes(id, members) && NumElements(graph_.node(id).shape) >= row_elements);
  // Chained: a reduction that reads another member reduction's result (members ascend: a
  // topological order).
  std::vector<bool> after_reduction(graph_.num_nodes(), false);
  bool chained = false;
  for (int id : members) {
    const Node& n = graph_.node(id);
    bool reads = false;
    for (int input : n.inputs) reads = reads || after_reduction[input];
    if (n.info().kind == OpKind::Reduction) {
      chained = chained || reads;
      after_reduction[id] = true;
    } else {
      after_reduction[id] = reads;
    }
  }
  return along || chained ? static_cast<double>(rows) * spec_.row_block_bytes_per_s : 0;
}

GroupCost CostModel::OneKernel(const std::vector<int>& members) const {
  // Members arrive sorted; binary search keeps membership tests cheap without a set.
  auto is_member = [&](int id) { return std::binary_search(members.begin(), members.end(), id); };
  GroupCost cost;
  double matmul_flops = 0, vector_flops = 0;
  DType matmul_dtype = DType::kF32;
  std::vector<int> inputs;
  for (int id : members) {
    const Node& n = graph_.node(id);
    for (int input : n.inputs)
      if (!is_member(input)) inputs.push_back(input);
    if (Escapes(id, members)) cost.bytes += NodeBytes(id);
    double flops = NodeFlops(n);
    // A convolution kept whole (the CPU's oneDNN) runs on the matrix units like a matmul.
    if (n.info().kind == OpKind::Contraction || n.op == OpCode::kConv) {
      matmul_flops += flops;
      matmul_dtype = n.dtype;
    } else {
      vector_flops += flops;
    }
  }
  std::sort(inputs.begin(), inputs.end());
  inputs.erase(std::unique(inputs.begin(), inputs.end()), inputs.end());
  for (int input : inputs)
    if (!inlined_[input]) cost.bytes += NodeBytes(input);
  cost.flops = matmul_flops + vector_flops;
  double compute = matmul_flops / spec_.MatmulFlops(matmul_dtype) + vector_flops / spec_.vector_flops_f32;
  double rate = spec_.bandwidth_bytes_per_s;
  if (const double rows_rate = RowBlocksRate(members); rows_rate > 0 && rows_rate < rate) {
    rate = rows_rate;
    cost.note = fmt::format("a block a row over {:.0f} rows (it stores along them or chains its reductions: no split)",
                            rows_rate / spec_.row_block_bytes_per_s);
  }
  cost.seconds = std::max(cost.bytes / rate, compute) + spec_.launch_overhead_s;
  return cost;
}

}  // namespace tilefuse
