// A model's CUDA kernels compiled as one NVRTC program per distinct kernel, in parallel,
// each cubin cached on its own.
//
// Why not one translation unit per model: one NVRTC run is serial (a ResNet-50 in bf16
// took 19 s cold on a 16-core host), and a cache entry keyed by the whole unit is lost
// when any kernel changes. One unit per kernel compiles on every core, a changed kernel
// recompiles alone, and identical kernels share a unit: the kernel's name is the only
// thing that tells a layer's kernel from the same kernel of the next identical layer (or
// of another model), so each unit names its function by what it computes:
//
//   tf_group7_pointwise, tf_group12_pointwise  (same body)  ─┐
//                                                              ├─> unit "tf_pointwise_<hash>"
//   g2_tf_group3_pointwise (another graph, same body)       ─┘     one NVRTC run, one cubin
//
// The loader (backend/cuda/cuda_modules.h) loads every unit's cubin and finds each kernel
// by its own name (a unit lists the kernels it serves). Reports keep the kernels' own
// names (PtxasLog).
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backend/cuda/nvrtc_compiler.h"
#include "codegen/cuda/cuda_emitter.h"
#include "tilefuse/status.h"

namespace tilefuse {

struct CudaCompileUnit {
  std::string entry;                 // the __global__ function's name inside the unit
  std::string source;                // a whole translation unit (CudaTranslationUnit)
  std::vector<std::string> kernels;  // the kernels it serves, by their own names
};

// One unit per distinct kernel body (the name left out), in first-appearance order. Two
// kernels of one name must be one kernel (CHECKed).
std::vector<CudaCompileUnit> SplitIntoCompileUnits(const std::vector<CudaKernelSource>& kernels);

// The compiled units of a build: what the loader loads and reports print.
struct CudaCubins {
  std::vector<CudaCompileUnit> units;
  std::vector<CubinResult> cubins;  // per unit
  int64_t compiles = 0;             // units NVRTC compiled (the others came from the cache)

  // ptxas's report of every kernel under its own name (a unit's report once per kernel it
  // serves), in unit order: what one translation unit's report looked like.
  std::string PtxasLog() const;
  int64_t bytes() const;
  int64_t cache_hits() const { return static_cast<int64_t>(cubins.size()) - compiles; }
};

// Threads for `units` compiles: $TILEFUSE_NVRTC_THREADS when set (1: serial), else the
// host's cores, at most 32 (an NVRTC run holds ~40 MB); never more than the units.
int NvrtcThreads(size_t units);

// Every unit, on NvrtcThreads threads. A failing unit fails the build: the error names
// its kernels and carries NVRTC's log (the first failing unit in order; units compiled
// fine are cached, a failed one leaves nothing in the cache).
StatusOr<CudaCubins> CompileUnits(NvrtcCompiler& nvrtc, std::vector<CudaCompileUnit> units, const std::string& arch);

// One unit compiling on a thread of its own. A unit already compiling in this process for
// another build is joined, not compiled again (a second compile of a model, or another
// graph of it, would otherwise start it anew before the first has reached the cache).
// Whoever releases the last reference waits for the compile to end, so its cubin always
// reaches the cache.
struct UnitCompile {
  std::shared_future<StatusOr<CubinResult>> cubin;
};

// Units compiling in the background while the kernels they serve run stand-ins
// (CudaCompileOptions::background_compile).
struct BackgroundCubins {
  std::set<std::string> kernels;                         // the kernels the units serve, by their own names
  std::vector<CudaCompileUnit> units;
  std::vector<std::shared_ptr<const UnitCompile>> compiles;  // per unit
  bool Ready() const;  // every unit's compile has ended
  // The units' cubins, waiting for them; the first failing unit's error (naming its kernels).
  StatusOr<CudaCubins> Get() const;
};
std::shared_ptr<const BackgroundCubins> CompileUnitsInBackground(const NvrtcCompiler& nvrtc, std::vector<CudaCompileUnit> units,
                                                                 const std::string& arch);

// Every unit on its own: its cubin or its error, so one bad unit does not sink the others
// (the tuner's variants).
std::vector<StatusOr<CubinResult>> CompileEachUnit(NvrtcCompiler& nvrtc, const std::vector<CudaCompileUnit>& units,
                                                   const std::string& arch);

}  // namespace tilefuse
