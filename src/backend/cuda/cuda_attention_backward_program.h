// Attention's gradients (attention_grad_q, _k and _v: three opaque groups over the same six
// operands) as one step of the attention backward template (backend/cuda/attention_backward.h):
// its three kernels run at the first of the three groups' steps, writing dQ, dK and dV; the
// other two groups keep no kernel (grouped_into) and their outputs are written at that step.
// The statistics and the dQ accumulator are the program's scratch memory, so the step is
// launched and captured like any other (no host work, no split of a training step's graph).
#pragma once

#include "backend/cuda/cuda_program.h"

namespace tilefuse {

// Claims every complete triple the template takes (sm_90a); a triple it does not take, or an
// incomplete one, stays on the host with the reason (the pipeline rewrites such nodes into
// primitives before planning: passes/attention_grads.h).
// `prefix` begins the kernels' names, as BuildCudaProgram's.
void LowerAttentionGradients(const Graph& g, const FusionPlan& plan, const std::string& prefix, const CudaTarget& target,
                             CudaProgram& program);

}  // namespace tilefuse
