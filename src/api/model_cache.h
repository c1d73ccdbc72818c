// The compiled-model cache: what a compile of a graph with given options made before the
// kernels — the graph after the passes and the backend's fusion plan — kept on disk (the kernel
// cache's folder, support/kernel_cache.h) under a key of the graph as given (its constants'
// bytes included), the options that shape the result and the build id. A second compile of the
// same graph, in this process or the next, skips the passes and the planning; the kernels come
// from the kernel cache as before. The planned-for GPU is not in the key: a plan made on an
// H100 is a legal (if less tuned) plan on an H200 sharing the folder.
//
// Not cached: graphs whose constants exceed kMaxCachedConstantBytes (hashing them would cost
// what it saves: torch.compile on the CPU folds GPT-2's 500 MB of weights), tuned compiles,
// compiles that dump their stages, and the reference interpreter.
#pragma once

#include <optional>
#include <string>

#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"
#include "tilefuse/tilefuse.h"

namespace tilefuse {

inline constexpr int64_t kMaxCachedConstantBytes = int64_t{64} << 20;

struct CachedCompile {
  Graph passed;
  std::string backend;  // the backend that planned it: cuda or cpu
  FusionPlan plan;
};

// Where a compile's entry is kept: the cache folder (empty: the default) and the key.
struct CompiledModelKey {
  std::string directory;
  std::string key;
};

// The key of a compile of `graph` with `options`, or nullopt when such a compile is not cached.
// `gpu`: the GPU the compile would plan for (its name and SMs: the cost model and the tiles
// depend on them), empty where it would compile for none (auto's passes differ too).
std::optional<CompiledModelKey> KeyOfCompile(const Graph& graph, const ModelOptions& options, const std::string& gpu);
// What in `options` (and the environment's pass switches) shapes the passes, the plan or the
// kernels, as words: two compiles with the same words plan a graph alike.
std::string CompileWords(const ModelOptions& options, const std::string& gpu);
// The entry, or nullopt (none, or a damaged one, which is discarded with a warning).
std::optional<CachedCompile> LoadCompiledModel(const CompiledModelKey& key);
void StoreCompiledModel(const CompiledModelKey& key, const Graph& passed, const std::string& backend, const FusionPlan& plan);

}  // namespace tilefuse
