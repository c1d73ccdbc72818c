// Prints an AttentionKernel as one C++ function with the loop emitter's calling
// convention: `extern "C" void NAME(void* const* buffers)`, buffers in
// AttentionKernel::buffers order, to be appended after CppPrelude().
//
// Flash attention on the CPU: OpenMP splits batch × blocks of 32 query rows into runs of
// consecutive tasks; a thread packs Kᵀ and V of the batch it is on into its own buffers
// in the compute type (rows padded with zeros to whole vectors), once per batch, and each
// task copies its block of Q. Each task walks the keys in blocks of 64:
//
//   scores[r][j]  = Q[r]·Kᵀ[:, j]              (a 32 × 64 tile, never N×N)
//   logit         = the group's scalar program (scale, masks) at (row, key)
//   running max m, running sum l, accumulator acc[r][:] (dv wide):
//     m' = max(m, max_j logit);  l, acc *= exp(m − m');  p = exp(logit − m')
//     l += Σ p;  acc[r][:] += Σ_j p · V[j][:]
//
// and stores acc / l. Both products run in 8-row × 16-float register tiles (plain loops
// GCC vectorises; exp through libmvec). Rows whose every logit is -inf end as 0/0 = NaN,
// like softmax. Key blocks a mask removes entirely (causal attention's upper triangle)
// are skipped.
#pragma once

#include <string>
#include <vector>

#include "codegen/attention_lower.h"
#include "codegen/attention_mask_blocks.h"

namespace tilefuse {

inline constexpr int64_t kCppAttentionQueryBlock = 32;  // rows per task
inline constexpr int64_t kCppAttentionKeyBlock = 64;    // keys per step

// `key_blocks`: per query block, the key blocks its mask leaves (UnmaskedKeyBlocks with
// the two block sizes above); empty: every block.
// `symbols`, where given, gets the model's symbols the kernel reads after its buffers (its
// sizes at launch: AttentionKernel::SizesAtLaunch, not where a mask skips key blocks).
std::string EmitCppAttention(const AttentionKernel& kernel, const std::vector<KeyBlockRange>& key_blocks = {},
                             std::vector<int>* symbols = nullptr);

}  // namespace tilefuse
