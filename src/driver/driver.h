// The compiler driver: one path from a graph to an executable, for every backend.
//
//   model ──ImportOnnx──► Graph ──RunGraphPasses──► Graph (primitives)   (the callers: frontend/,
//                                                    passes/; dump: the IR after each pass)
//         ──Backend::Plan──► FusionPlan     verified (VerifyPlan)   dump: plan.txt
//         ──Backend::Lower──► kernels       Kernel IR + templates   verified (VerifyKernel),
//                                                                   dump: kernels.ir.txt
//                                           their source            dump: kernels.cpp / .cu
//         ──Backend::Build──► object code   one compiler run for every graph of a batch
//         ──Backend::Load───► Executable    memory planned, kernels linked, constants placed
//
// The stages are the Backend interface's (runtime/backend.h); what is the same for every
// backend (the order, the plan verifier, the dumps, timing the compile) is here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_executable.h"
#include "backend/cuda/cuda_executable.h"
#include "runtime/backend.h"
#include "runtime/compile_options.h"
#include "runtime/executable.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

// Plan and lower only (what `compile` reports and tests read): the lowered graphs, in order.
// `plan_ms`, if given, receives the milliseconds spent planning (the rest is lowering).
StatusOr<std::vector<std::unique_ptr<LoweredGraph>>> LowerGraphs(Backend& backend, const std::vector<Graph>& graphs,
                                                                 const CompileOptions& options, double* plan_ms = nullptr);

// Every stage up to the compiler, loading nothing (a machine without the target can run
// this: `tilefuse compile --backend cuda`).
struct BuiltGraphs {
  std::vector<std::unique_ptr<LoweredGraph>> lowered;
  std::unique_ptr<ObjectCode> code;
};
StatusOr<BuiltGraphs> BuildGraphs(Backend& backend, const std::vector<Graph>& graphs, const CompileOptions& options);

// Every stage. The graphs share one compiler run (fuzzing compiles thousands); each gets
// its own executable. The graphs must have been through RunGraphPasses.
StatusOr<std::vector<std::unique_ptr<Executable>>> CompileGraphs(Backend& backend, const std::vector<Graph>& graphs,
                                                                 const CompileOptions& options);
StatusOr<std::unique_ptr<Executable>> CompileGraph(Backend& backend, const Graph& graph, const CompileOptions& options);

// The plan the backend of `options.device` (cpu, h100-sxm, h200) would make, its
// capabilities included, without compiling anything (`explain`): the CPU's (attention its
// flash kernel refuses planned as its parts, PlanFusionForCpu), or the CUDA backend's for
// sm_90a with its default options (attention is not re-planned: explain shows the planner's
// attention groups).
StatusOr<FusionPlan> PlanForDevice(const Graph& graph, PlannerOptions options, bool tf32 = false);

// The same driver with the backend made from its options, typed for callers that use what
// only that backend's executable has (the tuners, the Python package's device runs).
StatusOr<std::unique_ptr<CpuExecutable>> CompileForCpu(const Graph& graph, const CpuCompileOptions& options);
StatusOr<std::vector<std::unique_ptr<CpuExecutable>>> CompileBatchForCpu(const std::vector<Graph>& graphs,
                                                                         const CpuCompileOptions& options);
// Unavailable-style errors (no driver, no GPU, no NVRTC) come back as NotFound.
StatusOr<std::unique_ptr<CudaExecutable>> CompileForCuda(const Graph& graph, const CudaCompileOptions& options);

}  // namespace tilefuse
