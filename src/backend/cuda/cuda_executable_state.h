// CudaExecutable's insides, shared by cuda_backend.cc (lower, build, load) and
// cuda_executable.cc (run, measure). Not for other users.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cublaslt_matmul.h"
#include "backend/cuda/cuda_compile_units.h"
#include "backend/cuda/cuda_driver.h"
#include "backend/cuda/cuda_executable.h"
#include "backend/cuda/cuda_handles.h"
#include "backend/cuda/cuda_modules.h"
#include "backend/cuda/cuda_program.h"
#include "backend/cuda/device_allocator.h"
#include "backend/cuda/device_constants.h"
#include "backend/cuda/staged_copies.h"
#include "backend/cuda/volatile_pointers.h"
#include "runtime/memory_plan.h"

namespace tilefuse {

// cuBLASLt's workspace.
inline constexpr int64_t kCublasLtWorkspaceBytes = 32 << 20;

struct CudaExecutable::State {
  CudaDevice* device = nullptr;
  DeviceAllocator* allocator = nullptr;
  Graph graph;
  FusionPlan plan;
  std::vector<bool> inlined;
  CudaProgram program;
  std::vector<CudaKernelInfo> kernels;
  CudaModules modules;                          // a module per compiled unit
  std::map<std::string, CUfunction> functions;  // by kernel name
  std::unique_ptr<LtMatmul> lt;
  MemoryPlan memory;
  DeviceBuffer arena, workspace;
  DeviceBuffer scratch;  // the kernels' scratch memory (LaunchSpec::scratch_bytes), zeroed once
  int64_t scratch_bytes = 0;
  mutable DeviceBuffer head_start;  // memset before timed steps (HeadStart)
  std::vector<DeviceBuffer> owned;
  // The graph's constants on the device, shared with other executables holding the same host
  // bytes (backend/cuda/device_constants.h).
  std::vector<std::shared_ptr<const SharedDeviceConstant>> constants;
  std::vector<CUdeviceptr> address;  // per node; 0: not on the device
  bool has_host_steps = false;
  bool poison = false;
  bool tf32_matmul = false;  // --precision high
  CudaGraphExec captured;
  // RunOnDevice's graphs captured on callers' pointers (inputs then outputs), newest last.
  std::vector<std::pair<std::vector<uint64_t>, CudaGraphExec>> caller_graphs;
  int caller_captures = 0;  // how many RunOnDevice has captured (bounded: see there)
  int64_t caller_replays = 0;  // launches of caller_graphs
  CudaExecutable::RunCounts run_counts;  // RunOnDevice's runs
  // Pointer sets RunOnDevice has launched directly once (captured when seen again), newest last.
  std::vector<std::vector<uint64_t>> caller_seen;
  // RunOnDevice's pointers in order (inputs, then outputs) as nodes. A node's first pointer
  // is where the kernels read or write it in place; an output whose node came before (an
  // input returned, the same node twice) or that no kernel writes (a constant, a value
  // computed on the host at compile) is copied there after the run. Fixed at compile.
  std::vector<int> caller_nodes;
  struct CallerCopy {
    size_t to = 0;       // the output's index among caller_nodes
    int from = -1;       // the caller pointer (index among caller_nodes) holding the value; -1: the node's own buffer
  };
  std::vector<CallerCopy> caller_copies;
  std::vector<uint64_t> own_pointers;  // the graph's own buffers of caller_nodes (`captured` runs on them)
  // RunOnDevice's small values whose caller pointers are new every call (a decode step's token
  // ids and position): read and written through the graph's own buffers, so that the other
  // pointers key a captured graph that replays (volatile_pointers.h says which).
  VolatilePointers volatile_pointers;
  // Notes this call's pointers; whether this call stages the entries volatile_pointers marks.
  bool NoteVolatilePointers(const std::vector<uint64_t>& key);
  // Per output of RunOnDevice's call: whether it was given the pointer of an input it may not
  // overwrite (OutputMayOverwriteInput, remembered per pair in `may_overwrite`), so the run
  // writes it into the model's own buffer and copies it there after.
  std::vector<bool> DivertedOutputs(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs);
  std::map<std::pair<int, int>, bool> may_overwrite;
  // RunOnDevice's last run that staged or diverted entries, as it decided them. A call whose
  // pointers are that run's wherever it did not stage them (a decode step: only its token
  // ids', position's and logits' pointers change) decides the same, and takes these with the
  // staged entries' new pointers (RepeatStagedRun) rather than working them out again (the
  // sort and lookups over every entry, ~225 of them in GPT-2's step). Taken for most of the
  // runtime's own host time a step (~28 µs on an H100 host); it was not: no change beyond the
  // spread (2026-12-06). RunCounts' host_ns_deciding and host_ns_finding_graph are to say where.
  struct StagedRun {
    std::vector<uint64_t> key;     // the call's pointers (inputs, then outputs)
    std::vector<bool> volatiles;   // per entry: staged as volatile_pointers marks it (its pointer may change)
    std::vector<uint64_t> keyed;   // the pointers RunInPlace ran on
    std::vector<StagedCopy> before, after;  // after: the staged or diverted outputs' copies, then the returned ones
    // The volatile entry (key's index) each copy of `before` reads, and (copy, entry) of those
    // of `after` that write one.
    std::vector<size_t> before_entries;
    std::vector<std::pair<size_t, size_t>> after_entries;
    int64_t staged_copies = 0, output_copies = 0;  // run_counts' additions a run
  };
  std::optional<StagedRun> staged_run;
  // Runs `staged_run` again for `key` (of a call that stages volatile entries) where it decides
  // the same; false (nothing queued) where it may not.
  StatusOr<bool> RepeatStagedRun(const std::vector<uint64_t>& key, size_t inputs, CUstream on);
  std::string cache_dir, nvrtc_version;
  std::vector<std::string> plan_notes;  // attention candidates split into their parts, and why
  int64_t nvrtc_compiles = 0, nvrtc_cache_hits = 0;  // units compiled / found in the cache
  // Template kernels running their stand-ins while their best forms compile in `background`
  // (CudaCompileOptions::background_compile): the group (program.groups' index) and the best
  // form's launchable, swapped in by AdoptBackgroundKernels.
  struct Deferred {
    size_t group = 0;
    CudaLaunchable best;
  };
  std::vector<Deferred> deferred;
  std::shared_ptr<const BackgroundCubins> background;  // null: nothing compiling
  std::vector<CudaModules> later_modules;              // the background compiles' modules
  int kernel_swaps = 0;                                 // how many times the kernels changed

