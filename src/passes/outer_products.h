// Products over a reduction dimension of one element as the pointwise ops they are:
// matmul(a[..., M, 1], b[..., 1, N]) = broadcast(a) * broadcast(b) over [..., M, N].
//
// A rotary embedding's angles are such a product (LLaMA's inv_freq[32, 1] · positions[1, T],
// as transformers writes it): as a matmul it was a cuBLASLt call of its own in every LLaMA
// forward and decode step (a library launch, which also ends the chain of kernels launched
// while the one ahead finishes), beside the pointwise kernel of its cos and sin. As a
// multiply it fuses with them. One rounding either way: the product of two values, in the
// output's dtype (a matmul accumulates in f32 and rounds once; bf16·bf16 is exact in f32).
#pragma once

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

StatusOr<Graph> RewriteOuterProducts(const Graph& graph);

}  // namespace tilefuse
