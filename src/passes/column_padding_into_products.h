// Moves zero columns appended to a product into the product: concat([reshape*(a · b), zeros],
// last axis) becomes reshape*(a · b') with b' = b and zero columns after its N, so the product
// itself writes the padded rows. b = wᵀ (a linear layer's or LM head's [N][K] weight) is padded
// as w with zero rows, wᵀ of that: the GEMM template then reads w K-major as it lies and TMA
// fills the missing rows with zeros (GemmTemplateKernel::b_rows), no copy made.
//
// Why: a GPT-2 LM head's logits rows (50257 bf16 elements) are not 16-byte aligned, so the
// template stores them without TMA (559.9 µs at 8x512 on an H200 against ~445 µs for an aligned
// vocabulary, 2026-11-30). The torch.compile frontend asks for such logits padded to whole
// 16-byte units (the translator's padded outputs) and hands the caller the unpadded columns as
// a strided view, as TorchInductor does. For the CUDA backend.
#pragma once

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

StatusOr<Graph> MoveColumnPaddingIntoProducts(const Graph& graph);

}  // namespace tilefuse
