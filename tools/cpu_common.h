// The CPU backend as the subcommands use it: compile a passed graph with the
// generated-kernel pipeline (backend/cpu/cpu_executable.h), time whole-graph runs, and turn
// per-kernel timings into a Chrome trace or a report.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_executable.h"
#include "passes/pipeline.h"
#include "runtime/trace.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse::cli {

// The graph passes' options for a graph the CPU backend compiles: f32 convolutions kept for
// oneDNN (PassOptions::library_conv) where this build has it.
PassOptions CpuPassOptions();
// The graph passes' options for a graph the CUDA backend compiles (and `explain` plans for a
// GPU): convolutions and pools channels-last (PassOptions::channels_last) unless
// TILEFUSE_CHANNELS_LAST=0, the switch for measuring the NCHW forms against them.
PassOptions CudaPassOptions();
// The graph passes' options for `backend` as `run` names it: cpu and cuda as above;
// reference keeps none; auto as cpu when no GPU answers (what auto then runs on), else as
// cuda (whose graph the CPU fallback also compiles, convolutions through the window rewrite).
PassOptions PassOptionsForBackend(const std::string& backend);

// Compiles `passed` (after RunGraphPasses) for the CPU; the kernel cache is
// `cache_dir`, or when empty $TILEFUSE_CACHE_DIR or ~/.cache/tilefuse. With `tune`, the
// kernels are tuned first (tune/cpu_tuner.h; results in the default tuning cache).
StatusOr<std::unique_ptr<CpuExecutable>> CompileModelForCpu(const Graph& passed, bool fuse,
                                                       const std::string& cache_dir = "", bool tune = false);

// The kernel whose name is `name`, or nullptr.
const KernelInfo* FindKernel(const CpuExecutable& compiled, const std::string& name);

// One complete "kernel" event per timing, with the kernel's kind and whether it was
// generated or ran on the reference kernels.
void RecordKernelTrace(const CpuExecutable& compiled, const std::vector<KernelTiming>& timings,
                       TraceRecorder& recorder);

// "generated" or "reference (<why not>)".
std::string DescribeKernelOrigin(const KernelInfo& kernel);

}  // namespace tilefuse::cli
