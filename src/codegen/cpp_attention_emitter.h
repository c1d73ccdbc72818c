// Prints an AttentionKernel as one C++ function with the loop emitter's calling
// convention: `extern "C" void NAME(void* const* buffers)`, buffers in
// AttentionKernel::buffers order, to be appended after CppPrelude().
//
// Flash attention on the CPU: the operands are packed into the compute type (Kᵀ and V
// rows padded with zeros to whole vectors), then OpenMP splits batch × blocks of 32 query
// rows. Each task walks the keys in blocks of 64:
//
//   scores[r][j]  = Q[r]·Kᵀ[:, j]              (a 32 × 64 tile, never N×N)
//   logit         = the group's scalar program (scale, masks) at (row, key)
//   running max m, running sum l, accumulator acc[r][:] (dv wide):
//     m' = max(m, max_j logit);  l, acc *= exp(m − m');  p = exp(logit − m')
//     l += Σ p;  acc[r][:] += Σ_j p · V[j][:]
//
// and stores acc / l. Both products run in 4-row × 16-float register tiles (plain loops
// GCC vectorises; exp through libmvec). Rows whose every logit is -inf end as 0/0 = NaN,
// like softmax.
#pragma once

#include <string>

#include "codegen/attention_lower.h"

namespace tilefuse {

std::string EmitCppAttention(const AttentionKernel& kernel);

}  // namespace tilefuse
