// Differential fuzzing: random graphs (testing/random_graph.h) compiled for the CPU must
// give the f64 reference interpreter's outputs on random inputs, with kernel outputs
// poisoned first. Graphs compile in batches (one compiler run per batch). One judge for
// the unit test (src/runtime/differential_fuzz_test.cc) and `tilefuse fuzz`.
//
// The judge: outputs are compared norm-wise (support/tensor_compare.h) with bounds that
// follow the least precise float dtype in the graph; a graph whose reference outputs
// move beyond those bounds when its inputs move by a few f32 ulps is ill-conditioned
// (a layer norm of rounding noise) and is skipped, since comparing two correct
// implementations on it proves nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tilefuse/dtype.h"
#include "tilefuse/status.h"

namespace tilefuse {

struct DifferentialFuzzOptions {
  uint64_t first_seed = 0;  // graphs first_seed, first_seed + 1, ...
  int count = 1;
  bool fuse = true;
  // Half types are left out by default: kernels keep them in f32 between ops while the
  // reference rounds every node, and ill-conditioned ops (sqrt near 0) amplify that
  // legitimate difference beyond any fixed tolerance.
  std::vector<DType> dtypes = {DType::kF32, DType::kF64};
  int batch_size = 150;    // graphs per compiler run
  std::string backend = "cpu";  // "cpu" (host compiler, batched) or "cuda" (NVRTC, a graph at a time)
  std::string cache_dir;   // empty: $TILEFUSE_CACHE_DIR or ~/.cache/tilefuse
};

enum class FuzzVerdict { kMatch, kIllConditioned, kMismatch, kError };

struct FuzzCase {
  uint64_t seed = 0;
  FuzzVerdict verdict = FuzzVerdict::kMatch;
  std::string detail;  // mismatch: "output 1: <why>"; error: the status
};

struct FuzzReport {
  std::vector<FuzzCase> cases;  // one per graph, in seed order
  int Count(FuzzVerdict verdict) const;
};

// A graph that cannot be generated, passed, compiled or run is a kError case (when a
// batch fails to compile, its graphs are retried one by one to find the culprit);
// InvalidArgument only for bad options.
StatusOr<FuzzReport> RunDifferentialFuzz(const DifferentialFuzzOptions& options);

const char* FuzzVerdictName(FuzzVerdict verdict);  // "match", "ill-conditioned", ...

}  // namespace tilefuse
