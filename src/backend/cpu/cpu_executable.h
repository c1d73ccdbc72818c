// CpuExecutable: a graph compiled for the CPU by the driver (driver/driver.h) through the
// CPU backend (backend/cpu/cpu_backend.h), ready to run.
//
// gemm groups run their prologue (casts and views of the operands) as generated kernels,
// their product through BLAS on the operands where they live, and their epilogue as
// a generated kernel; attention groups as one flash-attention kernel (codegen/attention_lower).
// Attention shapes LowerAttention refuses are planned as their parts (CpuBackend::Plan).
// Groups no template expresses (opaque ops, the rare reduction shape LowerGroup refuses)
// run their member ops one by one on the reference kernels; KernelInfo says which is
// which, so nothing is silently reported as fused.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codegen/cpp/cpp_kernel_config.h"
#include "codegen/kernel.h"
#include "codegen/lowering_fault.h"
#include "fusion/fusion_plan.h"
#include "runtime/compile_options.h"
#include "runtime/executable.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse {

struct CpuCompileOptions : CompileOptions {
  std::string device = "cpu";  // cost model used by the planner
  // Per generated loop kernel (by KernelFingerprint), the configuration to emit it with
  // (the tuner's); other kernels keep the default.
  std::map<std::string, CppKernelConfig> configs;
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
  // gemm groups anchored on a Conv: what runs it ("oneDNN brg:avx512_core, nchw, post-ops:
  // relu"), and why the epilogue stayed a generated kernel where it did.
  std::string library;
};

// One configuration's measurement (time_us absent: it failed to compile or run).
struct CppVariantTiming {
  CppKernelConfig config;
  std::optional<double> time_us;
  std::string error;
};

class CpuExecutable : public Executable {
 public:
  struct State;  // defined in cpu_executable_state.h
  explicit CpuExecutable(std::unique_ptr<State> state);  // made by CpuBackend::Load
  ~CpuExecutable() override;

  std::string_view backend() const override { return "cpu"; }
  // Intermediates live in one arena owned by this object, so one Run at a time. Each
  // step's timing is steady-clock wall time.
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs, std::vector<KernelTiming>* timings = nullptr) override;
  StatusOr<double> BenchmarkMs(const std::vector<Tensor>& inputs, int warmup, int repeats, int input_sets) override;

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

  const Graph& graph() const override;
  const FusionPlan& plan() const override;
  int64_t arena_bytes() const override;
  const std::vector<KernelInfo>& kernels() const;
  // What the backend planned differently from the planner, and why ("attention at %12 split
  // into its parts: ..."): attention groups its flash kernel does not take.
  const std::vector<std::string>& plan_notes() const;
  // One line per group whose ops (all, or a gemm's prologue part) run on the reference
  // interpreter because no generated kernel or library takes them: the group, its kind, the
  // ops and why. What `run`, `bench`, `demo` and Python warn of, and --strict refuses.
  std::vector<std::string> ReferenceWarnings() const;
  int64_t jit_compiles() const;  // how many kernels needed the host compiler (not the cache)
  int team_size() const;         // the OpenMP team of a run's parallel regions (0: OpenMP's default)

 private:
  std::unique_ptr<State> state_;
};

}  // namespace tilefuse
