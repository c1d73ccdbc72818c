#include "codegen/cuda/cuda_column_emitter.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>

#include "codegen/cuda/cuda_scalar_program.h"
#include "codegen/emit_util.h"
#include "ir/reduction_traits.h"

namespace tilefuse {

namespace {

constexpr int64_t kSharedLimit = 48 * 1024;  // static shared memory per block
// Blocks the default splits aim at: two per SM of an H100 (132 SMs) keep every SM busy while
// the slowest blocks finish. A thread folds at least kMinRowsPerThread elements, so that its
// loads overlap and the split's hand-over stays small beside them.
constexpr int64_t kTargetBlocks = 2 * 132;
constexpr int64_t kMinRowsPerThread = 4;
constexpr int kMaxThreads = 256;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
bool PowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
int64_t RoundUpPow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

// Threads along the reduced elements for `column_threads` along the outputs: enough for the
// rows there are, `kMaxThreads` a block at most.
int RowThreads(int64_t inner, int column_threads) {
  return static_cast<int>(std::clamp<int64_t>(RoundUpPow2(inner), 1, kMaxThreads / column_threads));
}

}  // namespace

CudaKernelConfig ResolveColumnConfig(const Kernel& k, const ColumnTiling& t, const CudaKernelConfig& requested) {
  CudaKernelConfig c = requested;
  c.cache_row = 0;
  if (c.vector == 0) c.vector = t.vector;
  const bool free_shape = c.tile == 0 && c.threads == 0;
  if (c.tile == 0) c.tile = static_cast<int>(std::max<int64_t>(c.vector, std::min<int64_t>({64, 32 * int64_t{c.vector}, RoundUpPow2(t.columns)})));
  int column_threads = std::max(1, c.tile / std::max(1, c.vector));
  // Short reductions (a 7x7 pool) would leave a block a few threads: wider tiles instead.
  while (free_shape && column_threads * RowThreads(k.inner, column_threads) < 128 && column_threads < 32 &&
         int64_t{c.tile} < RoundUpPow2(k.outer)) {
    c.tile *= 2;
    column_threads *= 2;
  }
  if (c.threads == 0) c.threads = std::max(32, column_threads * RowThreads(k.inner, column_threads));
  c.threads_per_row = std::max(1, c.threads / column_threads);
  if (c.splits == 0) {
    const int64_t tiles = CeilDiv(k.outer, c.tile);
    const int64_t most = std::max<int64_t>(1, k.inner / (int64_t{c.threads_per_row} * kMinRowsPerThread));
    c.splits = t.chained ? 1 : static_cast<int>(std::clamp<int64_t>(CeilDiv(kTargetBlocks, tiles), 1, most));
  }
  return c;
}

namespace {

class ColumnEmitter {
 public:
  ColumnEmitter(const Kernel& k, const ColumnTiling& t, const CudaKernelConfig& c) : k_(k), t_(t), c_(c) {}

  StatusOr<CudaKernelSource> Run() {
    RETURN_IF_ERROR(Validate());
    EmitSetup();
    for (size_t r = 0; r < k_.reductions.size(); ++r) EmitPass(static_cast<int>(r));
    if (HandsOver()) EmitHandOver();
    EmitEpilogue();
    const std::string strategy =
        fmt::format("column {}x{} x{}{}", c_.tile, c_.threads_per_row, c_.vector, c_.splits > 1 ? fmt::format(", {} splits", c_.splits) : "");
    // Half an SM's threads at least: with the block size alone ptxas (CUDA 13) held a chained
    // pass (variance after mean, 4 loads in flight) to 32 registers and spilled.
    CudaKernelSource s = LoopKernelSource(k_, c_, out_, Tiles() * c_.splits, strategy,
                                          HandsOver() ? ", unsigned* __restrict__ tile_counters, float* __restrict__ partials" : "",
                                          std::max(1, 1024 / c_.threads), {}, /*inner_at_launch=*/true);
    if (HandsOver()) {
      s.launch.args.push_back({LaunchArg::Kind::kScratch, -1, {}, 0});
      s.launch.args.push_back({LaunchArg::Kind::kScratch, -1, {}, CounterBytes()});
      s.num_params = static_cast<int>(s.launch.args.size());
      s.launch.scratch_bytes = CounterBytes() + static_cast<int64_t>(k_.reductions.size()) * Tiles() * c_.splits * c_.tile * 4;
    }
    return s;
  }

