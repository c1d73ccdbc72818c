// GpuCompiledGraph: a graph planned, lowered, emitted as CUDA, compiled by NVRTC and
// loaded on the GPU, ready to run.
//
//   Graph ─► PlanFusion ─► BuildCudaProgram ─► NVRTC (cubin cache) ─► cuModuleLoadData
//         ─► memory plan (device arena by liveness) ─► captured as one CUDA graph
//
// Generated kernels and cuBLASLt products run on one stream; a graph without host steps is
// captured once and replayed by every Run. Groups with no CUDA template run their members
// on the host reference kernels with copies (KernelInfo says so; the graph is then not
// captured). Every driver call is checked and reported with the kernel's name.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend/cuda/cuda_program.h"
#include "codegen/cuda_emitter.h"
#include "fusion/fusion_plan.h"
#include "runtime/compiled_graph.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse {

struct GpuCompileOptions {
  bool fuse = true;
  std::set<GroupKind> disabled_kinds;
  std::string cache_dir;        // cubin cache; empty: $TILEFUSE_CACHE_DIR or ~/.cache/tilefuse
  bool poison_outputs = false;  // every kernel output filled with NaN bits before it runs
  // Per generated kernel (by name), the configuration to emit it with (from the tuner).
  std::map<std::string, CudaKernelConfig> configs;
  // How gemm groups run (the GEMM template, cuBLASLt, or the template where it pays).
  GemmPath gemm = GemmPath::kAuto;
  // Per matmul node, the path the tuner measured faster (over `gemm`).
  std::map<int, GemmPath> gemm_path_at;
  // How attention runs (the attention template where it applies, or split into its parts).
  AttentionPath attention = AttentionPath::kTemplate;
  TemplateOverrides overrides;  // the templates' rules overridden (benchmarks)
  // f32 matmuls exact (highest) or on TF32 tensor cores (high).
  MatmulPrecision precision = MatmulPrecision::kHighest;
  // A plan to use instead of planning (the tuner's plan after its fallback decisions).
  const FusionPlan* plan_override = nullptr;
  LoweringFault fault;  // tests only: a deliberate lowering bug (codegen/lowering_fault.h)
};

// One configuration's measurement (time_us absent: it failed to compile or launch).
struct VariantTiming {
  CudaKernelConfig config;
  std::optional<double> time_us;
  std::string error;
};

struct GpuKernelInfo {
  std::string name;
  int group = -1;  // its plan group
  GroupKind kind = GroupKind::kPointwise;
  std::string mode;      // "generated", "gemm template", "attention template", "gemm" (cuBLASLt + epilogue), "host"
  std::string strategy;  // the CUDA template and its configuration
  std::string why_host;  // when mode is "host"
  int threads = 0;
  int64_t blocks = 0;
  int num_nodes = 0;
};

class GpuCompiledGraph {
 public:
  // Unavailable-style errors (no driver, no GPU, no NVRTC) come back as NotFound.
  static StatusOr<std::unique_ptr<GpuCompiledGraph>> Compile(const Graph& graph, const GpuCompileOptions& options);
  ~GpuCompiledGraph();

  // Inputs in graph.inputs() order; outputs copied back to the host. With `timings`, the
  // steps run one by one between device events (not as the captured graph).
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs, std::vector<KernelTiming>* timings = nullptr);
  // One run on device memory the caller owns, queued on the caller's `stream` (any stream
  // of this device's primary context, as PyTorch's current stream), returning before it
  // finishes; inputs then outputs in graph order, dense, sized as the graph's shapes and
  // dtypes say. The kernels read and write the caller's memory in place through a graph
  // captured on those pointers (the first call with new pointers captures one, ~ms; the last
  // 8 are kept); pointers not 256-byte aligned, or a node that is both an input and an output,
  // go through device-to-device copies into the graph's own buffers instead. The graph's
  // intermediates are shared by every call: calls on different streams must be ordered by the
  // caller. A graph with host steps (not captured) is refused (Unimplemented, with the reason).
  Status RunOnDevice(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs, uint64_t stream);
  // Median milliseconds of one whole run on the device (device events, after `warmup`),
  // rotating among `input_sets` copies of the inputs so repeated runs do not read L2.
  StatusOr<double> BenchmarkMs(const std::vector<Tensor>& inputs, int warmup, int repeats, int input_sets);

  // The generated loop kernels (prologues, main kernels, epilogues), for the tuner; the
  // compute-bound templates are not among them (they have their own configurations).
  std::vector<const CudaLaunchable*> launchables() const;
  // Times `configs` of the generated kernel `name` alone on this graph's buffers (run the
  // graph once first so they hold real data): device events, `warmup` launches, median of
  // `repeats`, inputs rotated among copies so repeats do not read L2. A configuration
  // that does not emit, compile or launch gets no time and its error.
  StatusOr<std::vector<VariantTiming>> MeasureVariants(const std::string& name, const std::vector<CudaKernelConfig>& configs,
                                                       int warmup, int repeats);
  // Device-event time of each plan group in one run (µs, plan order).
  StatusOr<std::vector<double>> GroupTimesUs(const std::vector<Tensor>& inputs);
  // The device's identity for tuning keys: name, arch, driver and NVRTC versions.
  std::string device_arch() const;
  int driver_version() const;
  std::string nvrtc_version() const;

  const Graph& graph() const;
  const FusionPlan& plan() const;
  const std::vector<GpuKernelInfo>& kernels() const;
  const CudaProgram& program() const;  // how each group runs (the tuner's gemm path search reads it)
  // Attention candidates the attention template did not take (planned as their parts), with why.
  const std::vector<std::string>& plan_notes() const;
  const std::string& source() const;  // the CUDA translation unit
  std::string device_name() const;
  double compile_ms() const;
  int64_t nvrtc_compiles() const;   // 0 when the cubin came from the cache
  int64_t arena_bytes() const;
  bool captured() const;            // replayed as a CUDA graph

  struct State;

 private:
  explicit GpuCompiledGraph(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tilefuse
