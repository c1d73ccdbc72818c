// CompiledGraph's insides, shared by compiled_graph.cc (compile and run) and
// compiled_graph_tuning.cc (the tuner's measurements). Not for other users.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/host_jit.h"
#include "codegen/kernel.h"
#include "runtime/compiled_graph.h"
#include "runtime/memory_plan.h"

namespace tilefuse {

namespace compiled_graph_internal {

using KernelFunction = void (*)(void* const*);

// One group at run time: a generated kernel; or, for gemm groups, the prologue on the
// reference kernels, the product through BLAS and the epilogue as a generated kernel;
// or its members on the reference kernels.
struct Step {
  int group = -1;
  KernelFunction function = nullptr;
  std::vector<int> buffer_nodes;  // generated: the kernel's buffers, in order
  std::vector<int> outputs;       // generated: the nodes the kernel writes
  std::string symbol;             // generated: the kernel's function name
  int matmul = -1;                // gemm: the contraction
  std::vector<int> prologue;      // gemm: members the matmul depends on
  std::optional<Kernel> loop_kernel;  // generated loop kernels: what the tuner re-emits
};

}  // namespace compiled_graph_internal

struct CompiledGraph::State {
  Graph graph;
  FusionPlan plan;
  std::vector<bool> inlined;
  std::vector<Tensor> generator_values;  // constants, and generators reference steps read
  std::vector<compiled_graph_internal::Step> steps;
  std::vector<KernelInfo> kernels;
  std::vector<std::shared_ptr<const JitLibrary>> libraries;
  std::string cache_dir;  // the JIT's ("" its default)
  double compile_ms = 0;
  int64_t jit_compiles = 0;
  bool poison_outputs = false;
  // Intermediates live in one arena at offsets from the liveness plan (-1: not in it).
  MemoryPlan memory;
  std::vector<int64_t> arena_offset;  // per node
  std::vector<std::byte> arena;
  // The last Run's values (tensors, or arena memory where non-null), kept until the next
  // Run so MeasureVariants times kernels on real data.
  std::vector<Tensor> last_tensors;
  std::vector<void*> last_memory;
};

}  // namespace tilefuse
