// CpuExecutable's insides, shared by compiled_graph.cc (compile and run) and
// compiled_graph_tuning.cc (the tuner's measurements). Not for other users.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/host_jit.h"
#include "backend/cpu/onednn_conv.h"
#include "backend/cpu/onednn_pool.h"
#include "codegen/kernel.h"
#include "backend/cpu/cpu_executable.h"
#include "runtime/memory_plan.h"

namespace tilefuse {

namespace cpu_executable_internal {

using KernelFunction = void (*)(void* const*);

// A generated function and the graph values of its buffers.
struct GeneratedCall {
  std::string symbol;             // the function's name in the translation unit
  KernelFunction function = nullptr;
  std::vector<int> buffer_nodes;  // the kernel's buffers, in order
  std::vector<int> outputs;       // the nodes it writes
  std::optional<Kernel> loop_kernel;  // loop kernels: what the tuner re-emits
  // The symbols' values its sizes are printed over (Kernel::symbols): passed after the
  // buffers, so one compiled function serves every binding of the model's symbolic dims.
  std::vector<int64_t> symbols;
  double product_flops = 0;           // attention kernels: Q·Kᵀ's and P·V's flops (RunTeamSize)
};

// One group at run time: a generated kernel; or, for gemm groups, the prologue as
// generated kernels, the product through BLAS and the epilogue as a generated kernel;
// or its members on the reference kernels.
struct Step {
  int group = -1;
  std::optional<GeneratedCall> kernel;     // the group's; gemm: its epilogue (none when empty)
  int matmul = -1;                         // gemm: the contraction (-1: the group on the reference kernels)
  std::vector<GeneratedCall> prologue;     // gemm: materialise the product's operands
  std::vector<int> reference_prologue;     // gemm: prologue members no loop kernel took, in group order
  // gemm groups anchored on a Conv (`matmul` is the Conv): the oneDNN primitive, the value it
  // writes (the group's output when the epilogue became post-ops and `kernel` is empty; else
  // the Conv itself, which the epilogue kernel reads) and the residual its post-ops add.
  std::shared_ptr<OnednnConv> conv;  // mutable until the layouts between convolutions are planned
  int conv_output = -1;
  int conv_residual = -1;
  // An opaque group of one f32 MaxPool or AveragePool: the oneDNN primitive that runs it.
  std::shared_ptr<const OnednnPool> pool;
  int pool_node = -1;
  // Squeeze-excitation groups reading a convolution's blocked output (KeepBlockedBetweenConvolutions):
  // the spatial mean (a group of one ReduceMean) or the per-channel product (broadcast, mul)
  // on oneDNN in place of the group's generated kernel. `se_node`: the node it writes;
  // `se_input`, `se_scale`: what it reads.
  std::shared_ptr<const OnednnChannelMean> channel_mean;
  std::shared_ptr<const OnednnChannelScale> channel_scale;
  int se_node = -1, se_input = -1, se_scale = -1;
};

// The generated loop kernel named `name` (a group's or a prologue's), or nullptr.
const GeneratedCall* FindLoopKernel(const std::vector<Step>& steps, const std::string& name);

}  // namespace cpu_executable_internal

struct CpuExecutable::State {
  Graph graph;
  FusionPlan plan;
  std::vector<std::string> plan_notes;  // CpuBackend::Plan's: attention groups split into their parts, and why
  std::vector<bool> inlined;
  SymbolicShapes symbolic;  // the graph's sizes in its symbolic dims (empty: none)
  std::vector<Tensor> generator_values;  // constants, and generators reference steps read
  std::vector<cpu_executable_internal::Step> steps;
  std::vector<KernelInfo> kernels;
  std::vector<std::shared_ptr<const JitLibrary>> libraries;
  std::string source;     // this graph's generated functions (the backend's Lower)
  int team_size = 0;      // the OpenMP team of a run's parallel regions (0: OpenMP's default); RunTeamSize
  std::string cache_dir;  // the JIT's ("" its default)
  int64_t jit_compiles = 0;
  bool poison_outputs = false;
  LoweringFault fault;  // tests only
  // Intermediates live in one arena at offsets from the liveness plan (-1: not in it).
  MemoryPlan memory;
  std::vector<int64_t> arena_offset;  // per node
  std::vector<std::byte> arena;
  // The last Run's values (tensors, or arena memory where non-null), kept until the next
  // Run so MeasureVariants times kernels on real data.
  std::vector<Tensor> last_tensors;
  std::vector<void*> last_memory;
  // Contention (cpu_executable.cc, kStallUs): each step's fastest time with a team and on the
  // calling thread alone, and until when runs use the calling thread alone after a stall.
  std::vector<double> fastest_team_us;
  std::vector<double> fastest_alone_us;
  int64_t runs = 0;
  std::chrono::steady_clock::time_point alone_until{};
};

}  // namespace tilefuse