 private:
  Status Validate() const {
    auto invalid = [&](const std::string& why) { return InvalidArgument(fmt::format("{}: {}", k_.name, why)); };
    if (c_.threads < 32 || c_.threads > 1024 || c_.threads % 32 != 0)
      return invalid(fmt::format("{} threads per block (need a multiple of 32 in [32, 1024])", c_.threads));
    if (!PowerOfTwo(c_.vector) || c_.vector > t_.vector)
      return invalid(fmt::format("vector width {} (need a power of two up to {}, the contiguous loads' alignment)", c_.vector, t_.vector));
    if (!PowerOfTwo(c_.tile) || c_.tile < c_.vector || c_.tile > 32 * c_.vector)
      return invalid(fmt::format("tile of {} outputs (need a power of two, 1 to 32 vectors of {})", c_.tile, c_.vector));
    if (c_.threads_per_row != c_.threads / ColumnThreads()) return invalid(fmt::format("{} threads per row (the block has {})", c_.threads_per_row, c_.threads / ColumnThreads()));
    if (c_.splits < 1 || c_.splits > k_.inner) return invalid(fmt::format("{} splits of {} reduced elements", c_.splits, k_.inner));
    if (c_.splits > 1 && Tiles() * 4 > kScratchCounterBytes)
      return invalid(fmt::format("{} tiles split: more counters than the scratch memory's counter region holds", Tiles()));
    if (c_.splits > 1 && t_.chained) return invalid("several splits, and a reduction reads an earlier one's result (one block must hold whole columns)");
    if (SharedBytes() > kSharedLimit) return invalid(fmt::format("{} bytes of shared memory (at most {})", SharedBytes(), kSharedLimit));
    return Status::Ok();
  }

  // Where the symbols give the outputs or the rows, the grid tells the splits (one text for
  // every binding, split or not: the hand-over is then taken at run time where kSplits > 1).
  bool SplitsAtLaunch() const {
    return !t_.chained && (PrintsSymbolically(k_, k_.outer_size, k_.outer) || PrintsSymbolically(k_, k_.inner_size, k_.inner));
  }
  bool HandsOver() const { return c_.splits > 1 || SplitsAtLaunch(); }
  int ColumnThreads() const { return c_.tile / c_.vector; }
  int Warps() const { return c_.threads / 32; }
  int64_t Tiles() const { return CeilDiv(k_.outer, c_.tile); }
  int64_t SharedBytes() const { return int64_t{4} * c_.tile * (Warps() + static_cast<int64_t>(k_.reductions.size())); }
  int64_t CounterBytes() const { return kScratchCounterBytes; }
  const char* Combiner(int r) const { return DeviceCombiner(GetReductionTraits(k_.reductions[r].op).combiner); }
  // Reduction r's result from its fold `total` (mean divides by the elements reduced).
  std::string Finish(int r, const std::string& total) const {
    const KernelReduction& red = k_.reductions[r];
    const bool at_launch = red.count == k_.inner && PrintsSymbolically(k_, k_.inner_size, k_.inner);
    const std::string count = at_launch ? "kRows" : fmt::format("{}", red.count);
    return GetReductionTraits(red.op).divides_by_count ? fmt::format("{} / float({})", total, count) : total;
  }
  int AccumulatorValue(int r) const {
    for (size_t v = 0; v < k_.values.size(); ++v)
      if (k_.values[v].kind == ScalarValue::Kind::kAccumulator && k_.values[v].reduction == r) return static_cast<int>(v);
    return -1;
  }

