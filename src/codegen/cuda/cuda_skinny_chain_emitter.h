// The skinny chain template: two skinny products in one kernel, the second reading the first's
// epilogue as its A (a decode step's MLP: gelu(LN(x)·W1 + b1) then ·W2 + b2 + x), printed over
// codegen/cuda/device/gemm_skinny_chain_sm90.cuh. Each CTA computes 64 of the first product's
// columns whole and their share of the second product; the shares are summed after a
// grid-wide barrier. The first product's output is never stored.
#pragma once

#include <cstdint>

#include "codegen/cuda/cuda_emitter.h"
#include "codegen/gemm_template.h"
#include "tilefuse/status.h"

namespace tilefuse {

// OK where the chain takes `first` then `second` (second.a the value first's epilogue stores,
// read by nothing else of second's), else the reason: both skinny products of at most 16 rows
// and one 16-bit type, weights read-only, N1 and N2 whole tiles of 64 (N2 at most 768: its
// tiles' sums in registers), every tile of W1 and W2 resident in shared memory, no gate, part,
// partner column or padded B.
Status SkinnyChainFits(const GemmTemplateKernel& first, const GemmTemplateKernel& second);
// The kernel (named first.name): one CTA per 64 columns of N1, at most `sm_count` of them (they
// wait for each other).
StatusOr<CudaKernelSource> EmitCudaSkinnyChain(const GemmTemplateKernel& first, const GemmTemplateKernel& second, int sm_count);

}  // namespace tilefuse
