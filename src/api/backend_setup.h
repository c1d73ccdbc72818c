// What a compile sets up per backend before the driver runs: the graph passes' options,
// the CPU compile (tuned or not), the CUDA options from the facade's words, and the check
// that a GPU ordinal exists. Shared by the facade (api/compiled_model.cc) and the CLI's
// facade's other files (src/api) and the fuzzer, which drives the backends itself.
#pragma once

#include <memory>
#include <string>

#include "backend/cpu/cpu_executable.h"
#include "backend/cuda/cuda_executable.h"
#include "passes/pipeline.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

// The graph passes' options for a graph the CPU backend compiles: f32 convolutions kept for
// oneDNN (PassOptions::library_conv) where this build has it.
PassOptions CpuPassOptions();
// The graph passes' options for a graph the CUDA backend compiles (and `explain` plans for a
// GPU): convolutions and pools channels-last (PassOptions::channels_last) unless
// TILEFUSE_CHANNELS_LAST=0, the switch for measuring the NCHW forms against them; f32 weights
// stored K-major for the GEMM template's TF32 and 3xTF32 forms.
PassOptions CudaPassOptions();
// The graph passes' options for `backend` as `run` names it: cpu and cuda as above;
// reference keeps none; auto as cpu when GPU `device` does not answer (what auto then runs
// on), else as cuda (whose graph the CPU fallback also compiles, convolutions through the
// window rewrite).
PassOptions PassOptionsForBackend(const std::string& backend, int device = 0);

// Compiles `passed` (after RunGraphPasses) for the CPU; the kernel cache is `cache_dir`,
// or when empty $TILEFUSE_CACHE_DIR or ~/.cache/tilefuse. With `tune`, the kernels are
// tuned first (tune/cpu_tuner.h), the results in the default tuning cache even when
// `cache_dir` is a fresh one (a benchmark's cold compile keeps what tuning learnt). The
// driver's stage dumps go to `dump_dir` (empty: none). `plan`, if given, is compiled instead of
// planning (the compiled-model cache's).
StatusOr<std::unique_ptr<CpuExecutable>> CompileModelForCpu(const Graph& passed, bool fuse, const std::string& cache_dir = "",
                                                            bool tune = false, const std::string& dump_dir = "",
                                                            const FusionPlan* plan = nullptr);

// The matmul precision `run --precision` names (highest, high), or the error naming the word.
StatusOr<MatmulPrecision> ParseMatmulPrecision(const std::string& word);

// Sets `options`' gemm path, attention path and matmul precision from `run`'s words
// (auto|template|library, template|overlap|serial|split, highest|high); InvalidArgument
// naming the choices for any other word.
Status ApplyCudaPathWords(const std::string& gemm, const std::string& attention, const std::string& precision,
                          CudaCompileOptions& options);
// The templates' settings from the CLI's words: the GEMM template's form (rule, tail,
// overlap, pingpong, streamk, skinny) and clusters (0: the rule, 1, 2), the depthwise
// template (on, off, VxP).
Status ApplyTemplateWords(const std::string& gemm_form, int gemm_cluster, const std::string& depthwise, TemplateOverrides& overrides);

// OK when this machine has GPU `device` (CUDA's numbering); otherwise NotFound naming how
// many it has (InvalidArgument for a negative ordinal).
Status CheckGpuOrdinal(int device);

// What a device ordinal means for `backend` (auto, cuda, cpu, reference): 0, the default,
// always fits (GPU 0 where there is one; nothing on the host). Another ordinal asks for that
// GPU: it must exist, under auto too (falling back to the CPU would hide the mistake), and
// the host backends refuse it (InvalidArgument).
Status CheckDeviceForBackend(int device, const std::string& backend);

}  // namespace tilefuse