  void EmitSetup() {
    // Sizes the symbols give are the launch's (KernelSizeText), and with them the tiles and
    // the splits' rows: the grid (the binding's tiles × splits) tells the splits, so one text
    // serves every binding that splits (or every one that does not).
    const bool outer_at_launch = PrintsSymbolically(k_, k_.outer_size, k_.outer);
    const bool inner_at_launch = PrintsSymbolically(k_, k_.inner_size, k_.inner);
    const bool splits_at_launch = SplitsAtLaunch();
    out_ += fmt::format("  // Outputs in tiles of {} ({} threads of {} along the outputs, {} along the reduced elements), {}.\n", c_.tile,
                        ColumnThreads(), c_.vector, c_.threads_per_row,
                        splits_at_launch ? "split as the grid tells" : fmt::format("{} split{}", c_.splits, c_.splits > 1 ? "s" : ""));
    out_ += fmt::format("  constexpr int kVec = {}, kColumns = {}, kColumnThreads = {}, kRowThreads = {}, kWarps = {};\n", c_.vector, c_.tile,
                        ColumnThreads(), c_.threads_per_row, Warps());
    auto size = [](bool at_launch, const char* name, const std::string& value) {
      return fmt::format("  {} tf_index_t {} = {};\n", at_launch ? "const" : "constexpr", name, value);
    };
    out_ += size(outer_at_launch, "kOutputs", KernelSizeText(k_, k_.outer_size, k_.outer));
    out_ += size(outer_at_launch, "kTiles", outer_at_launch ? "(kOutputs + kColumns - 1) / kColumns" : fmt::format("{}", Tiles()));
    out_ += size(splits_at_launch, "kSplits", splits_at_launch ? "(tf_index_t)gridDim.x / kTiles" : fmt::format("{}", c_.splits));
    out_ += size(inner_at_launch, "kRows", KernelSizeText(k_, k_.inner_size, k_.inner));
    out_ += size(inner_at_launch || splits_at_launch, "kRowsPerSplit",
                 inner_at_launch || splits_at_launch ? "(kRows + kSplits - 1) / kSplits" : fmt::format("{}", CeilDiv(k_.inner, c_.splits)));
    out_ += fmt::format("  __shared__ float partial[kWarps][kColumns];\n  __shared__ float finished[{}][kColumns];\n", k_.reductions.size());
    out_ += "  const int tx = threadIdx.x % kColumnThreads, ty = threadIdx.x / kColumnThreads, lane = threadIdx.x % 32, warp = threadIdx.x / 32;\n";
    out_ += "  const tf_index_t tile = blockIdx.x % kTiles, split = blockIdx.x / kTiles;\n";
    out_ += "  const tf_index_t first = tile * kColumns + tx * kVec;  // the thread's first output\n";
    out_ += "  const tf_index_t row_begin = split * kRowsPerSplit, row_end = row_begin + kRowsPerSplit < kRows ? row_begin + kRowsPerSplit : kRows;\n";
  }

  // One reduction: this thread's slice folded for its kVec outputs, then the block's slices
  // combined into `finished` (one split) or this split's partials (several).
  void EmitPass(int r) {
    const KernelReduction& red = k_.reductions[r];
    const std::vector<bool> needed = ValuesNeeded(k_, {red.value});
    std::map<int, std::string> given;
    out_ += fmt::format("  {{  // r{}: {} of v{}\n    float acc[kVec];\n", r, OpName(red.op), red.value);
    out_ += fmt::format("#pragma unroll\n    for (int j = 0; j < kVec; ++j) acc[j] = {};\n", ReductionIdentity(red));
    for (int e = 0; e < r; ++e)  // earlier results this pass reads (a chained kernel: one split)
      if (int v = AccumulatorValue(e); v >= 0 && needed[v]) {
        out_ += fmt::format("    float f{0}[kVec];\n#pragma unroll\n    for (int j = 0; j < kVec; ++j) f{0}[j] = finished[{0}][tx * kVec + j];\n", e);
        given[v] = fmt::format("f{}[j]", e);
      }
    out_ += "    if (first < kOutputs) {\n";
    std::vector<const ColumnLoad*> loads;
    for (const ColumnLoad& l : t_.loads)
      if (needed[l.value]) {
        loads.push_back(&l);
        const ScalarValue& load = k_.values[l.value];
        out_ += fmt::format("      const {}* p{} = b{} + ({});\n", StorageType(load.dtype), l.value, load.buffer, PrintIndex(l.column_index, {"first", "i1"}));
        given[l.value] = fmt::format("tf_cvt_{}(l{}[j])", DTypeName(load.dtype), l.value);
      }
    out_ += "#pragma unroll 4\n      for (tf_index_t i1 = row_begin + ty; i1 < row_end; i1 += kRowThreads) {\n";
    for (const ColumnLoad* l : loads)
      out_ += fmt::format("        {0} l{1}[kVec];\n        tf_vload<kVec>(p{1} + ({2}), l{1});\n", StorageType(k_.values[l->value].dtype), l->value,
                          PrintIndex(l->row_offset, {"i0", "i1"}));
    out_ += "#pragma unroll\n        for (int j = 0; j < kVec; ++j) {\n          [[maybe_unused]] const tf_index_t i0 = first + j;\n";
    out_ += CudaElementProgram(k_, {red.value}, given, {"i0", "i1"}, "          ");
    out_ += fmt::format("          acc[j] = {}::combine(acc[j], (float)v{});\n        }}\n      }}\n    }}\n", Combiner(r), red.value);
    // The lanes of one column, then the warps in order: the same sum whatever the timing.
    if (ColumnThreads() < 32)
      out_ += fmt::format("#pragma unroll\n    for (int j = 0; j < kVec; ++j) acc[j] = tf_warp_reduce_strided<kColumnThreads, {}>(acc[j]);\n", Combiner(r));
    out_ += "    if (lane < kColumnThreads) {\n#pragma unroll\n      for (int j = 0; j < kVec; ++j) partial[warp][tx * kVec + j] = acc[j];\n    }\n";
    out_ += "    __syncthreads();\n    for (int t = threadIdx.x; t < kColumns; t += blockDim.x) {\n      float total = partial[0][t];\n";
    out_ += fmt::format("      for (int w = 1; w < kWarps; ++w) total = {}::combine(total, partial[w][t]);\n", Combiner(r));
    const std::string to_partials = fmt::format("__stcg(partials + ((long long)({} * kTiles + tile) * kSplits + split) * kColumns + t, total);", r);
    const std::string to_finished = fmt::format("finished[{}][t] = {};", r, Finish(r, "total"));
    if (SplitsAtLaunch()) out_ += fmt::format("      if (kSplits > 1) {}\n      else {}\n", to_partials, to_finished);
    else out_ += fmt::format("      {}\n", c_.splits > 1 ? to_partials : to_finished);
    out_ += "    }\n    __syncthreads();\n  }\n";
  }

