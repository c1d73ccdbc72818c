// The CUDA emitter: prints a Kernel as a __global__ function over the device library
// (src/backend/cuda/device/tilefuse_device.cuh). Three templates:
//
//  pointwise   each thread takes `vector` consecutive elements per step of a grid-stride
//              loop; accesses at the element's own offset move as 16-byte vectors, other
//              accesses are scalar (broadcasts hit L1); a scalar loop takes the tail.
//  pointwise lanes  the same loop printed value by value (codegen/vector_lanes.h) for kernels
//              whose loads are contiguous per vector only through divisions and clamps
//              (window taps over NHWC): uniform values once per vector, the taps as vectors
//  pointwise transposed  (codegen/cuda/cuda_transposed_emitter.h) a block per 2-D tile, staged
//              through shared memory, for kernels reading an operand transposed
//  column      (codegen/cuda/cuda_column_emitter.h) reductions whose consecutive outputs are
//              consecutive in memory: a block per tile of outputs, the reduced elements split
//              over its threads and, where the outputs are few, over several blocks
//  row         `threads_per_row` threads (1: a thread, 32: a warp, or the whole block)
//              share one output row (loop variable 0) and split its reduced elements
//              (variable 1) into `vector`-wide chunks. With `cache_row` the row's loads are
//              read once into registers and every reduction pass and the store pass
//              reuse them; otherwise each pass reads the row again (from L2). Partial
//              results combine with warp shuffles, then through shared memory.
//
// Half types travel as 16-bit patterns and compute in float; f64 computes in double.
// Launch parameters live in CudaKernelConfig so the autotuner can change them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/kernel.h"
#include "codegen/launch_spec.h"
#include "tilefuse/status.h"

