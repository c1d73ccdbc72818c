// Prints an AttentionKernel as one C++ function with the loop emitter's calling
// convention: `extern "C" void NAME(void* const* buffers)`, buffers in
// AttentionKernel::buffers order, to be appended after CppPrelude().
//
// Flash attention on the CPU: the operands are packed into the compute type, then
// OpenMP splits batch × blocks of query rows. Each task walks the keys in blocks:
//
//   scores[r][j]  = Q[r]·Kᵀ[:, j]              (a kQueryBlock × kKeyBlock tile, never N×N)
//   logit         = the group's scalar program (scale, masks) at (row, key)
//   running max m, running sum l, accumulator acc[r][:] (dv wide):
//     m' = max(m, max_j logit);  l, acc *= exp(m − m');  p = exp(logit − m')
//     l += p;  acc[r][:] += p · V[j][:]
//
// and stores acc / l. Rows whose every logit is -inf end as 0/0 = NaN, like softmax.
#pragma once

#include <string>

#include "codegen/attention_lower.h"

namespace tilefuse {

std::string EmitCppAttention(const AttentionKernel& kernel);

}  // namespace tilefuse
