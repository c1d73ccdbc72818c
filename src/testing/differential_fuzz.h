// Differential fuzzing: random graphs (testing/random_graph.h) compiled for the CPU must
// give the f64 reference interpreter's outputs on random inputs, with kernel outputs
// poisoned first. Graphs compile in batches (one compiler run per batch). One judge for
// the unit test (src/runtime/differential_fuzz_test.cc) and `tilefuse fuzz`.
//
// The judge: outputs are compared norm-wise (testing/tensor_compare.h) with bounds that
// follow the least precise float dtype in the graph. No mismatch is tolerated: a graph
// that fails them is measured, by the reference run again as other legitimate
// computations would round (reference/conditioning.h).
// When those alone already leave the bounds (a layer norm of rounding noise), and the
// kernel is no further off than they go (within explain_factor), the graph is
// ill-conditioned for the tolerance and reported with both numbers; otherwise it is a
// mismatch. Graphs that pass are never probed, so the share of ill-conditioned graphs
// is the share that failed and was explained.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "codegen/lowering_fault.h"
#include "reference/conditioning.h"
#include "tilefuse/dtype.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse {

struct DifferentialFuzzOptions {
  uint64_t first_seed = 0;  // graphs first_seed, first_seed + 1, ...
  int count = 1;
  bool fuse = true;
  // Half types are left out by default: kernels keep them in f32 between ops while the
  // reference rounds every node, and ill-conditioned ops (sqrt near 0) amplify that
  // legitimate difference beyond any fixed tolerance.
  std::vector<DType> dtypes = {DType::kF32, DType::kF64};
  bool layer_patterns = true;  // RandomGraphOptions::allow_layer_patterns
  int batch_size = 150;    // graphs per compiler run
  std::string backend = "cpu";  // "cpu" (host compiler, batched) or "cuda" (NVRTC, a graph at a time)
  // Convolutions and pools in the channels-last forms the CUDA backend compiles
  // (PassOptions::channels_last), whichever backend runs them.
  bool channels_last = false;
  std::string cache_dir;   // empty: $TILEFUSE_CACHE_DIR or ~/.cache/tilefuse
  // A failing graph is ill-conditioned only when its kernel error is at most this many
  // times the largest deviation the probes measured.
  double explain_factor = kConditioningExplainFactor;
  // Measure every graph's sensitivity, not only failing ones' (statistics; slower).
  bool measure_all = false;
  // Random graphs over symbolic dims (testing/symbolic_random_graph.h), each compiled with its
  // sizes over the symbols and judged at kSymbolicBindings bindings; a graph's case is its
  // worst binding's. Their dtype is f32 or f64 (`dtypes`' first such, by seed).
  bool symbolic = false;
  // Test only: every float op of this code in generated loop kernels is off by this
  // relative error (codegen/lowering_fault.h), to prove the judge catches a lowering bug.
  LoweringFault fault;
};

enum class FuzzVerdict { kMatch, kIllConditioned, kMismatch, kError };

struct FuzzCase {
  uint64_t seed = 0;
  FuzzVerdict verdict = FuzzVerdict::kMatch;
  // mismatch and ill-conditioned: "output 1: <kernel error>; <the probes' measurement>";
  // error: the status
  std::string detail;
  double error_ratio = 0;        // the kernel's worst error in units of the tolerance (<= 1 matches)
  double sensitivity_ratio = 0;  // the probes' worst deviation, the same way (measured on failure only)
};

struct FuzzReport {
  std::vector<FuzzCase> cases;  // one per graph, in seed order
  int Count(FuzzVerdict verdict) const;
};

// A graph that cannot be generated, passed, compiled or run is a kError case (when a
// batch fails to compile, its graphs are retried one by one to find the culprit);
// InvalidArgument only for bad options.
StatusOr<FuzzReport> RunDifferentialFuzz(const DifferentialFuzzOptions& options);

// The judge alone, for one graph: `run` computes its outputs (the kernels under test) on
// the random inputs of `seed`; the verdict as described above.
using FuzzRunFunction = std::function<StatusOr<std::vector<Tensor>>(const std::vector<Tensor>&)>;
FuzzCase JudgeGraph(const Graph& graph, uint64_t seed, const FuzzRunFunction& run, const DifferentialFuzzOptions& options);

inline constexpr int kSymbolicBindings = 3;  // the bindings a symbolic graph is judged at

// The graph of `seed` as the fuzzer compiles it (generated, then through the graph
// passes), for replaying or dumping one case; for symbolic graphs, at binding `binding`.
StatusOr<Graph> GenerateFuzzGraph(const DifferentialFuzzOptions& options, uint64_t seed, int binding = 0);

const char* FuzzVerdictName(FuzzVerdict verdict);  // "match", "ill-conditioned", ...

}  // namespace tilefuse
