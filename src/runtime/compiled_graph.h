// CompiledGraph: a graph planned, lowered, code-generated and loaded, ready to run.
//
//   Graph ──RunGraphPasses──► PlanFusion ──► per group: LowerGroup → EmitCpp → HostJit
//
// gemm groups run their prologue (casts and views of the operands) as generated kernels,
// their product through OpenBLAS on the operands where they live, and their epilogue as
// a generated kernel; attention groups as one flash-attention kernel (codegen/attention_lower).
// Groups no template expresses (opaque ops, the rare reduction shape LowerGroup refuses,
// attention shapes LowerAttention refuses) run their member ops one by one on the
// reference kernels; KernelInfo says which is which, so nothing is silently reported
// as fused.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codegen/cpp_kernel_config.h"
#include "codegen/kernel.h"
#include "codegen/lowering_fault.h"
#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse {

struct CompileOptions {
  bool fuse = true;                   // false: every op its own kernel (views folded)
  std::set<GroupKind> disabled_kinds;
  std::string device = "cpu";         // cost model used by the planner
  std::string cache_dir;              // empty: $TILEFUSE_CACHE_DIR or ~/.cache/tilefuse
  bool poison_outputs = false;        // fill kernel outputs with NaN bits first (tests)
  // Compile this plan (checked by VerifyPlan) instead of planning; fuse, disabled_kinds
  // and device are then unused. For one graph: the autotuner's fallbacks (tune/fallback.h).
  const FusionPlan* plan_override = nullptr;
  // Per generated loop kernel (by name), the configuration to emit it with (the tuner's);
  // kernels not named keep the default.
  std::map<std::string, CppKernelConfig> configs;
  LoweringFault fault;  // tests only: a deliberate lowering bug (codegen/lowering_fault.h)
};

struct KernelInfo {
  std::string name;
  GroupKind kind = GroupKind::kPointwise;
  bool generated = false;   // false: runs on the reference kernels
  std::string why_not;      // when not generated, or when a gemm prologue part is not
  std::string source;       // generated C++ (empty when not generated); gemm: prologue kernels first
  int num_nodes = 0;
  int num_reference_nodes = 0;  // members run on the reference kernels (all when not generated)
  std::vector<std::string> prologue_kernels;  // gemm: the loop kernels materialising the product's operands
};

// One configuration's measurement (time_us absent: it failed to compile or run).
struct CppVariantTiming {
  CppKernelConfig config;
  std::optional<double> time_us;
  std::string error;
};

struct KernelTiming {
  std::string name;
  double start_us = 0, duration_us = 0;
};

class CompiledGraph {
 public:
  // `graph` must have been through RunGraphPasses (no composite ops).
  static StatusOr<std::unique_ptr<CompiledGraph>> Compile(const Graph& graph, const CompileOptions& options);
  // Several graphs through one compiler run (fuzzing compiles thousands).
  static StatusOr<std::vector<std::unique_ptr<CompiledGraph>>> CompileBatch(const std::vector<Graph>& graphs,
                                                                            const CompileOptions& options);
  ~CompiledGraph();

  // Inputs in graph.inputs() order (dtype and shape checked); one tensor per output.
  // With `timings`, each kernel's wall time is appended. Intermediates live in one
  // arena owned by this object, so one Run at a time.
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs, std::vector<KernelTiming>* timings = nullptr);

  // The tuner's side (tune/cpu_tuner.h). The lowered loop kernel named `name` (a group's,
  // or a gemm prologue's: what its configurations apply to); nullptr for attention
  // kernels, the reference steps, unknown names.
  const Kernel* LoopKernel(const std::string& name) const;
  // Times `configs` of the loop kernel `name` alone on this graph's buffers (Run the graph
  // once first so they hold its data): every variant from one compiler run, steady clock,
  // `warmup` calls, median of `repeats`, inputs rotated through copies larger than the
  // last-level cache; a winner >15% faster than configs[0] (the default) is measured
  // again with it. A variant that fails to compile gets no time and its error.
  StatusOr<std::vector<CppVariantTiming>> MeasureVariants(const std::string& name, const std::vector<CppKernelConfig>& configs,
                                                          int warmup, int repeats);
  // Each plan group's wall time in one run (µs, plan order; median of a few runs).
  StatusOr<std::vector<double>> GroupTimesUs(const std::vector<Tensor>& inputs);

  const Graph& graph() const;
  const FusionPlan& plan() const;
  const std::vector<KernelInfo>& kernels() const;
  double compile_ms() const;
  int64_t jit_compiles() const;  // how many kernels needed the host compiler (not the cache)
  int64_t arena_bytes() const;    // intermediate memory, from the liveness plan

  struct State;  // defined in compiled_graph.cc

 private:
  explicit CompiledGraph(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tilefuse