  // Several splits: the last block to finish a tile combines every split's partials, in split
  // order. Memory order as in the GEMM template's split-K: the partials are fenced before the
  // counter's atomic, and the last block fences before reading them through L2 (__ldcg; L1 is
  // not coherent). A second kernel would need no counter, but its launch (a few us) would cost
  // more than this whole reduction takes.
  void EmitHandOver() {
    std::string text =
        "  __shared__ bool finishes_tile;\n"
        "  __threadfence();\n"
        "  __syncthreads();\n"
        "  if (threadIdx.x == 0) {\n"
        "    const bool last = atomicAdd(tile_counters + tile, 1u) == kSplits - 1;\n"
        "    if (last) tile_counters[tile] = 0;  // zero again for the next launch\n"
        "    finishes_tile = last;\n"
        "  }\n"
        "  __syncthreads();\n"
        "  if (!finishes_tile) return;\n"
        "  __threadfence();\n"
        "  for (int t = threadIdx.x; t < kColumns; t += blockDim.x) {\n";
    for (size_t r = 0; r < k_.reductions.size(); ++r) {
      const int ri = static_cast<int>(r);
      text += fmt::format("    {{\n      const float* part = partials + (long long)({} * kTiles + tile) * kSplits * kColumns + t;\n", r);
      text += "      float total = __ldcg(part);\n";
      text += fmt::format("      for (int s = 1; s < kSplits; ++s) total = {}::combine(total, __ldcg(part + (long long)s * kColumns));\n", Combiner(ri));
      text += fmt::format("      finished[{}][t] = {};\n    }}\n", r, Finish(ri, "total"));
    }
    text += "  }\n  __syncthreads();\n";
    if (!SplitsAtLaunch()) {
      out_ += text;
      return;
    }
    // Taken only where the launch splits (the block's branch is uniform: its barriers hold).
    out_ += "  if (kSplits > 1) {\n";
    for (size_t at = 0; at < text.size();) {
      const size_t end = text.find('\n', at) + 1;
      out_ += "  " + text.substr(at, end - at);
      at = end;
    }
    out_ += "  }\n";
  }

  // The group's stores, one output per thread: its results from `finished`, then whatever the
  // group computes from them (a cast, a following pointwise op).
  void EmitEpilogue() {
    std::map<int, std::string> given;
    for (size_t r = 0; r < k_.reductions.size(); ++r)
      if (int v = AccumulatorValue(static_cast<int>(r)); v >= 0) given[v] = fmt::format("finished[{}][t]", r);
    std::vector<int> roots;
    for (const KernelStore& s : k_.stores) roots.push_back(s.value);
    out_ += "  for (int t = threadIdx.x; t < kColumns; t += blockDim.x) {\n    const tf_index_t i0 = tile * kColumns + t;\n    if (i0 < kOutputs) {\n";
    out_ += CudaElementProgram(k_, roots, given, {"i0", "i1"}, "      ");
    for (const KernelStore& s : k_.stores)
      out_ += fmt::format("      b{}[{}] = tf_pack_{}(v{});\n", s.buffer, PrintIndex(s.index, {"i0", "i1"}), DTypeName(k_.buffers[s.buffer].dtype), s.value);
    out_ += "    }\n  }\n";
  }

  const Kernel& k_;
  const ColumnTiling& t_;
  CudaKernelConfig c_;
  std::string out_;
};

}  // namespace

StatusOr<CudaKernelSource> EmitColumnKernel(const Kernel& kernel, const ColumnTiling& tiling, const CudaKernelConfig& config) {
  if (!tiling.tiled()) return InvalidArgument(fmt::format("{}: no column form ({})", kernel.name, tiling.why_not));
  return ColumnEmitter(kernel, tiling, config).Run();
}

}  // namespace tilefuse
