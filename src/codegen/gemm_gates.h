// Gated products: a product whose epilogue reads another product's output element by element,
// both of one A by different weights (LLaMA's up projection times silu of its gate projection,
// SwiGLU; GeGLU likewise), run as one GEMM template kernel (GemmTemplateKernel::gate). Each
// tile computes the same columns of both: its first half by the gate's weight, its second by
// the product's, so a thread holds a column of both products (the wgmma fragment puts column c
// and c + block_n / 2 in one thread) and the epilogue combines them in registers. The gate's
// output is never written nor read back (8×512 LLaMA-style: 46 MB each way a layer), and at
// batch 1 one kernel pays the launch, ramp and tail that two did.
#pragma once

#include "codegen/gemm_template.h"
#include "tilefuse/status.h"

namespace tilefuse {

// Why `gate` (whose epilogue's one output is node `gate_value`) cannot be computed in the tiles
// of `product`, or OK: both groupable over N (one batch entry, A a plain matrix or a view, B a
// K-major weight no kernel writes, N a multiple of 64) with the same A, rows, N, K and types
// (16-bit, or f32 as TF32 or 3xTF32; not FP8); the gate's epilogue stores only gate_value, at the product's position; the product's
// epilogue reads gate_value, only at its own position.
Status Gateable(const GemmTemplateKernel& gate, const GemmTemplateKernel& product, int gate_value);
// `product` with `gate` computed in its tiles (Gateable must hold).
StatusOr<GemmTemplateKernel> GateProduct(GemmTemplateKernel gate, GemmTemplateKernel product, int gate_value);
// The output columns of a tile block_n columns wide: half of them for a gated product.
int TileOutputColumns(const GemmTemplateKernel& gemm, int block_n);
// Whether a gated product takes tiles block_n columns wide: halves of whole 64-column boxes
// that tile N (true for a product without a gate).
bool GateTakesWidth(const GemmTemplateKernel& gemm, int block_n);

}  // namespace tilefuse
