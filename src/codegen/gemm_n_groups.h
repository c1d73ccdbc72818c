// Products grouped over N: several products of one A by different weights (a layer's q, k and
// v projections of one normed input) run as one GEMM template kernel whose columns are the
// products' side by side (GemmTemplateKernel::n_parts). At batch 1 a product of a few hundred
// output tiles is bound by its launch, its ramp and its tail more than by its steps (the
// LLaMA-style layer at 1x128: about 7 µs a kernel), so three kernels cost about three times
// one: one kernel over all three weights pays those once. The weights stay where they lie
// (each part its own TMA map), and each part keeps its own epilogue and outputs.
#pragma once

#include <string>
#include <vector>

#include "codegen/gemm_template.h"
#include "tilefuse/status.h"

namespace tilefuse {

// At most this many products in one kernel (the skeleton's B maps).
inline constexpr int kMaxGemmNParts = 4;

// Why `gemm` cannot be a part of a product grouped over N, or OK: one batch entry, A a plain
// matrix or a view (not an implicit GEMM's, not MN-major), B a K-major weight no kernel
// writes, N a multiple of 64 (a tile's columns then lie in one part for widths dividing every
// part's N).
Status GroupableOverN(const GemmTemplateKernel& gemm);
// What products grouped over N must share: A as read (value, view), rows, K and the types.
// Equal keys of groupable products may be grouped.
std::string GroupOverNKey(const GemmTemplateKernel& gemm);
// The grouped product of `parts` (2 to kMaxGemmNParts of equal keys, in column order).
StatusOr<GemmTemplateKernel> GroupOverN(std::vector<GemmTemplateKernel> parts);
// Whether tiles `block_n` columns wide keep to one part each (true for a single product), a
// gated product's halves to whole boxes (GateTakesWidth), and every column's partner column
// to the same tile (GemmTemplateKernel::partner).
bool PartsTakeWidth(const GemmTemplateKernel& gemm, int block_n);
// The narrowest of 64, 128 and 256 columns that PartsTakeWidth takes.
int NarrowestTileWidth(const GemmTemplateKernel& gemm);

}  // namespace tilefuse
