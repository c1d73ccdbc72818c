#include "backend/cuda/cuda_attention_backward_program.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "backend/cuda/attention_backward.h"

namespace tilefuse {

namespace {

// The template's problem for the operands of an attention_grad node (shape inference has
// checked how they fit).
AttentionBackwardProblem ProblemOf(const Graph& g, const Node& grad) {
  const Shape& q = g.node(grad.inputs[1]).shape;
  const Shape& k = g.node(grad.inputs[2]).shape;
  const Shape& v = g.node(grad.inputs[3]).shape;
  AttentionBackwardProblem p;
  p.dtype = grad.dtype;
  p.heads = static_cast<int>(q[0] * q[1]);
  p.group = static_cast<int>(q[1] / k[1]);
  p.nq = static_cast<int>(q[2]);
  p.nk = static_cast<int>(k[2]);
  p.d = static_cast<int>(q[3]);
  p.causal = grad.attrs.causal;
  p.scale = grad.attrs.scale;
  // Causal work starts longest first within sets of 8 heads (as the torch frontend's calls).
  p.heads_together = p.causal ? 8 : 1;
  return p;
}

Status Takes(const Graph& g, const Node& grad, const AttentionBackwardProblem& p) {
  RETURN_IF_ERROR(CheckAttentionBackward(p));
  if (g.node(grad.inputs[3]).shape.back() != p.d) return InvalidArgument("attention backward template: v's head dim differs from q's");
  if (g.node(grad.inputs[5]).dtype != DType::kF32) return InvalidArgument("attention backward template: an f32 logsumexp only");
  const int64_t limit = int64_t{1} << 31;
  if (int64_t{p.heads} * p.nq * p.d >= limit || int64_t{p.heads / p.group} * p.nk * p.d >= limit)
    return InvalidArgument("attention backward template: operands of 2^31 elements or more");
  return Status::Ok();
}

CudaLaunchable Launchable(CudaKernelSource source, std::vector<int> outputs) {
  CudaLaunchable k;
  k.buffer_nodes = GraphValuesOf(source.launch);
  k.kernel.name = source.name;
  k.kernel.kind = GroupKind::kOpaque;
  k.source = std::move(source);
  k.outputs = std::move(outputs);
  k.is_template = true;  // (no template_kernel: the tuner has nothing to search)
  return k;
}

}  // namespace

void LowerAttentionGradients(const Graph& g, const FusionPlan& plan, const std::string& prefix, const CudaTarget& target,
                             CudaProgram& program) {
  // The groups of each call, by what the three nodes share: operands and attributes. An
  // operand is known by the value under its reshapes (copies of one reshape, as a pass may
  // give each reader, hold the same elements).
  auto operand = [&](int id) {
    const Shape& shape = g.node(id).shape;
    while (g.node(id).op == OpCode::kReshape) id = g.node(id).inputs[0];
    return std::make_pair(id, shape);
  };
  using Call = std::tuple<std::vector<std::pair<int, Shape>>, double, bool>;
  std::map<Call, std::map<OpCode, size_t>> calls;
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    const FusionGroup& group = plan.groups[i];
    if (group.kind != GroupKind::kOpaque || group.nodes.size() != 1) continue;
    const Node& n = g.node(group.nodes.front());
    if (!IsAttentionGrad(n.op)) continue;
    std::vector<std::pair<int, Shape>> operands;
    for (int input : n.inputs) operands.push_back(operand(input));
    calls[{operands, n.attrs.scale, n.attrs.causal}][n.op] = i;
  }
  for (const auto& [call, groups] : calls) {
    auto why_not = [&](const std::string& why) {
      for (const auto& [op, i] : groups) program.groups[i].why_host = why;
    };
    if (groups.size() != 3) {
      why_not("the attention backward template writes dQ, dK and dV together; this call has not all three");
      continue;
    }
    const size_t q = groups.at(OpCode::kAttentionGradQ), k = groups.at(OpCode::kAttentionGradK), v = groups.at(OpCode::kAttentionGradV);
    const Node& dq = g.node(plan.groups[q].nodes.front());
    const AttentionBackwardProblem problem = ProblemOf(g, dq);
    if (Status takes = target.arch == "sm_90a" ? Takes(g, dq, problem) : Unimplemented("the attention backward template needs sm_90a");
        !takes.ok()) {
      why_not(takes.message());
      continue;
    }
    // The step is the first of the three groups; it reads that group's own operands (computed
    // before it, where another's reshape copies might not be).
    const size_t head = std::min({q, k, v});
    const std::vector<int>& operands = g.node(plan.groups[head].nodes.front()).inputs;
    const int dk = plan.groups[k].nodes.front(), dv = plan.groups[v].nodes.front();
    AttentionBackwardValues at{.q = operands[1], .k = operands[2], .v = operands[3], .out = operands[4], .dout = operands[0],
                               .lse = operands[5], .dq = dq.id, .dk = dk, .dv = dv, .scratch_offset = kScratchCounterBytes};
    std::vector<CudaKernelSource> kernels =
        AttentionBackwardKernels(problem, at, fmt::format("{}tf_group{}_attention_bwd", prefix, plan.groups[head].id));
    for (size_t i : {q, k, v}) {
      CudaGroupProgram& p = program.groups[i];
      p.mode = CudaGroupProgram::Mode::kAttentionBackwardTemplate;
      p.host_nodes.clear();
      p.why_host.clear();
      if (i != head) p.grouped_into = plan.groups[head].id;
    }
    CudaGroupProgram& step = program.groups[head];
    step.prologue = {Launchable(std::move(kernels[0]), {}), Launchable(std::move(kernels[1]), {dk, dv})};
    step.kernel = Launchable(std::move(kernels[2]), {dq.id});
  }
}

}  // namespace tilefuse
