// The Hopper attention template: an AttentionTemplateKernel printed as one warp-specialised
// flash-attention kernel over the tile library (tilefuse_tiles.cuh), FlashAttention-3 style.
//
//   CTA                      128 query rows of one batch entry (heads are batch entries);
//                            CTAs of one entry run together, sharing its K and V in L2
//   warpgroup 0 (producer)   one thread loads the Q tile once, then K and V tiles of
//                            block_n keys by TMA into a ring of `stages` slots (K and V
//                            with barriers of their own, so Q·Kᵀ starts before V lands)
//   warpgroups 1, 2          64 query rows each: S = Q·Kᵀ by wgmma from shared memory;
//   (consumers)              the group's logits program per score (scale, masks, bias)
//                            and the online softmax in f32 registers (row max and sum
//                            across the four lanes holding a row); P converted in place to
//                            A-fragment registers; O += P·V by wgmma with A from
//                            registers. The two consumers' softmax and matmuls overlap.
//
// No score ever leaves the registers. Keys past the end are masked; rows past the end are
// not stored.
#pragma once

#include "codegen/attention_template.h"
#include "codegen/cuda_emitter.h"

namespace tilefuse {

struct CudaAttentionConfig {
  int block_n = 128;  // keys per step: 64 or 128
  int stages = 0;     // K/V ring depth; 0: as many as fit (at most 3)
};

StatusOr<CudaKernelSource> EmitCudaAttention(const AttentionTemplateKernel& attention, const CudaAttentionConfig& config = {});

}  // namespace tilefuse
