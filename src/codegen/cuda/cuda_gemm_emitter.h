// The Hopper GEMM template: a GemmTemplateKernel printed as one warp-specialised,
// persistent CUDA kernel over the tile library (tilefuse_tiles.cuh).
//
//   warpgroup 0 (producer)   one thread issues TMA loads of A and B tiles into a ring of
//                            `stages` shared-memory slots, each guarded by a full and an
//                            empty mbarrier
//   warpgroups 1, 2 (consumers) ping-pong: each owns every other tile of its CTA (or,
//                            cooperative: 64 rows of every tile); wgmma m64·block_n·k16
//                            from shared memory, one group in flight while the previous
//                            slot is handed back, f32 accumulators in registers; then the
//                            epilogue's scalar program per element, the output staged in
//                            swizzled shared memory and written by TMA stores that overlap
//                            what comes next
//   CTAs                     one per SM, walking the output tiles in grouped order
//   split-K                  with few output tiles (a decode-like M), each tile's K range is
//                            cut into `splits` units that CTAs take like tiles: each unit
//                            leaves its f32 partial sums in scratch memory, and the unit
//                            that finishes a tile last (a counter per tile) adds the others'
//                            in split order (deterministic) and runs the epilogue
//
// Registers move from the producer (40) to the consumers (232) with setmaxnreg.
#pragma once

#include "codegen/cuda/cuda_emitter.h"
#include "codegen/cuda/cuda_gemm_config.h"
#include "codegen/gemm_template.h"

namespace tilefuse {

// InvalidArgument for configurations the template cannot run.
StatusOr<CudaKernelSource> EmitCudaGemm(const GemmTemplateKernel& gemm, const CudaGemmConfig& config = {});

// What the GEMM-shaped templates (this one, cuda_skinny_gemm_emitter) print alike.
// A half-precision [batch][rows][cols] row-major matrix, moved in boxes of box_rows ×
// box_cols (128-byte swizzled rows: box_cols is 64).
TensorMapArg GemmMatrixMap(int node, DType dtype, int64_t batch, int64_t rows, int64_t cols, int box_rows, int box_cols);
// The product is read from the accumulators, not passed, unless the group also stores it.
bool GemmPassesBuffer(const GemmTemplateKernel& gemm, const KernelBuffer& buffer);
// 32-bit element indexes when every buffer's fit.
const char* GemmIndexType(const GemmTemplateKernel& gemm);
// The epilogue of element (row, col), a local struct `Epilogue`: the group's scalar program
// with the product's loads given as `acc` and the staged or ringed residual's (-1: none) as
// `loaded`; it writes the direct stores and returns the staged store's value (`staged`, -1:
// none, and it returns 0). `struct_name`: another name (a part's of a product grouped over N).
std::string GemmEpilogueStruct(const GemmTemplateKernel& gemm, int staged, int staged_load, int ringed_load,
                               const std::string& struct_name = "Epilogue", bool with_prefetch = false);
// `with_prefetch`: the struct also has `void Prefetch(tf_index_t row, int col) const`, which
// asks L1 for the lines element (row, col)'s loads read (those at an index of row and col
// alone, not gathered), so that a kernel may issue them long before its epilogue runs.
// The epilogue's buffers as kernel parameters (", const T* __restrict__ bN" each), added to
// `source`'s launch arguments and named in `buffers` ("b0, b2") for the Epilogue's initializer;
// `prefix` before each name (a part's of a product grouped over N: "p1_b0").
std::string GemmEpilogueParameters(const GemmTemplateKernel& gemm, CudaKernelSource& source, std::string& buffers,
                                   const std::string& prefix = "");

}  // namespace tilefuse