namespace tilefuse {

struct CudaKernelConfig {
  int threads = 0;          // per block; 0: chosen from the kernel's shape
  int vector = 0;           // elements per access; 0: 16 bytes of the narrowest row access, 32 (16 with transcendentals) pointwise
  int threads_per_row = 0;  // row template: 1, 32 or `threads`; 0: chosen from the row length
  int cache_row = -1;       // row template: 1 registers, 2 registers holding half-precision pairs, 0 re-read; -1: when it fits
  int unroll = 0;           // pointwise: vectors per thread per step; 0: 2 (32 bytes in flight)
  // Pointwise: the edge of the 2-D tile of the transposed-load template (16 to 128, a power
  // of two; codegen/cuda/cuda_transposed_emitter.h), -1 the flat template; 0: the tiled one where a
  // load is transposed against the output (codegen/transposed_tiles.h), else the flat one.
  // Resolved configurations of the flat and row templates say -1.
  // Row kernels: the outputs a block of the column template covers (codegen/cuda/cuda_column_emitter.h;
  // a power of two, a multiple of `vector`), -1 the row template; 0: the column template where
  // the analysis takes the kernel (codegen/column_tiles.h).
  int tile = 0;
  // Column template: blocks sharing one tile's reduced elements (1: a block reduces whole
  // columns); 0: chosen to fill the GPU. The other templates say 0.
  int splits = 0;
  // Row template with a block per row: the CTAs of a thread-block cluster that share one row
  // (1, 2, 4 or 8), each reducing a slice of it and combining the partials through
  // distributed shared memory; resolved to 1 wherever it does not apply; 0: the rule.
  int cluster = 0;
  // Row template holding its row in registers (cache_row 1): the vectors every row reads
  // alike (a norm's scale and bias) loaded with the row, before the reductions, into
  // registers; false: each read after them, chunk by chunk, as the outputs are written. The
  // rule holds them where it takes a warp per row for them (rows of 3 or 4 vectors a lane),
  // else reads them after; the tuner tries both; resolved to false wherever it does not apply.
  bool broadcast_with_row = false;
  // The GPU's SM count (set by the program builder, not searched; 0: unknown). With it, a row
  // kernel whose 1024-thread block holds its row in registers (one block per SM) runs one
  // block per SM over many rows, each thread copying its part of the block's next row into
  // shared memory (cp.async) while the current row computes.
  int sm_count = 0;
  // Whether the GPU launches thread-block clusters (compute capability 9 on; set by the program
  // builder like sm_count). Without it the rule never takes a cluster (a requested one is kept).
  bool clusters = false;
};

struct CudaKernelSource {
  std::string name;
  std::string function;     // the __global__ function (and nothing else)
  // Device headers the function needs beyond the device and tile libraries (a template's
  // skeleton, codegen/cuda/device/), included ahead of it.
  std::vector<std::string> includes;
  int threads = 0;          // block size
  int64_t work_blocks = 0;  // blocks that cover the work once; the launcher may use fewer
  std::string strategy;     // human-readable: "pointwise x8", "row: warp per row, cached"
  CudaKernelConfig config;  // the resolved configuration
  // Buffers the function takes, in order (Kernel::buffers).
  int num_params = 0;
  // Grid, block, shared memory and parameters (the loop templates: a 1-D grid of
  // `work_blocks`, Kernel::buffers in order).
  LaunchSpec launch;
  // The kernel behind released before this one's wait for the grid ahead (tilefuse_device.cuh's
  // TF_TRIGGER_BEFORE_WAIT, defined first in the kernel's unit; TILEFUSE_TRIGGER_FIRST=1).
  bool trigger_before_wait = false;
};

// Row template: whether `v` loads the row itself (depends on both loop variables, plain
// index): the loads a cached row keeps in registers. In a kernel of one row (a decode step's
// norm: the row variable gone from every index) every plain load along the row counts: each
// is read once, and held, its loads are issued together before the reductions.
bool IsRowDataLoad(const Kernel& kernel, const ScalarValue& v);
// How many of the kernel's values are such loads.
int64_t RowDataLoads(const Kernel& kernel);
// Row template: whether `v` loads a vector every row reads alike (along the row, the same
// for every row, in whole vectors of `vector` elements): a norm's scale or bias. None in a
// kernel of one row.
bool IsRowBroadcastLoad(const Kernel& kernel, const ScalarValue& v, int vector);
// The registers a thread's chunk of those vectors takes, `vector` elements each; 0: the
// kernel reads none.
int64_t BroadcastRegisters(const Kernel& kernel, int vector);
// The registers a thread holding `chunks` chunks of its row and, beside them, those vectors'
// chunks takes (the row's loads one a value): what the held-row budget is checked against.
int64_t HeldBesideRegisters(const Kernel& kernel, int64_t chunks, int vector);
// The chosen configuration for a kernel (every 0/-1 of `requested` resolved).
CudaKernelConfig ResolveCudaConfig(const Kernel& kernel, const CudaKernelConfig& requested);
// InvalidArgument for configurations the template cannot run (the tuner prunes them).
// The kernel is printed as RewriteForEmission (codegen/kernel_rewrites.h) leaves it.
StatusOr<CudaKernelSource> EmitCudaKernel(const Kernel& kernel, const CudaKernelConfig& config = {});
// A loop template's source (pointwise, row, pointwise transposed): `body` inside the
// __global__ function over Kernel::buffers, whose index type tf_index_t is 32-bit where every
// offset fits, launched as `work_blocks` blocks of config.threads over those buffers, except
// the `unpassed` ones (a template's accumulator stands for them).
// `extra_parameters` (", T* name...") follow the buffers in the signature; the caller adds
// their launch arguments. `min_blocks` > 0 asks ptxas to fit that many blocks on an SM
// (__launch_bounds__'s second argument). `inner_at_launch`: the body prints the inner extent
// over the symbols too (PrintedSymbols' `inner`), so their parameters include its symbols.
CudaKernelSource LoopKernelSource(const Kernel& kernel, const CudaKernelConfig& config, const std::string& body, int64_t work_blocks,
                                  std::string strategy, const std::string& extra_parameters = "", int min_blocks = 0,
                                  const std::vector<int>& unpassed = {}, bool inner_at_launch = false);
// The device library's functor ("tf_sum", "tf_max", ...) folding partial results with
// `combiner` (ReductionTraits::combiner).
const char* DeviceCombiner(OpCode combiner);
// The first statement of every generated kernel (tf_await_prior_grid in the device library):
// the kernel may be launched programmatically, before the one ahead of it has finished.
inline constexpr char kAwaitPriorGrid[] = "  tf::tf_await_prior_grid();\n";
// A compute-bound template's source completed: `function`, its body opened by
// kAwaitPriorGrid (unless `awaits_in_skeleton`: the skeleton it calls awaits the prior grid
// before it touches memory the model writes), and a launch of `work_blocks` blocks of
// `threads` with `shared_bytes` of dynamic shared memory over its arguments.
void FinishTemplateSource(CudaKernelSource& source, std::string function, int64_t shared_bytes, bool awaits_in_skeleton = false);
// One translation unit holding several kernels (a graph's dump; the CUDA backend compiles
// a unit per distinct kernel).
std::string CudaTranslationUnit(const std::vector<CudaKernelSource>& kernels);

}  // namespace tilefuse
