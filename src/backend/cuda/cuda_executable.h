// CudaExecutable: a graph compiled for the GPU by the driver (driver/driver.h) through the
// CUDA backend (backend/cuda/cuda_backend.h), loaded on the GPU, ready to run.
//
// Generated kernels and cuBLASLt products run on one stream; a graph without host steps is
// captured once and replayed by every Run. Groups with no CUDA template run their members
// on the host reference kernels with copies (KernelInfo says so; the graph is then not
// captured). Every driver call is checked and reported with the kernel's name.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend/cuda/cuda_program.h"
#include "codegen/cuda/cuda_emitter.h"
#include "fusion/fusion_plan.h"
#include "runtime/compile_options.h"
#include "runtime/executable.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse {

struct CudaCompileOptions : CompileOptions {
  int device_ordinal = 0;  // which GPU of the machine (CUDA's numbering)
  // Per generated loop kernel (by KernelFingerprint), the configuration to emit it with
  // (the tuner's); other kernels keep the default.
  std::map<std::string, CudaKernelConfig> configs;
  // How gemm groups run (the GEMM template, cuBLASLt, or the template where it pays).
  GemmPath gemm = GemmPath::kAuto;
  // Per matmul node, the path the tuner measured faster (over `gemm`).
  std::map<int, GemmPath> gemm_path_at;
  // How attention runs (the attention template where it applies, or split into its parts).
  AttentionPath attention = AttentionPath::kTemplate;
  TemplateOverrides overrides;  // the templates' rules overridden (benchmarks)
  // Per template problem (TemplateKernel::Fingerprint), the tuner's configuration.
  std::map<std::string, nlohmann::json> template_configs;
  // f32 matmuls exact (highest) or on TF32 tensor cores (high).
  MatmulPrecision precision = MatmulPrecision::kHighest;
  // Template kernels whose best form takes seconds to compile (TemplateKernel::StandIn) and
  // is not in the kernel cache run a stand-in that compiles in a fraction of that time, while
  // the best form compiles on other threads; the executable swaps it in when it is ready
  // (at a run's start) or when asked to (FinishCompiles), and the cache keeps it for the next
  // compile. Off: every kernel compiled before the compile returns.
  bool background_compile = false;
  // Those kernels run their stand-ins, and their own forms are never compiled: the fastest
  // compile, and how the checks run the stand-ins (`tilefuse run --stand-ins`).
  bool stand_ins_only = false;
};

// One configuration's measurement (time_us absent: it failed to emit, compile or launch).
struct VariantTiming {
  nlohmann::json config;
  std::optional<double> time_us;
  std::string error;
};

struct CudaKernelInfo {
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

class CudaExecutable : public Executable {
 public:
  struct State;  // defined in cuda_executable_state.h
  explicit CudaExecutable(std::unique_ptr<State> state);  // made by CudaBackend::Load
  ~CudaExecutable() override;
  State* state() { return state_.get(); }  // for CudaBackend::Load

  std::string_view backend() const override { return "cuda"; }
  // Inputs uploaded into the graph's own buffers, one RunOnDevice on them on tilefuse's
  // stream, outputs copied back to the host. With `timings`, the steps run one by one
  // between device events (not as the captured graph).
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs, std::vector<KernelTiming>* timings = nullptr) override;
  // One run on device memory the caller owns, queued on the caller's `stream` (any stream
  // of this device's primary context, as PyTorch's current stream), returning before it
  // finishes; inputs then outputs in graph order, dense, sized as the graph's shapes and
  // dtypes say. The kernels read and write the caller's memory in place through a graph
  // captured on those pointers (the first call with new pointers captures one, ~ms; the last
  // 8 are kept); pointers not 256-byte aligned, or a node that is both an input and an output,
  // go through device-to-device copies into the graph's own buffers instead. The graph's
  // intermediates are shared by every call: calls on different streams must be ordered by the
  // caller. An output may be given an input's pointer (an input updated in place): written
  // there directly where OutputMayOverwriteInput holds, else into the graph's own buffer and
  // copied there after the run. A graph with host steps (not captured) is refused
  // (Unimplemented, with the reason).
  Status RunOnDevice(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs, uint64_t stream);
  // Median milliseconds of one whole run on the device (device events, after `warmup`),
  // rotating among `input_sets` copies of the inputs so repeated runs do not read L2.
  StatusOr<double> BenchmarkMs(const std::vector<Tensor>& inputs, int warmup, int repeats, int input_sets) override;
  // Kernels running stand-ins while their own form compiles in the background
  // (CudaCompileOptions::background_compile); a run swaps them out when that compile has
  // ended, FinishCompiles when it ends (Run with timings, BenchmarkMs and MeasureVariants
  // call it). Then the graphs captured with the stand-ins are captured again and kernels()
  // says what runs now; kernel_swaps() counts such changes.
  Status FinishCompiles() override;
  int pending_compiles() const;
  int kernel_swaps() const;

  // The generated loop kernels (prologues, main kernels, epilogues), for the tuner; the
  // compute-bound templates are not among them (they have their own configurations), nor
  // kernels launched together (each part keeps the form it has).
  std::vector<const CudaLaunchable*> launchables() const;
  // Times `configs` of kernel `name` alone on this graph's buffers (run the graph once
  // first so they hold real data): device events, `warmup` launches, median of `repeats`,
  // inputs rotated among copies so repeats do not read L2. A template's kernel is re-emitted
  // from its problem (CudaLaunchable::template_kernel, its configurations' JSON form), a loop
  // kernel from its Kernel (CudaConfigToJson's form). A configuration that does not emit,
  // compile or launch gets no time and its error.
  StatusOr<std::vector<VariantTiming>> MeasureVariants(const std::string& name, const std::vector<nlohmann::json>& configs, int warmup,
                                                       int repeats);
  // The device's identity for tuning keys: name, arch, driver and NVRTC versions.
  std::string device_arch() const;
  int sm_count() const;
  int driver_version() const;
  std::string nvrtc_version() const;

  const Graph& graph() const override;
  const FusionPlan& plan() const override;
  int64_t arena_bytes() const override;
  const std::vector<CudaKernelInfo>& kernels() const;
  const CudaProgram& program() const;  // how each group runs (the tuner's gemm path search reads it)
  // Attention candidates the attention template did not take (planned as their parts), with why.
  const std::vector<std::string>& plan_notes() const;
  const std::string& source() const;  // every kernel's CUDA in one text, for people to read
  std::string device_name() const;
  // Compile units (one per distinct kernel) NVRTC compiled, and those the cache held.
  int64_t nvrtc_compiles() const;
  int64_t nvrtc_cache_hits() const;
  bool captured() const;            // replayed as a CUDA graph
  // How RunOnDevice's runs went so far (CompiledModel::DeviceRunCounts says what each counts).
  struct RunCounts {
    int64_t replays = 0, one_by_one = 0, through_buffers = 0, captures = 0, output_copies = 0, staged_copies = 0;
    // RunOnDevice's host time, and of it in the driver's launches, in deciding what to stage
    // and copy, and in finding the captured graph (CompiledModel::DeviceRunCounts).
    int64_t host_ns = 0, host_ns_in_launches = 0, host_ns_deciding = 0, host_ns_finding_graph = 0;
  };
  RunCounts device_run_counts() const;
  // Whether RunOnDevice may write graph output `output` into the memory of graph input
  // `input` (both positions) where the caller passes that input's pointer for it: an input
  // updated in place (backend/cuda/cuda_in_place_outputs.h).
  bool OutputMayOverwriteInput(int output, int input) const;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace tilefuse
