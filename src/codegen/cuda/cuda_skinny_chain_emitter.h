// The skinny chain template: two skinny products in one kernel, the second reading the first's
// epilogue as its A (a decode step's MLP: gelu(LN(x)·W1 + b1) then ·W2 + b2 + x), printed over
// codegen/cuda/device/gemm_skinny_chain_sm90.cuh. Each CTA computes 64 of the first product's
// columns whole and their share of the second product; the shares are summed after a
// grid-wide barrier. The first product's output is never stored.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "codegen/cuda/cuda_emitter.h"
#include "codegen/gemm_template.h"
#include "tilefuse/status.h"

namespace tilefuse {

// OK where the chain takes `first` then `second` (second.a the value first's epilogue stores,
// read by nothing else of second's), else the reason: both skinny products of at most 16 rows
// and one 16-bit type, weights read-only, N1 and N2 whole tiles of 64 (N2 at most 768: its
// tiles' sums in registers), every tile of W1 and W2 a CTA takes resident in shared memory, no
// gate, part, partner column or padded B.
Status SkinnyChainFits(const GemmTemplateKernel& first, const GemmTemplateKernel& second);
// The forms that fit, the rule's first: {"pair": true} (a cluster of two CTAs a 64-column block,
// each half of K1 and of N2; where both halve evenly), {"pair": false} (one CTA a block, both
// weights' tiles whole; where they fit shared memory).
std::vector<nlohmann::json> SkinnyChainForms(const GemmTemplateKernel& first, const GemmTemplateKernel& second);
// The kernel (named first.name) in `form` ({}: the rule's, the pair where it fits): one CTA, or
// one pair, per 64 columns of N1, all resident at once on `sm_count` SMs (they wait for each
// other).
StatusOr<CudaKernelSource> EmitCudaSkinnyChain(const GemmTemplateKernel& first, const GemmTemplateKernel& second, int sm_count,
                                               const nlohmann::json& form = nlohmann::json::object());

}  // namespace tilefuse
