// A decode attention's output projection folded into the attention's kernel.
//
// At a decode step the attention's output (one token's heads side by side) is read by one
// product only, the layer's output projection, a skinny product of its own launch and
// dependency edge (GPT-2 small: ~2.5 µs of its ~18 µs a layer on an H100's timeline). Folded,
// the decode form runs as clusters of a batch entry's heads: each CTA loads its 64 columns of
// the projection's weight before the wait for the grid ahead, computes its head, sends the
// head's row to every CTA of the cluster and then computes its columns of the product and the
// product's epilogue (codegen/cuda/device/attention_decode_projection.cuh). The product's group
// keeps no kernel (grouped_into the attention), the attention's output no memory.
//
// Taken where the attention runs one query row a head, the product reads the attention's output
// as its A ([rows][heads · dv], the output's own memory) and nothing else reads that output,
// and the product's shape fits (N = heads · 64, a plain weight; the emitter checks the rest).
#pragma once

#include "codegen/attention_template.h"
#include "codegen/gemm_template.h"
#include "tilefuse/graph.h"

namespace tilefuse {

// Sets `attention.projection` to `product` where it reads the attention's output as its A, one
// query row a head; false (unchanged) where not.
bool FoldProjection(const Graph& g, const GemmTemplateKernel& product, AttentionTemplateKernel& attention);

}  // namespace tilefuse
