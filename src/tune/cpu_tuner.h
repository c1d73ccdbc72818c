// The autotuner for the CPU backend, the same shape as the CUDA one (tune/gpu_tuner.h)
// over the generated C++ kernels' parameters (tune/cpu_search_space.h):
//
//   compile (default configs) → run once (real data in every buffer)
//   → per loop kernel: search space, then tune/tuner_core.h (cache, shortlist, measure
//     with CpuExecutable::MeasureVariants, record, fastest wins)
//   → recompile with the winners → time each fused group against its unfused ops
//   → replan the groups that lose (tune/measured_fallback.h) → the final CpuExecutable
//
// Tuning key: device = the CPU's model name, arch = the ISA extensions -march=native
// compiles for, compiler = the host compiler HostJit runs, kernel hash = the default
// source with the kernel's name blanked (as on the GPU).
#pragma once

#include <memory>

#include "backend/cpu/cpu_executable.h"
#include "tune/tuner_core.h"

namespace tilefuse {

// Tunes `graph` (after RunGraphPasses) for the CPU; returns the tuned compiled graph and
// what was done.
StatusOr<std::unique_ptr<CpuExecutable>> TuneForCpu(const Graph& graph, const CpuCompileOptions& options,
                                                    const TuneOptions& tune, TuneReport* report);

// "cpu: <model name>", the tuning key's device (and what `tilefuse tune` prints).
std::string CpuTuningDeviceName();

}  // namespace tilefuse