  const CudaDriverApi& api() const { return device->api(); }
  int64_t Bytes(int node) const { return NumElements(graph.node(node).shape) * DTypeSize(graph.node(node).dtype); }

  // Launches generated kernel `k` on `stream` with the node addresses `at`; programmatically
  // (LaunchKernel) unless it is the model's first, whose predecessor may be the caller's.
  Status Launch(const CudaLaunchable& k, const std::vector<CUdeviceptr>& at, CUstream stream, bool first = false) const;
  // The product of a gemm group through cuBLASLt (with its own epilogue, if any), on `stream`.
  Status Matmul(const CudaGroupProgram& program, const std::vector<CUdeviceptr>& at, CUstream stream) const;
  // A node's value on the host (for host steps and uploading generators).
  StatusOr<Tensor> HostValue(int node, std::map<int, Tensor>& local) const;
  Status RunHostGroup(const CudaGroupProgram& p, const std::vector<CUdeviceptr>& at) const;
  void HeadStart() const;
  // Every step queued on `stream` (tilefuse's, or a caller's for RunOnDevice's direct
  // launches); with `timings` (tilefuse's stream only), each between device events.
  Status Enqueue(const std::vector<CUdeviceptr>& at, std::vector<KernelTiming>* timings, CUstream stream) const;
  // RunOnDevice's run on aligned caller pointers (inputs, then outputs), less caller_copies.
  Status RunInPlace(const std::vector<uint64_t>& key, CUstream on);
  // The steps captured as a CUDA graph on the addresses `at`; instantiated, or written into
  // `reuse` (a graph of the same steps on other addresses, no longer wanted) where the driver
  // can update it in place, which costs less than instantiating (launches of it already queued
  // keep what they were given, as with the driver's per-node updates).
  StatusOr<CudaGraphExec> Capture(const std::vector<CUdeviceptr>& at, CudaGraphExec reuse = {}) const;
  // The background compile's kernels in place of their stand-ins, when it has ended (or,
  // with `wait`, once it ends); the graphs captured with the stand-ins captured again. A
  // failed compile leaves the stand-ins running, said in plan_notes.
  Status AdoptBackgroundKernels(bool wait);
};

// What each group runs, for reports (CudaExecutable::kernels).
std::vector<CudaKernelInfo> DescribeKernels(const CudaProgram& program, const FusionPlan& plan);

}  // namespace tilefuse
