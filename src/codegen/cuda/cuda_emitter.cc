#include "codegen/cuda/cuda_emitter.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>

#include "codegen/column_tiles.h"
#include "codegen/concat_parts.h"
#include "codegen/cpp_value_expression.h"
#include "codegen/cuda/cuda_column_emitter.h"
#include "codegen/cuda/cuda_row_splits.h"
#include "codegen/cuda/cuda_scalar_program.h"
#include "codegen/cuda/cuda_transposed_emitter.h"
#include "codegen/cuda/cuda_vector_store.h"
#include "codegen/emit_util.h"
#include "codegen/kernel_rewrites.h"
#include "codegen/row_cache_plan.h"
#include "codegen/vector_lanes.h"
#include "ir/reduction_traits.h"
#include "support/env_switch.h"
#include "support/check.h"

namespace tilefuse {

namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t RoundUpPow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

bool IsRowKernel(const Kernel& k) { return !k.reductions.empty(); }


// Accesses the templates move as vectors: pointwise ones at the element's own offset,
// row ones contiguous along the row.
bool PointwiseVectorizable(const Index& index, int vector) {
  AffineIndex a;
  return !UsesValue(index) && AsAffine(index, &a) && a.c0 == 1 && a.c1 == 0 && a.offset % vector == 0;
}
bool RowVectorizable(const Index& index, int vector) {
  AffineIndex a;
  return !UsesValue(index) && AsAffine(index, &a) && a.c1 == 1 && a.c0 % vector == 0 && a.offset % vector == 0;
}

// The narrowest element among the accesses a template could vectorise (0: none).
int64_t NarrowestVectorAccess(const Kernel& k, bool row) {
  int64_t narrowest = 0;
  auto consider = [&](const Index& index, DType dtype) {
    if (row ? !RowVectorizable(index, 1) : !PointwiseVectorizable(index, 1)) return;
    int64_t size = DTypeSize(dtype);
    narrowest = narrowest == 0 ? size : std::min(narrowest, size);
  };
  for (const ScalarValue& v : k.values)
    if (v.kind == ScalarValue::Kind::kLoad) consider(v.index, k.buffers[v.buffer].dtype);
  for (const KernelStore& s : k.stores) consider(s.index, k.buffers[s.buffer].dtype);
  return narrowest;
}

// Whether `e` is exp(x - m) with m the row's max of the very value x (softmax's and
// logsumexp's shift, also inside the online pass, where m names the running max): its
// argument is never positive, where the device library's cheap exp holds.
bool IsExpLessRowMax(const Kernel& k, const ScalarValue& e) {
  if (e.kind != ScalarValue::Kind::kOp || e.op != OpCode::kExp) return false;
  const ScalarValue& d = k.values[e.args[0]];
  if (d.kind != ScalarValue::Kind::kOp || d.op != OpCode::kSub) return false;
  const ScalarValue& m = k.values[d.args[1]];
  return m.kind == ScalarValue::Kind::kAccumulator && k.reductions[m.reduction].op == OpCode::kReduceMax &&
         k.reductions[m.reduction].value == d.args[0];
}

// The sum reduction that can run in the pass of max reduction `max_r` (an online softmax:
// a running max, and the sum rescaled whenever the max grows), or -1. It must reduce
// exp(x - max) of the very value x the max reduces, in the same type, x varying along the
// row (a value broadcast along it is computed once per row, before the pass, where the
// running max does not exist yet).
int OnlineSumOf(const Kernel& k, int max_r) {
  const KernelReduction& max_red = k.reductions[max_r];
  if (max_red.op != OpCode::kReduceMax || !IsFloat(max_red.dtype) || !k.values[max_red.value].inner) return -1;
  for (size_t r = 0; r < k.reductions.size(); ++r) {
    const KernelReduction& sum_red = k.reductions[r];
    if (sum_red.op != OpCode::kReduceSum || std::string_view(ComputeType(sum_red.dtype)) != ComputeType(max_red.dtype)) continue;
    const ScalarValue& e = k.values[sum_red.value];
    if (IsExpLessRowMax(k, e) && k.values[k.values[e.args[0]].args[1]].reduction == max_r) return static_cast<int>(r);
  }
  return -1;
}

bool CallsTranscendental(const Kernel& k) {
  for (const ScalarValue& v : k.values)
    if (v.kind == ScalarValue::Kind::kOp)
      switch (v.op) {
        case OpCode::kExp: case OpCode::kLog: case OpCode::kTanh: case OpCode::kSigmoid: case OpCode::kErf:
        case OpCode::kSin: case OpCode::kCos: case OpCode::kAsin: case OpCode::kAcos: case OpCode::kAtan: case OpCode::kAtan2:
        case OpCode::kPow: return true;
        default: break;
      }
  return false;
}

// A kernel of one row whatever the binding (its row count not printed over the symbols).
bool OneRow(const Kernel& k) { return k.outer == 1 && !PrintsSymbolically(k, k.outer_size, k.outer); }

}  // namespace

bool IsRowDataLoad(const Kernel& k, const ScalarValue& v) {
  return v.kind == ScalarValue::Kind::kLoad && v.inner && (UsesVar(v.index, 0) || OneRow(k)) && !UsesValue(v.index);
}
int64_t RowDataLoads(const Kernel& k) {
  return std::count_if(k.values.begin(), k.values.end(), [&](const ScalarValue& v) { return IsRowDataLoad(k, v); });
}
bool IsRowBroadcastLoad(const Kernel& k, const ScalarValue& v, int vector) {
  return v.kind == ScalarValue::Kind::kLoad && v.inner && !UsesVar(v.index, 0) && !OneRow(k) && RowVectorizable(v.index, vector);
}
// Half types count two to a register, as they are loaded 16 bytes at a time (ptxas, sm_90a:
// holding layer norm's 2 x 32 bf16 a thread beside a row of 1024 took 63 -> 80 registers, RMS
// norm's 32 took 56 -> 64), where a held row counts one a value.
int64_t BroadcastRegisters(const Kernel& k, int vector) {
  int64_t registers = 0;
  for (const ScalarValue& v : k.values)
    if (IsRowBroadcastLoad(k, v, vector)) registers += (vector * DTypeSize(v.dtype) + 3) / 4;
  return registers;
}
int64_t HeldBesideRegisters(const Kernel& k, int64_t chunks, int vector) {
  const int64_t row_loads = RowDataLoads(k);
  return chunks * vector * row_loads + BroadcastRegisters(k, vector) * chunks;
}

namespace {

// How many row-invariant vectors a warp per row holds beside its row where the rule takes
// that form (ResolveCudaConfig): the row spans 3 or 4 vectors a lane (of 16 bytes: rows of
// 513 to 1024 half-type elements, 257 to 512 f32), is held, and the row's values with the
// vectors' registers (BroadcastRegisters) fit the held-row budget of 64 a thread (ptxas then
// gives layer norm over 1024 bf16 columns 80 registers). 0: the rule's block per row instead.
int64_t VectorsAWarpHoldsBesideItsRow(const Kernel& k, int vector) {
  const int64_t lane_span = int64_t{32} * vector;
  if (k.inner <= lane_span * 2 || k.inner > lane_span * 4 || BroadcastRegisters(k, vector) == 0) return 0;
  if (RowDataLoads(k) == 0 || HeldBesideRegisters(k, CeilDiv(k.inner, lane_span), vector) > 64)
    return 0;
  return std::count_if(k.values.begin(), k.values.end(), [&](const ScalarValue& v) { return IsRowBroadcastLoad(k, v, vector); });
}

}  // namespace

const char* DeviceCombiner(OpCode combiner) {
  switch (combiner) {
    case OpCode::kAdd: return "tf_sum";
    case OpCode::kMul: return "tf_prod";
    case OpCode::kMax: return "tf_max";
    case OpCode::kMin: return "tf_min";
    default: TF_UNREACHABLE("no device functor for this combiner");
  }
  return "";
}

CudaKernelConfig ResolveCudaConfig(const Kernel& k, const CudaKernelConfig& requested) {
  CudaKernelConfig c = requested;
  c.broadcast_with_row = false;  // only the row template's, below, where it applies
  if (c.cluster == 0) c.cluster = 1;  // none unless the row rule below takes one
  bool row = IsRowKernel(k);
  int64_t narrowest = NarrowestVectorAccess(k, row);
  if (!row) {
    if (c.tile >= 0)
      if (TransposedTiling tiling = FindTransposedTiling(k); tiling.tiled()) return ResolveTransposedConfig(k, tiling, c);
    c.tile = -1;
    c.splits = 0;
    if (c.vector == 0) {
      // 32 bytes of the narrowest access a thread, 16 where elements call a transcendental
      // function (their registers per element cut the warps in flight). The tuner on an H100
      // (2026-11-24) found 16 bytes fastest on every pointwise case: GELU bf16 92.8 µs against
      // 101.0 at 32, GELU f32 183.9 against 186.6, SwiGLU 137.7 against 138.2.
      const int64_t bytes = CallsTranscendental(k) ? 16 : 32;
      c.vector = narrowest == 0 ? 1 : static_cast<int>(std::min<int64_t>(16, std::max<int64_t>(1, bytes / narrowest)));
      // Window taps over NHWC read whole vectors in the lane form where the vector divides
      // the channels (MobileNet's 24 or 40): a narrower vector there beats reading each
      // element apart.
      for (int v = std::max(c.vector, 8); v >= 4 && !SwitchedOff("TILEFUSE_LANES"); v /= 2)
        if (TakesLaneForm(k, v)) {
          c.vector = v;
          break;
        }
      // A concat's output branches once a vector into its parts (codegen/concat_parts.h) where
      // the vector divides the concat's period: a narrower vector there beats testing every
      // element's part (ResNet's stem im2col, K = 147 padded to 148: 108 instructions an
      // element at 8 f32 a vector, its row's index computed per element).
      if (FindConcatParts(k, c.vector).cuts.empty())
        for (int v = c.vector / 2; v >= 2; v /= 2)
          if (!FindConcatParts(k, v).cuts.empty()) {
            c.vector = v;
            break;
          }
    }
    // Blocks of 256 threads, 128 where a thread's transcendentals are on 4 f32 elements (f64,
    // unmeasured, keeps 256): the tuner on an H200 chose 128 for GELU f32 in two calls
    // (2026-11-28: 129.5 µs against 131.4 and 131.5 at 256, 1.5%), while on bf16 GELU 128 tied
    // 256 (67.0 / 67.3 against 67.0 / 67.2) and SwiGLU ran 0.6% slower (96.1 / 96.3 against
    // 95.6 / 95.7).
    if (c.threads == 0) c.threads = CallsTranscendental(k) && c.vector == 4 && narrowest == 4 ? 128 : 256;
    c.threads_per_row = 0;
    c.cache_row = 0;
    return c;
  }
  // TILEFUSE_COLUMN=0 / TILEFUSE_LANES=0 keep a template off, for comparison and diagnosis.
  if (c.tile >= 0 && !SwitchedOff("TILEFUSE_COLUMN"))
    if (ColumnTiling tiling = FindColumnTiling(k); tiling.tiled()) return ResolveColumnConfig(k, tiling, c);
  c.tile = -1;
  const int requested_splits = c.splits;  // the row template's: blocks sharing a row (cuda_row_splits.h)
  c.splits = 0;
  if (c.vector == 0) {
    c.vector = narrowest == 0 ? 1 : static_cast<int>(16 / narrowest);
    while (c.vector > 1 && k.inner % c.vector != 0) c.vector /= 2;
  }
  // The vectors every row reads alike held beside the row: where the tuner asks, or where
  // the rule below takes a warp per row for them.
  bool hold_vectors = requested.broadcast_with_row;
  // No block shape asked and no cluster sharing a row (--row-cluster 1 asks for none).
  const bool shape_free = requested.threads == 0 && requested.threads_per_row == 0 && requested.cache_row < 0 && requested.cluster <= 1;
  const bool nothing_asked = shape_free && requested.cluster == 0;
  if (c.threads_per_row == 0) {
    const int64_t vectors_beside = shape_free ? VectorsAWarpHoldsBesideItsRow(k, c.vector) : 0;
    if (narrowest == 0 || k.inner < 64) {
      c.threads_per_row = 1;  // columns, or rows too short to share: a thread per output
    } else if (vectors_beside > 0) {
      // A norm over rows of 3 or 4 vectors a lane (with 16-byte vectors 513 to 1024 half-type
      // columns, 257 to 512 f32) with its scale (and bias): a warp per row holding the row and
      // those vectors, loaded together before the reductions, as Triton's kernel does. The tuner chose that
      // form over the 64-thread block below in every call on an H200, which keeps the rule
      // for rows without such vectors (softmax). Against that block, the same binary
      // otherwise, three rounds in one call (H200, 2026-11-28, µs): layer norm 65536 x 1024
      // bf16 68.7 / 68.8 / 68.8 -> 67.3 / 67.0 / 67.0, RMS norm 67.7 / 67.7 / 67.7 -> 67.3 /
      // 67.3 / 67.1, 65536 x 768 bf16 layer norm 63.4 / 63.4 / 63.2 -> 52.4 / 51.9 / 52.2 (why
      // the block was that slow there, and not on RMS norm, was not found), RMS norm 51.8 ->
      // 51.2 / 51.2 / 51.4, 65536 x 512 f32 RMS norm 67.8 -> 67.0 / 67.2 / 67.1, and f32
      // layer norm 68.0 / 67.9 / 68.1 -> 68.3 / 68.4 / 68.4 (0.4% slower; kept for one rule
      // over the bytes of a row). Blocks of 4
      // warps for two vectors and of one for one vector, as the tuner found (layer norm in
      // 1-warp blocks 69.1 / 68.5 / 69.3 against 67.8 / 67.4 / 68.4, RMS norm in 4-warp blocks
      // 68.9 / 68.5 / 69.2 against 67.7 / 67.7 / 67.8); why was not found, their occupancy
      // is the same.
      c.threads_per_row = 32;
      c.threads = vectors_beside >= 2 ? 128 : 32;  // nothing was asked
      c.cache_row = 1;
      hold_vectors = true;
    } else if (k.inner <= int64_t{32} * c.vector * 2) {
      // A warp per row up to two vectors a lane. Longer rows take a block of at least 64
      // threads (but for the norms above): the tuner on an H200 chose a 64-thread block over
      // a warp reading the scale and bias after the reductions for every row of 1024 bf16
      // columns (2026-11-27: layer norm 65536x1024 70.4 -> 69.3 us, RMS norm 69.3 -> 68.0,
      // softmax 16384x1024 19.9 -> 19.6; on 2026-11-27's earlier build 73.7 -> 70.5): twice
      // the warps a row, half the row per lane.
      c.threads_per_row = 32;
    } else {
      // A block per row, 4 vectors a thread; 2 where the row is one input whose one
      // reduction's result is written back along it (RMS norm), which the tuner chose in every
      // call on an H200. Against 4, one call, three rounds (H200, 2026-11-28, µs): RMS norm
      // 16384 x 4096 bf16 69.7 / 69.8 / 69.7 -> 68.2 / 68.1 / 68.0 (39 registers instead of
      // 56), over 4096 f32 135.1 / 135.1 / 134.9 -> 132.5 / 132.4 / 132.3, over 8192 bf16
      // 133.5 -> 133.2 / 132.9 / 133.0. Not for a residual sum folded first (two row inputs):
      // 132.6 / 132.5 / 132.5 -> 133.2 / 133.2 / 133.0; nor for layer norm's two reductions
      // (the tuner's best there was a 64-thread block, by about 1% in its own timing and
      // 0-0.4% in the peers' harness). Only where no cluster shares the row, the block stays
      // within 512 threads, as measured (1024 would make it the one an SM that prefetches its
      // next row), and its threads cover the row in whole chunks (3072 columns keep 128
      // threads by 3 chunks, not 256 by 1.5).
      const int64_t row_inputs = RowDataLoads(k);
      const bool one_written_back = k.reductions.size() == 1 && row_inputs == 1 && requested.cluster <= 1 &&
                                    std::any_of(k.stores.begin(), k.stores.end(), [](const KernelStore& st) { return UsesVar(st.index, 1); });
      const int64_t wide = RoundUpPow2(CeilDiv(k.inner, c.vector * 2));
      const int vectors_a_thread = one_written_back && wide <= 512 && k.inner % (wide * c.vector) == 0 ? 2 : 4;
      c.threads_per_row = static_cast<int>(std::clamp<int64_t>(RoundUpPow2(CeilDiv(k.inner, c.vector * vectors_a_thread)), 64, 1024));
    }
  }
  // Whether the row's own loads fit in registers: their values per thread against a budget
  // of 32 for 1024-thread blocks (64 registers a thread at most), else 64. A half-precision row
  // that does not fit as one value a register may fit as pairs, two to a register
  // (cache_row 2, CudaEmitter::PackedCache): softmax over 65536 bf16 columns then reads its
  // row once instead of once per pass, 163 -> 132 us on an H100. Rows that fit unpacked stay
  // unpacked: the pairs' unpacking measured 6% slower on the dropout + residual + LayerNorm
  // row (one round).
  if (c.threads == 0) c.threads = c.threads_per_row > 32 ? c.threads_per_row : 256;
  // A cluster shares a row only where a block has one, the slices are whole vectors, and a
  // block is launched per row (no grid-stride loop, whose CTAs would leave the cluster).
  const bool clusterable = c.threads_per_row == c.threads && c.threads > 32 && k.outer * c.cluster <= (int64_t{1} << 30) &&
                           k.inner % (int64_t{c.cluster} * c.vector) == 0;
  if (c.cluster != 1 && (!clusterable || (c.cluster & (c.cluster - 1)) != 0 || c.cluster > 8)) c.cluster = 1;
  // A few long rows split over blocks (resolved 0 where not split, as the other row forms
  // say): each block's slice re-read per pass, never held.
  const int splits = requested_splits == 0 ? RuleRowSplits(k, c) : requested_splits;
  if (splits > 1) {
    c.splits = splits;
    c.cache_row = 0;
    return c;
  }
  if (c.cache_row < 0) {
    const int64_t chunks = CeilDiv(k.inner / c.cluster, int64_t{c.threads_per_row} * c.vector);
    const int64_t budget = c.threads >= 1024 ? 32 : 64;
    int64_t row_loads = 0, values = 0, registers_as_pairs = 0;
    for (const ScalarValue& v : k.values)
      if (IsRowDataLoad(k, v)) {
        ++row_loads;
        values += chunks * c.vector;
        registers_as_pairs += DTypeSize(v.dtype) == 2 && c.vector % 2 == 0 ? chunks * c.vector / 2 : chunks * c.vector;
      }
    const bool cacheable = row_loads > 0 && c.threads_per_row > 1;
    c.cache_row = !cacheable ? 0 : values <= budget ? 1 : registers_as_pairs <= budget ? 2 : 0;
  }
  c.broadcast_with_row = hold_vectors && c.cache_row == 1 &&
                         std::any_of(k.values.begin(), k.values.end(), [&](const ScalarValue& v) { return IsRowBroadcastLoad(k, v, c.vector); });
  // A row a 1024-thread block holds only as pairs is shared, where nothing else was asked
  // for, by a cluster of 4 CTAs of 256 threads, each holding its slice as pairs (half the
  // registers of the slice unpacked: more CTAs an SM). The tuner chose that on both GPUs for
  // softmax over 65536 bf16 columns (2026-11-27: H200 95.0 -> 80.7 us, 85.9 with the slice
  // unpacked; H100 110.0 -> 103.6, 105.3 unpacked), over the pairs in a block per SM
  // prefetching its next row.
  if (c.cache_row == 2 && c.clusters && nothing_asked) {
    CudaKernelConfig shared = requested;
    shared.threads = shared.threads_per_row = 256;
    shared.cluster = 4;
    shared.cache_row = 2;
    if (CudaKernelConfig slices = ResolveCudaConfig(k, shared); slices.cluster == 4) return slices;
  }
  return c;
}

namespace {

class CudaEmitter {
 public:
  CudaEmitter(const Kernel& k, const CudaKernelConfig& c) : k_(k), c_(c), row_(IsRowKernel(k)) {
    for (size_t v = 0; v < k.values.size(); ++v)
      if (k.values[v].kind == ScalarValue::Kind::kAccumulator) accumulator_value_[k.values[v].reduction] = static_cast<int>(v);
    array_.assign(k.values.size(), Array::kNone);
    row_done_.assign(k.values.size(), false);
  }

  StatusOr<CudaKernelSource> Run() {
    RETURN_IF_ERROR(Validate());
    if (row_) {
      EmitRowKernel();
      int64_t rows_per_block = c_.threads / c_.threads_per_row;
      const int64_t blocks = staged_ >= 0 ? std::min<int64_t>(k_.outer, c_.sm_count)
                                          : std::max<int64_t>(1, CeilDiv(k_.outer, rows_per_block)) * c_.cluster * std::max(1, c_.splits);
      CudaKernelSource source = LoopKernelSource(
          k_, c_, out_, blocks,
          fmt::format("row: {} per row{}, {}{}{} x{}",
                      c_.threads_per_row == 1 ? "thread" : c_.threads_per_row == 32 ? "warp" : "block",
                      c_.cluster > 1   ? fmt::format(" (a cluster of {} per row)", c_.cluster)
                      : c_.splits > 1  ? fmt::format(" (split over {} blocks)", c_.splits)
                                       : "",
                      c_.cache_row == 2 ? "row in registers as pairs"
                      : c_.broadcast_with_row ? "row and row-invariant vectors in registers"
                      : c_.cache_row ? "row in registers"
                                     : "row re-read per pass",
                      online_ ? ", max and sum of exp in one pass" : "",
                      staged_ >= 0 ? ", a block per SM with its next row prefetched into shared memory" : "", c_.vector),
          Split() ? ", unsigned* __restrict__ row_counters, unsigned long long* __restrict__ partials" : "", 0, {}, InnerAtLaunch());
      source.launch.cluster = {c_.cluster, 1, 1};
      if (Split()) {
        source.launch.args.push_back({LaunchArg::Kind::kScratch, -1, {}, 0, {}});
        source.launch.args.push_back({LaunchArg::Kind::kScratch, -1, {}, kScratchCounterBytes, {}});
        source.num_params = static_cast<int>(source.launch.args.size());
        source.launch.scratch_bytes = RowSplitScratchBytes(k_, c_.splits);
      }
      if (staged_ >= 0) source.launch.dynamic_shared_bytes = Chunks() * c_.threads * 16;
      return source;
    }
    EmitPointwiseKernel();
    return LoopKernelSource(k_, c_, out_, std::max<int64_t>(1, CeilDiv(CeilDiv(k_.outer, c_.vector), c_.threads)),
                            fmt::format("pointwise{} x{}", lanes_ ? " lanes" : "", c_.vector));
  }

 private:
  // How a value reaches the element scope: a load from its chunk's array or the cached row's,
  // the folded row value (FoldedRowValue) from its array.
  enum class Array { kNone, kChunk, kCached, kFolded };

  Status Validate() const {
    if (c_.threads < 32 || c_.threads > 1024 || c_.threads % 32 != 0)
      return InvalidArgument(fmt::format("{}: {} threads per block (need a multiple of 32 in [32, 1024])", k_.name, c_.threads));
    if (c_.vector < 1 || c_.vector > 16 || (c_.vector & (c_.vector - 1)) != 0)
      return InvalidArgument(fmt::format("{}: vector width {} (need a power of two up to 16)", k_.name, c_.vector));
    if (!row_) return Status::Ok();
    if (k_.inner % c_.vector != 0)
      return InvalidArgument(fmt::format("{}: vector width {} does not divide the row length {}", k_.name, c_.vector, k_.inner));
    if (c_.threads_per_row != 1 && c_.threads_per_row != 32 && c_.threads_per_row != c_.threads)
      return InvalidArgument(fmt::format("{}: {} threads per row (need 1, 32 or the block size)", k_.name, c_.threads_per_row));
    if (c_.cluster != 1 && (c_.threads_per_row != c_.threads || k_.inner % (int64_t{c_.cluster} * c_.vector) != 0))
      return InvalidArgument(fmt::format("{}: a cluster of {} shares rows of {} only with a block per row and whole vectors per slice", k_.name,
                                         c_.cluster, k_.inner));
    if (c_.splits > 1) {
      if (std::string why = WhyRowsCannotSplit(k_); !why.empty())
        return InvalidArgument(fmt::format("{}: rows split over {} blocks: {}", k_.name, c_.splits, why));
      if (c_.threads_per_row != c_.threads || c_.threads <= 32 || c_.cluster != 1 || c_.cache_row != 0)
        return InvalidArgument(fmt::format("{}: rows split over blocks need a block per row, no cluster and the row re-read", k_.name));
      if (c_.splits > k_.inner / c_.vector)
        return InvalidArgument(fmt::format("{}: {} splits of a row of {} vectors", k_.name, c_.splits, k_.inner / c_.vector));
    }
    return Status::Ok();
  }

  // The outer extent's declaration: a launch parameter's expression where it is one of the
  // model's symbolic sizes (KernelSizeText), so one compiled kernel serves every binding.
  std::string OuterDeclaration() const {
    return PrintsSymbolically(k_, k_.outer_size, k_.outer) ? "const int64_t" : "constexpr int64_t";
  }

  std::string Name(int v) const { return lane_array_.empty() || !lane_array_[v] ? fmt::format("v{}", v) : fmt::format("v{}[j]", v); }
  std::string ArrayName(int v) const { return fmt::format("c{}", v); }
  // A cached row of half-precision values loaded as vectors is kept as element pairs, two
  // to a 32-bit register (cache_row 2): as separate 16-bit values ptxas gives each a register
  // of its own, and a 1024-thread block's 64 registers a thread then hold half the row
  // (softmax over 65536 bf16 columns spilled 368 bytes).
  bool PackedCache(int v) const {
    const ScalarValue& value = k_.values[v];
    return c_.cache_row == 2 && !DrawnInBlocks(v) && DTypeSize(value.dtype) == 2 && c_.vector % 2 == 0 &&
           RowVectorizable(value.index, c_.vector);
  }
  // Before each pass over a cached row: the packed pairs pass through an empty asm, so the
  // compiler cannot reuse the previous pass's unpacked values (it did, and kept the whole row
  // live as floats: 128 registers and a spill for 65536 bf16 columns on 512 threads).
  void LaunderPackedCaches(const std::string& ind) {
    for (size_t v = 0; v < k_.values.size(); ++v)
      if (array_[v] == Array::kCached && PackedCache(static_cast<int>(v)))
        out_ += fmt::format("{0}#pragma unroll\n{0}for (int k = 0; k < kChunks; ++k)\n{0}#pragma unroll\n{0}  for (int p = 0; p < kVec / 2; ++p) "
                            "asm volatile(\"\" : \"+r\"({1}[k][p]));\n",
                            ind, ArrayName(static_cast<int>(v)));
  }

  // A random value whose vector of kVec elements is whole Philox blocks: drawn four
  // elements per generator call into a register array (a chunk's, or the row's when the row
  // is cached), not one call per element (and, in a row kernel, per pass).
  bool DrawnInBlocks(int v) const {
    const ScalarValue& value = k_.values[v];
    if (value.kind != ScalarValue::Kind::kRandom || c_.vector % 4 != 0) return false;
    if (row_) return FillsInPhiloxBlocks(k_, v);
    AffineIndex a;
    return AsAffine(value.index, &a) && a.c0 == 1 && a.c1 == 0 && a.offset % 4 == 0;
  }
  // Fills `target` (a float[kVec]) with random value `v` at the vector starting at `at`
  // (the element index's variables, the vector's first element).
  std::string DrawBlocks(int v, const std::vector<std::string>& at, const std::string& target, const std::string& indent) const {
    const ScalarValue& value = k_.values[v];
    return fmt::format("{0}#pragma unroll\n{0}for (int q = 0; q < kVec / 4; ++q) tf_philox_uniform4({1}ull, (uint64_t)({2}) / 4 + q, {3} + 4 * q);\n",
                       indent, value.seed, PrintIndex(value.index, at), target);
  }

  // Loads read this template's register arrays or the buffer through the device
  // library's converters; everything else prints as in the C++ emitter (same helper names).
  std::string Expression(const ScalarValue& v, int id) {
    const std::vector<std::string>& vars = vars_;
    if (v.kind == ScalarValue::Kind::kIndex) return fmt::format("{}({})", ComputeType(v.dtype), PrintIndex(Placed(v.index), vars));
    if (v.kind == ScalarValue::Kind::kRandom && array_[id] != Array::kNone)
      return array_[id] == Array::kChunk ? fmt::format("{}[j]", ArrayName(id)) : fmt::format("{}[k][j]", ArrayName(id));
    if (v.kind == ScalarValue::Kind::kLoad) {
      if (array_[id] == Array::kChunk) return fmt::format("tf_cvt_{}({}[j])", DTypeName(v.dtype), ArrayName(id));
      if (array_[id] == Array::kCached && PackedCache(id))
        return fmt::format("tf_cvt_{}((uint16_t)({}[k][j / 2] >> (16 * (j % 2))))", DTypeName(v.dtype), ArrayName(id));
      if (array_[id] == Array::kCached) return fmt::format("tf_cvt_{}({}[k][j])", DTypeName(v.dtype), ArrayName(id));
      return fmt::format("tf_cvt_{}(b{}[{}])", DTypeName(v.dtype), v.buffer, PrintIndex(Placed(v.index), vars));
    }
    if (v.kind == ScalarValue::Kind::kOp) {  // arguments as Name prints them (the lane form's arrays too)
      std::vector<std::string> args;
      for (int a : v.args) args.push_back(Name(a));
      if (IsExpLessRowMax(k_, v) && !RowFillsRegisters()) return fmt::format("tf_exp_nonpositive({})", args[0]);
      if (v.op != OpCode::kCast)
        if (std::string fast = CudaFastForm(v, args, false, v.args.size() == 2 ? &k_.values[v.args[1]] : nullptr); !fast.empty())
          return fast;
      return CppOpExpression(v, args);
    }
    return CppValueExpression(v, vars);
  }

  // Emits `v` (and first what it needs) into the element scope `element` when it varies
  // per element, else into the row scope — or, when the row scope was already closed
  // over by an open loop, locally (correct, merely recomputed).
  void Emit(int v, std::vector<bool>* element, const std::string& indent) {
    const ScalarValue& value = k_.values[v];
    bool per_element = element && (!row_ || value.inner || !row_done_[v]);
    std::vector<bool>& done = per_element ? *element : row_done_;
    if (done[v]) return;
    if (array_[v] == Array::kFolded) {
      done[v] = true;
      out_ += fmt::format("{}const {} {} = {}[k][j];\n", indent, ComputeType(value.dtype), Name(v), ArrayName(v));
      return;
    }
    if (int chosen = KnownChoice(v); chosen >= 0) {  // a select whose test this part answers
      Emit(chosen, element, indent);
      done[v] = true;
      out_ += fmt::format("{}const {} {} = {}({});\n", indent, ComputeType(value.dtype), Name(v), ComputeType(value.dtype), Name(chosen));
      return;
    }
    for (int a : value.args) Emit(a, element, indent);
    EmitIndexValues(value.index, element, indent);
    done[v] = true;
    out_ += fmt::format("{}const {} {} = {};\n", indent, ComputeType(value.dtype), Name(v), Expression(value, v));
  }
  void EmitIndexValues(const Index& index, std::vector<bool>* element, const std::string& indent) {
    ForEachIndexValue(index, [&](int id) { Emit(id, element, indent); });
  }
  // Calls `visit` with every SSA value `index` reads (a gather's index), the expression first.
  template <typename Visit>
  static void ForEachIndexValue(const Index& index, const Visit& visit) {
    if (!index) return;
    if (index->kind == IndexExpr::Kind::kValue) visit(static_cast<int>(index->value));
    ForEachIndexValue(index->a, visit);
    ForEachIndexValue(index->b, visit);
  }

  // Walks what `v` needs: outer values are emitted at row scope now (before a loop opens);
  // inner loads are collected into `loads`.
  // With `emit` false it only collects (the row's loads are found before any pass runs,
  // when later reductions' results do not exist yet).
  void Prepare(int v, std::vector<bool>& seen, std::vector<int>& loads, const std::string& row_indent, bool emit = true) {
    if (seen[v]) return;
    seen[v] = true;
    const ScalarValue& value = k_.values[v];
    if (row_ && !value.inner) {
      if (emit) Emit(v, nullptr, row_indent);
      return;
    }
    if (array_[v] == Array::kFolded) return;
    if (value.kind == ScalarValue::Kind::kLoad || DrawnInBlocks(v)) loads.push_back(v);
    for (int a : value.args) Prepare(a, seen, loads, row_indent, emit);
    std::vector<const IndexExpr*> stack = {value.index.get()};
    while (!stack.empty()) {
      const IndexExpr* e = stack.back();
      stack.pop_back();
      if (!e) continue;
      if (e->kind == IndexExpr::Kind::kValue) Prepare(static_cast<int>(e->value), seen, loads, row_indent, emit);
      stack.push_back(e->a.get());
      stack.push_back(e->b.get());
    }
  }

  // In a concat part (codegen/concat_parts.h): i0 as the part's element, else unchanged.
  Index Placed(const Index& index) const { return subst_ ? SubstituteVar(index, 0, subst_) : index; }
  // The argument a select takes in this part, or -1 when its test is not decided here.
  int KnownChoice(int v) const {
    const ScalarValue& value = k_.values[v];
    if (known_.empty() || value.kind != ScalarValue::Kind::kOp || value.op != OpCode::kWhere || known_[value.args[0]] < 0) return -1;
    return value.args[known_[value.args[0]] ? 1 : 2];
  }
  // The loads `v` reads in this part (selects decided by the part read one side).
  void CollectPartLoads(int v, std::vector<bool>& seen, std::vector<int>& loads) const {
    if (seen[v]) return;
    seen[v] = true;
    const ScalarValue& value = k_.values[v];
    if (value.kind == ScalarValue::Kind::kLoad) loads.push_back(v);
    if (int chosen = KnownChoice(v); chosen >= 0) return CollectPartLoads(chosen, seen, loads);
    for (int a : value.args) CollectPartLoads(a, seen, loads);
  }

  // The vector loop's body for one part of a concat: i0 = q·period + lo + r, r = rs + j
  // (q and rs, the vector's first r, are defined by the caller).
  void EmitConcatPart(const ConcatParts& parts, int part) {
    const std::string in = "      ";
    subst_ = PartElement(parts, part, k_.outer);
    known_.assign(k_.values.size(), -1);
    for (int c : parts.comparisons) known_[c] = KnownInPart(k_, parts, part, c, k_.outer);
    const std::vector<std::string> start = {"rs", "q"};
    std::vector<bool> seen(k_.values.size(), false);
    std::vector<int> loads;
    for (const KernelStore& st : k_.stores) CollectPartLoads(st.value, seen, loads);
    for (int v : loads) {
      Index at = Placed(k_.values[v].index);
      if (!ContiguousAlignedIn(at, 0, c_.vector)) continue;
      array_[v] = Array::kChunk;
      out_ += fmt::format("{0}{1} {2}[kVec];\n{0}tf_vload<kVec>(b{3} + ({4}), {2});\n", in, StorageType(k_.values[v].dtype), ArrayName(v),
                          k_.values[v].buffer, PrintIndex(at, start));
    }
    std::vector<bool> vector_store;
    for (const KernelStore& st : k_.stores) {
      vector_store.push_back(ContiguousAlignedIn(Placed(st.index), 0, c_.vector));
      if (vector_store.back()) out_ += in + VectorStore(st).Declaration() + "\n";
    }
    vars_ = {"r", "q"};
    out_ += fmt::format("#pragma unroll\n{0}for (int j = 0; j < kVec; ++j) {{\n{0}  const tf_index_t r = rs + j;\n", in);
    std::vector<bool> element(k_.values.size(), false);
    for (size_t i = 0; i < k_.stores.size(); ++i) {
      const KernelStore& st = k_.stores[i];
      Emit(st.value, &element, in + "  ");
      std::string_view dt = DTypeName(k_.buffers[st.buffer].dtype);
      if (vector_store[i]) out_ += in + "  " + VectorStore(st).Element(Name(st.value)) + "\n";
      else out_ += fmt::format("{}  b{}[{}] = tf_pack_{}({});\n", in, st.buffer, PrintIndex(Placed(st.index), vars_), dt, Name(st.value));
    }
    out_ += in + "}\n";
    for (size_t i = 0; i < k_.stores.size(); ++i)
      if (vector_store[i])
        out_ += VectorStore(k_.stores[i]).Store(fmt::format("b{} + ({})", k_.stores[i].buffer, PrintIndex(Placed(k_.stores[i].index), start)), in);
    std::fill(array_.begin(), array_.end(), Array::kNone);
    subst_.reset();
    known_.clear();
    vars_ = {"i0", "i1"};
  }

  // ---- pointwise ----
  void EmitPointwiseKernel() {
    const int vec = c_.vector;
    const std::vector<std::string> vars = {"i0", "i1"};
    std::vector<bool> seen(k_.values.size(), false);
    std::vector<int> loads;
    for (const KernelStore& s : k_.stores) Prepare(s.value, seen, loads, "");
    out_ += fmt::format("  {} kElements = {};\n  constexpr int kVec = {};\n", OuterDeclaration(), KernelSizeText(k_, k_.outer_size, k_.outer), vec);
    out_ += "  const tf_index_t thread = (tf_index_t)blockIdx.x * blockDim.x + threadIdx.x;\n";
    out_ += "  const tf_index_t threads = (tf_index_t)gridDim.x * blockDim.x;\n";
    ConcatParts parts = FindConcatParts(k_, vec);
    if (!parts.cuts.empty()) {
      // A concat's output: each vector lies in one part. Numbered in memory order, a warp's
      // vectors span periods and it runs every part's code; so where the output holds whole
      // chunks of 32 periods, vectors are numbered part by part within each chunk: a warp's
      // 32 vectors then share their part, and the chunk's warps (neighbours in time) still
      // read the same few KB, from L1. (Part by part over the whole output read the inputs
      // once per part from HBM: rotary 150 us against 114 in memory order.)
      const int64_t periods = k_.outer / parts.period, per_period = parts.period / vec;
      const bool chunked = periods % 32 == 0;
      out_ += "  for (tf_index_t t = thread; t < kElements / kVec; t += threads) {\n";
      if (chunked) out_ += fmt::format("    const tf_index_t chunk = t / {0}, within = t % {0};\n", 32 * per_period);
      else out_ += fmt::format("    const tf_index_t q = t / {0}, rbase = t % {0} * kVec;\n", per_period);
      int64_t first = 0;  // the part's first vector in its chunk (chunked) or period
      for (size_t p = 0; p < parts.cuts.size(); ++p) {
        const bool last = p + 1 == parts.cuts.size();
        const int64_t end = last ? parts.period : parts.cuts[p + 1];
        const int64_t length = (end - parts.cuts[p]) / vec;
        if (last) out_ += "    } else {\n";
        else if (chunked) out_ += fmt::format("    {}if (within < {}) {{\n", p ? "} else " : "", first + 32 * length);
        else out_ += fmt::format("    {}if (rbase < {}) {{\n", p ? "} else " : "", end);
        if (chunked)
          out_ += fmt::format("      const tf_index_t q = chunk * 32 + (within - {0}) / {1}, rs = (within - {0}) % {1} * kVec;\n", first, length);
        else
          out_ += fmt::format("      const tf_index_t rs = rbase - {};\n", parts.cuts[p]);
        EmitConcatPart(parts, static_cast<int>(p));
        first += chunked ? 32 * length : length;
      }
      out_ += "    }\n  }\n";
    } else if (TakesLaneForm(k_, vec) && !SwitchedOff("TILEFUSE_LANES")) {
      EmitLaneForm();
    } else if (vec > 1) {
      out_ += "  for (tf_index_t base = thread * kVec; base + kVec <= kElements; base += threads * kVec) {\n";
      for (int v : loads) {
        const ScalarValue& value = k_.values[v];
        if (DrawnInBlocks(v)) {
          array_[v] = Array::kChunk;
          out_ += fmt::format("    float {}[kVec];\n", ArrayName(v)) + DrawBlocks(v, {"base", "0"}, ArrayName(v), "    ");
          continue;
        }
        if (!PointwiseVectorizable(value.index, vec)) continue;
        array_[v] = Array::kChunk;
        AffineIndex a;
        AsAffine(value.index, &a);
        out_ += fmt::format("    {} {}[kVec];\n    tf_vload<kVec>(b{} + base + {}, {});\n", StorageType(value.dtype), ArrayName(v),
                            value.buffer, a.offset, ArrayName(v));
      }
      std::vector<const KernelStore*> vector_stores;
      for (const KernelStore& s : k_.stores)
        if (PointwiseVectorizable(s.index, vec)) {
          vector_stores.push_back(&s);
          out_ += "    " + VectorStore(s).Declaration() + "\n";
        }
      out_ += "#pragma unroll\n    for (int j = 0; j < kVec; ++j) {\n      const tf_index_t i0 = base + j;\n";
      std::vector<bool> element(k_.values.size(), false);
      for (const KernelStore& s : k_.stores) {
        Emit(s.value, &element, "      ");
        std::string_view dt = DTypeName(k_.buffers[s.buffer].dtype);
        if (PointwiseVectorizable(s.index, vec)) out_ += "      " + VectorStore(s).Element(Name(s.value)) + "\n";
        else out_ += fmt::format("      b{}[{}] = tf_pack_{}({});\n", s.buffer, PrintIndex(s.index, vars), dt, Name(s.value));
      }
      out_ += "    }\n";
      for (const KernelStore* s : vector_stores) {
        AffineIndex a;
        AsAffine(s->index, &a);
        out_ += VectorStore(*s).Store(fmt::format("b{} + base + {}", s->buffer, a.offset), "    ");
      }
      out_ += "  }\n";
      std::fill(array_.begin(), array_.end(), Array::kNone);
    }
    // The tail (everything when not vectorised): one element per thread per step.
    // Where the vector loop stopped (it only runs with kVec > 1).
    out_ += fmt::format("  for (tf_index_t i0 = {} + thread; i0 < kElements; i0 += threads) {{\n",
                        vec > 1 ? "(kElements / kVec) * kVec" : "0");
    std::vector<bool> element(k_.values.size(), false);
    for (const KernelStore& s : k_.stores) {
      Emit(s.value, &element, "    ");
      out_ += fmt::format("    b{}[{}] = tf_pack_{}({});\n", s.buffer, PrintIndex(s.index, vars), DTypeName(k_.buffers[s.buffer].dtype),
                          Name(s.value));
    }
    out_ += "  }\n";
  }

  // ---- pointwise, lane form (codegen/vector_lanes.h) ----
  // The vector loop value by value: a value the same across the vector is computed once, as
  // a scalar of the vector's first element; any other is an array of kVec, filled by its own
  // unrolled loop over j. Contiguous loads — a depthwise convolution's taps over NHWC, whose
  // window row and column are uniform — come in as one aligned vector each. Printing in SSA
  // order keeps few arrays live: the taps' sum holds one partial sum and the tap in hand.
  void EmitLaneForm() {
    lanes_ = true;
    uniform_ = UniformAcrossVector(k_, c_.vector);
    lane_array_.assign(k_.values.size(), false);
    std::vector<bool> done(k_.values.size(), false);
    out_ += "  for (tf_index_t base = thread * kVec; base + kVec <= kElements; base += threads * kVec) {\n";
    out_ += "    const tf_index_t i0 = base;\n";
    if (const std::optional<InPlaceUpdate> update = FindInPlaceUpdate()) {
      EmitLanes(update->condition, done);
      out_ += fmt::format("    if (!({} != 0){}) continue;  // nothing changes here, and the output is the input's memory\n", Name(update->condition),
                          update->same_memory);
    }
    for (const KernelStore& s : k_.stores) EmitLanes(s.value, done);
    for (size_t i = 0; i < k_.stores.size(); ++i) {
      const KernelStore& s = k_.stores[i];
      const std::string_view dt = DTypeName(k_.buffers[s.buffer].dtype);
      if (Lanes(s.index) == LaneAccess::kContiguous) {
        const CudaVectorStore store(k_.buffers[s.buffer].dtype, fmt::format("o{}", i), c_.vector);
        out_ += fmt::format("    {}\n#pragma unroll\n    for (int j = 0; j < kVec; ++j) {}\n", store.Declaration(), store.Element(Name(s.value)));
        out_ += store.Store(fmt::format("b{} + ({})", s.buffer, PrintIndex(s.index, vars_)), "    ");
      } else {
        out_ += fmt::format("#pragma unroll\n    for (int j = 0; j < kVec; ++j) {{\n      const tf_index_t i0 = base + j;\n      b{}[{}] = tf_pack_{}({});\n    }}\n",
                            s.buffer, PrintIndex(s.index, vars_), dt, Name(s.value));
      }
    }
    out_ += "  }\n";
    lane_array_.clear();
  }
  // An update in place (transformers' static cache: the new key where the position is, every
  // other element as it was): every store writes where(c, new, the stored buffer's own input at
  // the store's index), c the same and uniform over a vector. Where the run hands the output
  // the input's memory (RunOnDevice's in-place outputs), a vector c leaves alone needs neither
  // its read nor its write, and a step's cache update costs the new position's bytes, not the
  // whole cache's twice. (Where the output is memory of its own the pointers differ and every
  // vector is copied.)
  struct InPlaceUpdate {
    int condition = -1;
    std::string same_memory;  // " && b3 == b2 && ..."
  };
  std::optional<InPlaceUpdate> FindInPlaceUpdate() const {
    InPlaceUpdate update;
    for (const KernelStore& s : k_.stores) {
      const ScalarValue& value = k_.values[s.value];
      if (value.kind != ScalarValue::Kind::kOp || value.op != OpCode::kWhere || value.args.size() != 3) return std::nullopt;
      const int c = value.args[0];
      const ScalarValue& old = k_.values[value.args[2]];
      if (!uniform_[c] || (update.condition >= 0 && c != update.condition) || old.kind != ScalarValue::Kind::kLoad ||
          k_.buffers[old.buffer].dtype != k_.buffers[s.buffer].dtype || old.dtype != k_.buffers[s.buffer].dtype || !old.index || !s.index ||
          PrintIndex(old.index, vars_) != PrintIndex(s.index, vars_) || Lanes(s.index) != LaneAccess::kContiguous)
        return std::nullopt;
      update.condition = c;
      update.same_memory += fmt::format(" && b{} == b{}", s.buffer, old.buffer);
    }
    if (update.condition < 0) return std::nullopt;
    return update;
  }
  LaneAccess Lanes(const Index& index) const {
    return ClassifyLanes(index, c_.vector, [&](int id) { return static_cast<bool>(uniform_[id]); });
  }
  void EmitLanes(int v, std::vector<bool>& done) {
    if (done[v]) return;
    const ScalarValue& value = k_.values[v];
    for (int a : value.args) EmitLanes(a, done);
    ForEachIndexValue(value.index, [&](int id) { EmitLanes(id, done); });
    done[v] = true;
    const std::string type = ComputeType(value.dtype);
    if (uniform_[v]) {
      out_ += fmt::format("    const {} v{} = {};\n", type, v, Expression(value, v));
      return;
    }
    if (value.kind == ScalarValue::Kind::kLoad && Lanes(value.index) == LaneAccess::kContiguous) {
      out_ += fmt::format("    {0} c{1}[kVec];\n    tf_vload<kVec>(b{2} + ({3}), c{1});\n", StorageType(value.dtype), v, value.buffer,
                          PrintIndex(value.index, vars_));
      out_ += fmt::format("    {0} v{1}[kVec];\n#pragma unroll\n    for (int j = 0; j < kVec; ++j) v{1}[j] = tf_cvt_{2}(c{1}[j]);\n", type, v,
                          DTypeName(value.dtype));
    } else {
      const bool reads_i0 = value.kind == ScalarValue::Kind::kLoad || value.kind == ScalarValue::Kind::kIndex;
      out_ += fmt::format("    {0} v{1}[kVec];\n#pragma unroll\n    for (int j = 0; j < kVec; ++j) {{\n{2}      v{1}[j] = {3};\n    }}\n", type, v,
                          reads_i0 ? "      const tf_index_t i0 = base + j;\n" : "", Expression(value, v));
    }
    lane_array_[v] = true;
  }
  // ---- row ----
  // Whether the row's length is printed over the symbols (a launch's value): where it is a
  // size in them and the row is not split over a cluster (its slices follow the length). A row
  // re-read per pass then serves every length; a row held in registers keeps its chunk count
  // in the text (its registers) and guards every chunk, so it serves every length of that
  // count (a decode step's softmax over past + 1 keys: a compile each kThreadsPerRow · kVec
  // keys, not each key).
  bool InnerAtLaunch() const { return row_ && c_.cluster == 1 && PrintsSymbolically(k_, k_.inner_size, k_.inner); }
  // Whether the rows are split over blocks (cuda_row_splits.h).
  bool Split() const { return row_ && c_.splits > 1; }
  // The elements of the row this block reduces: all of it, its CTA's slice in a cluster, or
  // its split's.
  int64_t Slice() const { return Split() ? RowSplitSlice(k_, c_.splits, c_.vector) : k_.inner / c_.cluster; }
  int64_t Chunks() const { return CeilDiv(Slice(), int64_t{c_.threads_per_row} * c_.vector); }
  // Whether the chunks cover the row exactly (no chunk guarded): never taken for a length
  // given at launch, which another binding may leave ragged.
  bool ChunksExact() const { return !InnerAtLaunch() && Chunks() * c_.threads_per_row * c_.vector == Slice(); }
  // Where this thread's first chunk starts, and the end of the block's part of the row.
  std::string FirstChunkStart() const {
    return c_.cluster > 1 || Split() ? "(slice_begin + (tf_index_t)lane * kVec)" : "((tf_index_t)lane * kVec)";
  }
  std::string PartEnd() const { return Split() ? "slice_end" : c_.cluster > 1 ? "slice_begin + kSlice" : "kInner"; }

  // The indent of the body of the loop OpenChunkLoop(indent) opens: one level in, two where
  // a held row's last chunks are guarded.
  std::string ChunkBody(const std::string& indent) const { return indent + (c_.cache_row && !ChunksExact() ? "    " : "  "); }
  // Opens the loop over this thread's chunks of the row: in registers' order (k unrolled)
  // when cached, else a strided loop. Returns the closing text.
  std::string OpenChunkLoop(const std::string& indent) {
    if (c_.cache_row) {
      out_ += fmt::format("{}#pragma unroll\n{}for (int k = 0; k < kChunks; ++k) {{\n", indent, indent);
      out_ += fmt::format("{}  const tf_index_t i1b = {}((tf_index_t)k * kThreadsPerRow + lane) * kVec;\n", indent,
                          c_.cluster > 1 ? "slice_begin + " : "");
      if (!ChunksExact()) {
        out_ += fmt::format("{}  if (i1b < {}) {{\n", indent, PartEnd());
        return fmt::format("{}  }}\n{}}}\n", indent, indent);
      }
      return fmt::format("{}}}\n", indent);
    }
    // Several chunks' loads in flight per thread: the loop has a constant trip count.
    out_ += fmt::format("{0}#pragma unroll 4\n{0}for (tf_index_t i1b = {1}; i1b < {2}; i1b += (tf_index_t)kThreadsPerRow * kVec) {{\n", indent,
                        FirstChunkStart(), PartEnd());
    return fmt::format("{}}}\n", indent);
  }

  // Per-chunk vector loads (row-invariant data, or everything when the row is not cached).
  void EmitChunkLoads(const std::vector<int>& loads, const std::string& indent) {
    for (int v : loads) {
      const ScalarValue& value = k_.values[v];
      if (array_[v] == Array::kCached) continue;
      if (DrawnInBlocks(v)) {
        array_[v] = Array::kChunk;
        out_ += fmt::format("{}float {}[kVec];\n", indent, ArrayName(v)) + DrawBlocks(v, {"i0", "i1b"}, ArrayName(v), indent);
        continue;
      }
      if (!RowVectorizable(value.index, c_.vector)) continue;
      array_[v] = Array::kChunk;
      out_ += fmt::format("{}{} {}[kVec];\n{}tf_vload<kVec>(b{} + ({}), {});\n", indent, StorageType(value.dtype), ArrayName(v), indent,
                          value.buffer, PrintIndex(value.index, {"i0", "i1b"}), ArrayName(v));
    }
  }
  void ForgetChunkLoads() {
    for (Array& a : array_)
      if (a == Array::kChunk) a = Array::kNone;
  }

  // The loads the reductions and the element stores reach, found without printing anything.
  std::vector<int> RowPassLoads() {
    std::vector<bool> seen(k_.values.size(), false);
    std::vector<int> loads;
    for (const KernelReduction& r : k_.reductions) Prepare(r.value, seen, loads, "", false);
    for (const KernelStore& s : k_.stores)
      if (UsesVar(s.index, 1)) Prepare(s.value, seen, loads, "", false);
    return loads;
  }
  // The loads of the row itself that a cached row holds in registers (and random values
  // drawn in blocks).
  std::vector<int> CachedRowLoads() {
    std::vector<int> cached;
    for (int v : RowPassLoads())
      if (IsRowDataLoad(k_, k_.values[v]) || DrawnInBlocks(v)) cached.push_back(v);
    return cached;
  }
  // With CudaKernelConfig::broadcast_with_row, the vectors every row reads alike, held in
  // registers beside the row.
  std::vector<int> BroadcastRowLoads() {
    std::vector<int> held;
    if (c_.broadcast_with_row)
      for (int v : RowPassLoads())
        if (IsRowBroadcastLoad(k_, k_.values[v], c_.vector)) held.push_back(v);
    return held;
  }

  // The load whose next row is copied into shared memory while a row computes, or -1. Where
  // a 1024-thread block holds its row in registers, an SM runs one block: its loads, block
  // reductions, exp passes and stores ran one after another, and the next row's loads waited
  // for the block to end (softmax over 65536 bf16 columns at 68% of copy bandwidth). Taken
  // for one such load read as 16-byte chunks, when there are more rows than SMs.
  int StagedLoad(const std::vector<int>& cached) const {
    if (c_.sm_count <= 0 || c_.threads != 1024 || c_.threads_per_row != c_.threads || c_.cluster != 1 || k_.outer <= c_.sm_count ||
        cached.size() != 1)
      return -1;
    const int v = cached[0];
    const ScalarValue& value = k_.values[v];
    AffineIndex affine;
    if (DrawnInBlocks(v) || !AsAffine(value.index, &affine) || affine.c1 != 1 || DTypeSize(value.dtype) * c_.vector != 16) return -1;
    return v;
  }

  // A value that every pass reaches the cached loads through, or -1: dropout + residual
  // before a layer norm reads the Philox draw, x and the residual only as
  // select(u >= p, x * scale, 0) + residual. Held in registers in place of the loads, it is
  // computed once a row instead of once a pass (3 times there), in fewer registers (4 bytes
  // an element instead of 8). Taken when it needs at most the loads' registers, and fewer or
  // in place of several loads; it must not need a reduction's result (it is computed before
  // the passes), and the stores along the row must index plainly.
  int FoldedRowValue(const std::vector<int>& cached) const {
    if (c_.cache_row != 1 || cached.empty()) return -1;
    const size_t n = k_.values.size();
    std::vector<bool> is_cached(n, false), reads_cached(n, false), needs_total(n, false);
    for (int v : cached) is_cached[v] = reads_cached[v] = true;
    for (size_t v = 0; v < n; ++v) {
      const ScalarValue& value = k_.values[v];
      needs_total[v] = value.kind == ScalarValue::Kind::kAccumulator;
      for (int a : ValueDependencies(value)) {
        reads_cached[v] = reads_cached[v] || reads_cached[a];
        needs_total[v] = needs_total[v] || needs_total[a];
      }
    }
    std::vector<int> roots;
    for (const KernelReduction& r : k_.reductions) roots.push_back(r.value);
    for (const KernelStore& st : k_.stores)
      if (UsesVar(st.index, 1)) {
        if (UsesValue(st.index)) return -1;
        roots.push_back(st.value);
      }
    int64_t cached_bytes = 0;
    for (int v : cached) cached_bytes += DrawnInBlocks(v) ? 4 : DTypeSize(k_.values[v].dtype);
    // The latest such value folds the most work; a value no path avoids cuts them all.
    for (int f = static_cast<int>(n) - 1; f >= 0; --f) {
      const ScalarValue& value = k_.values[f];
      if (is_cached[f] || !reads_cached[f] || needs_total[f] || !value.inner || value.kind != ScalarValue::Kind::kOp) continue;
      std::vector<bool> seen(n, false);
      std::vector<int> stack = roots;
      bool cut = true;
      while (!stack.empty() && cut) {
        const int v = stack.back();
        stack.pop_back();
        if (v == f || seen[v]) continue;
        seen[v] = true;
        cut = !is_cached[v];
        for (int a : ValueDependencies(k_.values[v])) stack.push_back(a);
      }
      if (!cut) continue;
      const int64_t bytes = std::string_view(ComputeType(value.dtype)) == "float" ? 4 : 8;  // double, int64_t: two registers
      if (bytes < cached_bytes || (bytes == cached_bytes && cached.size() > 1)) return f;
      return -1;
    }
    return -1;
  }

  // Each thread's cp.async of its chunks of row `row` (a variable) into its stage slots: from
  // one source pointer, chunk k an immediate offset on (the row is contiguous; an address per
  // chunk spilled at 64 registers a thread).
  std::string StageCopies(const std::string& row, const std::string& indent) const {
    const ScalarValue& value = k_.values[staged_];
    std::string text = fmt::format(
        "{0}const {1}* stage_source = b{2} + ({3});\n"
        "{0}#pragma unroll\n{0}for (int k = 0; k < kChunks; ++k) {{\n",
        indent, StorageType(value.dtype), value.buffer, PrintIndex(value.index, {row, "((tf_index_t)lane * kVec)"}));
    if (!ChunksExact()) text += indent + "  if (((tf_index_t)k * kThreadsPerRow + lane) * kVec < kInner)\n  ";
    text += fmt::format("{}  tf_cp_async16(&tf_row_stage[k * kThreadsPerRow + lane], stage_source + k * (kThreadsPerRow * kVec));\n", indent);
    return text + indent + "}\n";
  }

  void EmitRowKernel() {
    const int tpr = c_.threads_per_row;
    const std::vector<std::string> vars = {"i0", "i1"};
    out_ += fmt::format("  {} kRows = {};\n", OuterDeclaration(), KernelSizeText(k_, k_.outer_size, k_.outer));
    if (InnerAtLaunch()) {  // (kChunks only sizes a held row's registers)
      out_ += fmt::format("  const int64_t kInner = {};\n", KernelSizeText(k_, k_.inner_size, k_.inner));
      out_ += fmt::format("  constexpr int kVec = {}, kThreadsPerRow = {}{};\n", c_.vector, tpr,
                          c_.cache_row ? fmt::format(", kChunks = {}", Chunks()) : "");
    } else {
      out_ += fmt::format("  constexpr int64_t kInner = {};\n", k_.inner);
      out_ += fmt::format("  constexpr int kVec = {}, kThreadsPerRow = {}, kChunks = {};\n", c_.vector, tpr, Chunks());
    }
    // A row re-read per pass reads it once less where a max and a sum of exp(x - max) share
    // one pass (cross-entropy's logsumexp: 2 reads of the logits → 1; softmax: 3 → 2). A
    // cached row is read once anyway, and the online form costs an exp per chunk more —
    // except where the row spans a cluster: each reduction there waits at a barrier of the
    // cluster's CTAs, and the pair needs one for both.
    online_sum_.assign(k_.reductions.size(), -1);
    if ((!c_.cache_row && tpr > 1) || c_.cluster > 1)
      for (size_t r = 0; r < k_.reductions.size(); ++r) {
        online_sum_[r] = OnlineSumOf(k_, static_cast<int>(r));
        online_ = online_ || online_sum_[r] >= 0;
      }
    std::map<std::string, bool> scratch_types;
    for (const KernelReduction& r : k_.reductions) scratch_types[AccumulatorType(r)] = true;
    if (tpr == c_.threads && tpr > 32) {
      for (const auto& [type, unused] : scratch_types) out_ += fmt::format("  __shared__ {0} scratch_{0}[32];\n", type);
      for (size_t r = 0; r < k_.reductions.size(); ++r)
        if (online_sum_[r] >= 0) {
          out_ += fmt::format("  __shared__ {0} scratch_sum_{0}[32];\n", AccumulatorType(k_.reductions[r]));
          break;
        }
      // Each reduction's exchange across the cluster: every CTA's block total (the online
      // pair's max and sum together) in a slot per CTA, and the barrier counting them in.
      if (c_.cluster > 1)
        for (size_t r = 0; r < k_.reductions.size(); ++r) {
          if (SumOfAPair(r)) continue;  // exchanged with its max
          const int words = (online_sum_[r] >= 0 ? 2 : 1) * (AccumulatorType(k_.reductions[r]) == "float" ? 1 : 2);
          out_ += fmt::format("  __shared__ __align__(16) unsigned cluster_slots{}[{}];\n  __shared__ unsigned long long cluster_bar{};\n", r,
                              c_.cluster * words, r);
        }
    }
    const std::vector<int> cached = c_.cache_row ? CachedRowLoads() : std::vector<int>{};
    staged_ = StagedLoad(cached);
    if (tpr == 1) {
      out_ += "  const int lane = 0;\n";
      out_ += fmt::format("  for (tf_index_t i0 = (tf_index_t)blockIdx.x * {0} + threadIdx.x; i0 < kRows; i0 += (tf_index_t)gridDim.x * {0}) {{\n",
                          c_.threads);
    } else if (tpr == 32) {
      int rows_per_block = c_.threads / 32;
      out_ += "  const int lane = threadIdx.x & 31;\n";
      out_ += fmt::format("  for (tf_index_t i0 = (tf_index_t)blockIdx.x * {0} + threadIdx.x / 32; i0 < kRows; i0 += (tf_index_t)gridDim.x * {0}) {{\n",
                          rows_per_block);
    } else if (Split()) {
      out_ += fmt::format("  constexpr int kSplits = {};\n  constexpr tf_index_t kSlice = {};  // whole vectors\n", c_.splits, Slice());
      out_ += "  __shared__ bool finishes_row;\n  const int lane = threadIdx.x;\n";
      out_ += "  const tf_index_t i0 = blockIdx.x / kSplits, split = blockIdx.x % kSplits;\n";
      out_ += "  const tf_index_t slice_begin = split * kSlice, slice_end = slice_begin + kSlice < kInner ? slice_begin + kSlice : kInner;\n";
      out_ += "  if (i0 < kRows) {\n";
    } else if (c_.cluster > 1) {
      // The cluster's CTAs share row i0, a slice each; all of them or none enter (they share
      // the barriers of the reductions).
      out_ += fmt::format("  constexpr int kCluster = {0};\n  constexpr tf_index_t kSlice = kInner / kCluster;\n", c_.cluster);
      out_ += "  const int lane = threadIdx.x;\n  const tf_index_t slice_begin = (tf_index_t)tf_cluster_rank() * kSlice;\n";
      out_ += "  const tf_index_t i0 = blockIdx.x / kCluster;\n  if (i0 < kRows) {\n";
      out_ += "    if (threadIdx.x == 0) {\n";
      for (size_t r = 0; r < k_.reductions.size(); ++r)
        if (!SumOfAPair(r)) out_ += fmt::format("      tf_exchange_init(&cluster_bar{});\n", r);
      out_ += "    }\n    tf_exchange_start();  // the cluster waits for it before its first exchange\n";
    } else if (staged_ >= 0) {
      out_ += "  const int lane = threadIdx.x;\n"
              "  // Each thread's chunks of its block's next row, copied in while this row computes.\n"
              "  extern __shared__ uint4 tf_row_stage[];\n"
              "  if ((tf_index_t)blockIdx.x < kRows) {\n    const tf_index_t i0 = blockIdx.x;\n";
      out_ += StageCopies("i0", "    ");
      out_ += "  }\n  tf_cp_async_commit();\n  for (tf_index_t i0 = blockIdx.x; i0 < kRows; i0 += gridDim.x) {\n";
    } else if (c_.cache_row == 2 && k_.outer <= (int64_t{1} << 30)) {
      // A block per row and a block launched per row (work_blocks): no loop, so nothing is
      // carried across one (the row index and offsets were spilled across the grid-stride
      // loop of a softmax over 65536 bf16 columns held as pairs in 64 registers a thread).
      out_ += "  const int lane = threadIdx.x;\n";
      out_ += "  const tf_index_t i0 = blockIdx.x;\n  if (i0 < kRows) {\n";
    } else {
      out_ += "  const int lane = threadIdx.x;\n";
      out_ += "  for (tf_index_t i0 = blockIdx.x; i0 < kRows; i0 += gridDim.x) {\n";
    }
    const std::string ind = "    ";
    // Loads of the row itself, read once into registers when the row is cached (and with
    // them, if asked, the vectors every row reads alike).
    if (c_.cache_row) {
      std::vector<int> held = cached;
      const std::vector<int> beside = BroadcastRowLoads();
      held.insert(held.end(), beside.begin(), beside.end());
      for (int v : held)
        if (v == staged_) out_ += fmt::format("{}{} {}[kChunks][{}];\n", ind, PackedCache(v) ? "uint32_t" : StorageType(k_.values[v].dtype),
                                              ArrayName(v), PackedCache(v) ? "kVec / 2" : "kVec");
        else if (PackedCache(v))
          out_ += fmt::format("{0}uint32_t {1}[kChunks][kVec / 2];  // element pairs\n"
                              "{0}const uint32_t* {1}_base = (const uint32_t*)(b{2} + ({3}));\n",
                              ind, ArrayName(v), k_.values[v].buffer, PrintIndex(k_.values[v].index, {"i0", FirstChunkStart()}));
        else out_ += fmt::format("{}{} {}[kChunks][kVec];\n", ind, DrawnInBlocks(v) ? "float" : StorageType(k_.values[v].dtype), ArrayName(v));
      if (staged_ >= 0) out_ += ind + "tf_cp_async_wait_all();\n";
      std::string close = OpenChunkLoop(ind);
      std::string in = ChunkBody(ind);
      for (int v : held) {
        const ScalarValue& value = k_.values[v];
        if (v == staged_) {
          out_ += fmt::format("{}tf_sload16(&tf_row_stage[k * kThreadsPerRow + lane], {}[k]);\n", in, ArrayName(v));
        } else if (DrawnInBlocks(v)) {
          out_ += DrawBlocks(v, {"i0", "i1b"}, ArrayName(v) + "[k]", in);
        } else if (PackedCache(v)) {
          // From one base pointer: chunk k lies k * kThreadsPerRow * kVec elements on (the row
          // is contiguous), an immediate offset, where a 32-bit index per chunk made ptxas
          // hold a 64-bit address per chunk while the loads were in flight.
          out_ += fmt::format("{}tf_vload<kVec / 2>({}_base + k * (kThreadsPerRow * kVec / 2), {}[k]);\n", in, ArrayName(v), ArrayName(v));
        } else if (RowVectorizable(value.index, c_.vector)) {
          out_ += fmt::format("{}tf_vload<kVec>(b{} + ({}), {}[k]);\n", in, value.buffer, PrintIndex(value.index, {"i0", "i1b"}), ArrayName(v));
        } else {
          out_ += fmt::format("{}#pragma unroll\n{}for (int j = 0; j < kVec; ++j) {{ const tf_index_t i1 = i1b + j; {}[k][j] = b{}[{}]; }}\n", in,
                              in, ArrayName(v), value.buffer, PrintIndex(value.index, vars));
        }
      }
      out_ += close;
      if (staged_ >= 0) {
        // Past the last row the copies read this row again (in L2 by then): a branch around
        // them made ptxas spill 148 bytes of the cached row (and min(.., kRows - 1) 8 bytes).
        out_ += ind + "{\n" + ind + "  const tf_index_t next = i0 + (tf_index_t)gridDim.x < kRows ? i0 + (tf_index_t)gridDim.x : i0;\n";
        out_ += StageCopies("next", ind + "  ");
        out_ += ind + "  tf_cp_async_commit();\n" + ind + "}\n";
      }
      for (int v : held) array_[v] = Array::kCached;
      if (const int folded = staged_ < 0 ? FoldedRowValue(cached) : -1; folded >= 0) EmitFoldedRowValue(folded, ind);
    }
    std::vector<bool> in_online_pass(k_.reductions.size(), false);
    for (size_t r = 0; r < k_.reductions.size(); ++r) {
      if (in_online_pass[r]) continue;
      if (online_sum_[r] >= 0) {
        EmitOnlineMaxAndSum(static_cast<int>(r), online_sum_[r], ind);
        in_online_pass[online_sum_[r]] = true;
      } else {
        EmitReductionPass(static_cast<int>(r), ind);
      }
    }
    // A cluster's CTAs exchanged their totals into each other's slots: none reads another's
    // memory now, so none waits for the others before its stores. (One that exchanged nothing
    // still waits once for the arrival it started with.)
    if (c_.cluster > 1) out_ += ClusterStarted(ind);
    if (Split()) {
      EmitSplitHandOver(ind);
      EmitRowStores(ind + "  ");
      out_ += ind + "}\n";
    } else {
      EmitRowStores(ind);
    }
    out_ += "  }\n";
    if (staged_ >= 0) out_ += "  tf_cp_async_wait_all();  // no copy outlives the block\n";
  }

  // The folded row value's array, filled chunk by chunk from the cached loads; the passes
  // read it from there (Emit) and no longer reach the loads.
  void EmitFoldedRowValue(int folded, const std::string& ind) {
    std::vector<bool> seen(k_.values.size(), false);
    std::vector<int> loads;
    Prepare(folded, seen, loads, ind);
    out_ += fmt::format("{}{} {}[kChunks][kVec];  // folded: what every pass reads the row through\n", ind,
                        ComputeType(k_.values[folded].dtype), ArrayName(folded));
    std::string close = OpenChunkLoop(ind);
    std::string in = ChunkBody(ind);
    EmitChunkLoads(loads, in);
    out_ += fmt::format("{0}#pragma unroll\n{0}for (int j = 0; j < kVec; ++j) {{\n{0}  const tf_index_t i1 = i1b + j;\n", in);
    std::vector<bool> element(k_.values.size(), false);
    Emit(folded, &element, in + "  ");
    out_ += fmt::format("{0}  {1}[k][j] = {2};\n{0}}}\n", in, ArrayName(folded), Name(folded));
    out_ += close;
    ForgetChunkLoads();
    array_[folded] = Array::kFolded;
  }

  std::string AccumulatorType(const KernelReduction& r) const { return ComputeType(r.dtype); }
  // Store `s`'s register array o<buffer> when the template moves it as a vector (a vector
  // of 1 converts one element at a time).
  CudaVectorStore VectorStore(const KernelStore& s) const {
    return CudaVectorStore(k_.buffers[s.buffer].dtype, fmt::format("o{}", s.buffer), RowFillsRegisters() ? 1 : c_.vector);
  }
  // A row held as pairs fills a 1024-thread block's 64 registers a thread: there the cheaper
  // exp and the paired conversions, with fewer instructions to wait on, let ptxas keep more
  // values in flight than fit (softmax over 65536 bf16 columns spilled 44 bytes with both,
  // 36 with the exp alone, 8 with the pairs alone), so such rows keep the plainer forms.
  bool RowFillsRegisters() const { return row_ && c_.cache_row == 2 && c_.threads >= 1024; }

  void EmitReductionPass(int r, const std::string& ind) {
    const KernelReduction& red = k_.reductions[r];
    std::string acc_type = AccumulatorType(red);
    std::vector<bool> seen(k_.values.size(), false);
    std::vector<int> loads;
    Prepare(red.value, seen, loads, ind);
    const ReductionTraits& traits = GetReductionTraits(red.op);
    const std::string init = ReductionIdentity(red);
    const char* op = DeviceCombiner(traits.combiner);
    out_ += fmt::format("{}{} acc{} = {};\n", ind, acc_type, r, init);
    LaunderPackedCaches(ind);
    std::string close = OpenChunkLoop(ind);
    std::string in = ChunkBody(ind);
    EmitChunkLoads(loads, in);
    out_ += fmt::format("{}#pragma unroll\n{}for (int j = 0; j < kVec; ++j) {{\n{}  const tf_index_t i1 = i1b + j;\n", in, in, in);
    std::vector<bool> element(k_.values.size(), false);
    Emit(red.value, &element, in + "  ");
    out_ += fmt::format("{}  acc{} = {}::combine(acc{}, ({}){});\n{}}}\n", in, r, op, r, acc_type, Name(red.value), in);
    out_ += close;
    ForgetChunkLoads();
    const int tpr = c_.threads_per_row;
    if (tpr == 32) out_ += fmt::format("{}acc{} = tf_warp_reduce<32, {}>(acc{});\n", ind, r, op, r);
    else if (tpr > 32) out_ += fmt::format("{}acc{} = tf_block_reduce<{}, {}>(acc{}, scratch_{});\n", ind, r, c_.threads, op, r, acc_type);
    if (c_.cluster > 1)
      out_ += ClusterStarted(ind) + fmt::format("{0}acc{1} = tf_cluster_reduce<kCluster, {2}>(acc{1}, cluster_slots{1}, &cluster_bar{1});\n", ind, r, op);
    if (!Split()) EmitFinished(r, ind);  // else the row's last block, after the hand-over
  }

  // Reduction r's value from its total acc<r> (a mean's division).
  void EmitFinished(int r, const std::string& ind) {
    const KernelReduction& red = k_.reductions[r];
    const std::string acc_type = AccumulatorType(red);
    const int value = accumulator_value_.at(r);
    const std::string count = InnerAtLaunch() && red.count == k_.inner ? "kInner" : fmt::format("{}", red.count);
    std::string finished =
        GetReductionTraits(red.op).divides_by_count ? fmt::format("acc{} / {}({})", r, acc_type, count) : fmt::format("acc{}", r);
    out_ += fmt::format("{}const {} {} = ({})({});\n", ind, ComputeType(red.dtype), Name(value), ComputeType(red.dtype), finished);
    row_done_[value] = true;
  }

  // Rows split over blocks: each block's totals into scratch memory (8 bytes each), and the
  // row's last block to arrive combines them in split order and finishes them. Memory order as
  // the column template's hand-over: the totals fenced before the counter's atomic, the last
  // block fencing before it reads them through L2. Opens `if (finishes_row) {` at `ind`, its
  // body at ind + 2 spaces (the caller closes it).
  void EmitSplitHandOver(const std::string& ind) {
    // Slots and counters are addressed from blockIdx.x (row i0's splits are blocks i0 · kSplits
    // on), not from i0 and split kept live across the loop: ptxas put those on the stack.
    auto slot = [](size_t r, const std::string& block) { return fmt::format("(long long){} * kRows * kSplits + {}", r, block); };
    out_ += ind + "if (threadIdx.x == 0) {\n";
    for (size_t r = 0; r < k_.reductions.size(); ++r) out_ += fmt::format("{}  tf_store_partial(partials, {}, acc{});\n", ind, slot(r, "blockIdx.x"), r);
    out_ += ind + "}\n" + ind + "__threadfence();\n" + ind + "__syncthreads();\n" + ind + "if (threadIdx.x == 0) {\n";
    out_ += ind + "  const bool last = atomicAdd(row_counters + blockIdx.x / kSplits, 1u) == kSplits - 1;\n";
    out_ += ind + "  if (last) row_counters[blockIdx.x / kSplits] = 0;  // zero again for the next launch\n";
    out_ += ind + "  finishes_row = last;\n" + ind + "}\n" + ind + "__syncthreads();\n";
    out_ += ind + "if (finishes_row) {\n" + ind + "  __threadfence();\n";
    const std::string in = ind + "  ";
    for (size_t r = 0; r < k_.reductions.size(); ++r) {
      const KernelReduction& red = k_.reductions[r];
      const std::string type = AccumulatorType(red);
      const char* op = DeviceCombiner(GetReductionTraits(red.op).combiner);
      out_ += fmt::format("{}acc{} = {};\n{}for (int s = threadIdx.x; s < kSplits; s += kThreadsPerRow)\n", in, r, ReductionIdentity(red), in);
      out_ += fmt::format("{}  acc{} = {}::combine(acc{}, tf_load_partial<{}>(partials, {}));\n", in, r, op, r, type,
                          slot(r, "blockIdx.x / kSplits * kSplits + s"));
      out_ += fmt::format("{}acc{} = tf_block_reduce<{}, {}>(acc{}, scratch_{});\n", in, r, c_.threads, op, r, type);
      EmitFinished(static_cast<int>(r), in);
    }
  }

  // Reductions `max_r` (max of x) and `sum_r` (sum of exp(x - max)) combined as one pair:
  // one read of a row re-read per pass, one exchange across a cluster. Inside the loops the
  // max's accumulator value names the shift, so the sum's own program prints unchanged.
  void EmitOnlineMaxAndSum(int max_r, int sum_r, const std::string& ind) {
    const KernelReduction &max_red = k_.reductions[max_r], &sum_red = k_.reductions[sum_r];
    const std::string t = AccumulatorType(max_red);
    const int max_value = accumulator_value_.at(max_r), sum_value = accumulator_value_.at(sum_r);
    std::vector<bool> seen(k_.values.size(), false);
    std::vector<int> loads;
    row_done_[max_value] = true;  // declared in the loop (the shift), and after it
    Prepare(max_red.value, seen, loads, ind);
    Prepare(sum_red.value, seen, loads, ind);
    out_ += fmt::format("{}{} acc{} = -INFINITY, acc{} = 0;\n", ind, t, max_r, sum_r);
    LaunderPackedCaches(ind);
    if (const int pairs = PairsTakingTheMax(max_r); pairs >= 0) {
      EmitHeldMaxAndSum(max_r, sum_r, pairs, loads, ind);
    } else {
      EmitChunkwiseMaxAndSum(max_r, sum_r, loads, ind);
    }
    const int tpr = c_.threads_per_row;
    if (tpr == 32) out_ += fmt::format("{}tf_warp_reduce_max_sum<32>(acc{}, acc{});\n", ind, max_r, sum_r);
    else out_ += fmt::format("{0}tf_block_reduce_max_sum<{1}>(acc{2}, acc{3}, scratch_{4}, scratch_sum_{4});\n", ind, c_.threads, max_r, sum_r, t);
    if (c_.cluster > 1)
      out_ += ClusterStarted(ind) +
              fmt::format("{0}tf_cluster_reduce_max_sum<kCluster>(acc{1}, acc{2}, cluster_slots{1}, &cluster_bar{1});\n", ind, max_r, sum_r);
    out_ += fmt::format(
        "{0}// As the two passes give: with a max of -inf every exp(-inf - -inf) is NaN.\n"
        "{0}if (acc{1} == -INFINITY) acc{2} = NAN;\n"
        "{0}const {3} {4} = ({3})(acc{1});\n{0}const {5} {6} = ({5})(acc{2});\n",
        ind, max_r, sum_r, ComputeType(max_red.dtype), Name(max_value), ComputeType(sum_red.dtype), Name(sum_value));
    row_done_[sum_value] = true;
  }

  // The held half-type array whose elements, as loaded or widened to f32 or f64 (exact: the
  // max is the same), are the pair's max's value (a softmax's row), or -1. (A held row takes
  // the pair only where a cluster shares it.)
  int PairsTakingTheMax(int max_r) const {
    int v = k_.reductions[max_r].value;
    while (k_.values[v].kind == ScalarValue::Kind::kOp && k_.values[v].op == OpCode::kCast && k_.values[v].args.size() == 1 &&
           (k_.values[v].dtype == DType::kF32 || k_.values[v].dtype == DType::kF64))
      v = k_.values[v].args[0];
    const ScalarValue& value = k_.values[v];
    const bool half = IsHalf(value.dtype);
    return value.kind == ScalarValue::Kind::kLoad && half && array_[v] == Array::kCached && PackedCache(v) ? v : -1;
  }

  // The pair over a row held as pairs: the thread's max first, word by word on the packed
  // pairs (exact, no unpacking), then the sum of exp(x - max) against that one shift. An exp
  // an element, where the chunkwise form also rescaled the running sum once a chunk (an exp
  // per 8 elements more) and converted every element twice.
  void EmitHeldMaxAndSum(int max_r, int sum_r, int pairs, const std::vector<int>& loads, const std::string& ind) {
    const KernelReduction& max_red = k_.reductions[max_r];
    const std::string t = AccumulatorType(max_red), type(DTypeName(k_.values[pairs].dtype));
    out_ += fmt::format("{0}{{\n{0}  uint32_t pairs_max = tf_lowest_pair_{1};\n", ind, type);
    std::string close = OpenChunkLoop(ind + "  ");
    const std::string in = ChunkBody(ind + "  ");
    out_ += fmt::format("{0}#pragma unroll\n{0}for (int p = 0; p < kVec / 2; ++p) pairs_max = tf_max_pairs_{1}(pairs_max, {2}[k][p]);\n", in,
                        type, ArrayName(pairs));
    out_ += close;
    out_ += fmt::format("{0}  acc{1} = max_nan(tf_cvt_{2}((uint16_t)pairs_max), tf_cvt_{2}((uint16_t)(pairs_max >> 16)));\n{0}}}\n", ind,
                        max_r, type);
    // The shift is scoped: after the exchange the max's value is declared again, whole.
    out_ += fmt::format("{0}{{\n{0}  // exp(-inf - -inf) would be NaN: where every value is -inf, shift by 0.\n"
                        "{0}  const {1} {2} = acc{3} == -INFINITY ? {1}(0) : ({1})acc{3};\n",
                        ind, ComputeType(max_red.dtype), Name(accumulator_value_.at(max_r)), max_r);
    close = OpenChunkLoop(ind + "  ");
    EmitChunkLoads(loads, in);
    out_ += fmt::format("{0}#pragma unroll\n{0}for (int j = 0; j < kVec; ++j) {{\n{0}  const tf_index_t i1 = i1b + j;\n", in);
    std::vector<bool> element(k_.values.size(), false);
    Emit(k_.reductions[sum_r].value, &element, in + "  ");
    out_ += fmt::format("{0}  acc{1} += ({2}){3};\n{0}}}\n", in, sum_r, t, Name(k_.reductions[sum_r].value));
    out_ += close;
    ForgetChunkLoads();
    out_ += ind + "}\n";
  }

  // The pair chunk by chunk (a row re-read per pass, or held other than as the pairs the max
  // reads): the running max grows to take each chunk's, the sum is rescaled to it, then the
  // chunk's exps are added.
  void EmitChunkwiseMaxAndSum(int max_r, int sum_r, const std::vector<int>& loads, const std::string& ind) {
    const KernelReduction &max_red = k_.reductions[max_r], &sum_red = k_.reductions[sum_r];
    const std::string t = AccumulatorType(max_red);
    const int max_value = accumulator_value_.at(max_r);
    std::string close = OpenChunkLoop(ind);
    std::string in = ChunkBody(ind);
    EmitChunkLoads(loads, in);
    out_ += fmt::format("{0}{1} chunk_max = -INFINITY;\n{0}#pragma unroll\n{0}for (int j = 0; j < kVec; ++j) {{\n"
                        "{0}  const tf_index_t i1 = i1b + j;\n", in, t);
    std::vector<bool> element(k_.values.size(), false);
    Emit(max_red.value, &element, in + "  ");
    out_ += fmt::format(
        "{0}  chunk_max = tf_max::combine(chunk_max, ({1}){2});\n{0}}}\n"
        "{0}const {1} running_max = max_nan(acc{3}, chunk_max);\n"
        "{0}// exp(-inf - -inf) would be NaN: while every value so far is -inf, shift by 0.\n"
        "{0}const {5} {6} = running_max == -INFINITY ? {5}(0) : ({5})running_max;\n"
        "{0}acc{4} *= tf_exp_nonpositive(acc{3} - ({1}){6});\n"
        "{0}acc{3} = running_max;\n"
        "{0}#pragma unroll\n{0}for (int j = 0; j < kVec; ++j) {{\n{0}  const tf_index_t i1 = i1b + j;\n",
        in, t, Name(max_red.value), max_r, sum_r, ComputeType(max_red.dtype), Name(max_value));
    element.assign(k_.values.size(), false);
    Emit(sum_red.value, &element, in + "  ");
    out_ += fmt::format("{0}  acc{1} += ({2}){3};\n{0}}}\n", in, sum_r, t, Name(sum_red.value));
    out_ += close;
    ForgetChunkLoads();
  }

  // Whether reduction `r` is the sum of an online max-and-sum pair (exchanged with its max).
  bool SumOfAPair(size_t r) const { return std::find(online_sum_.begin(), online_sum_.end(), static_cast<int>(r)) != online_sum_.end(); }

  // Before a row kernel's first exchange across the cluster: every CTA has initialised its
  // barriers (tf_exchange_start at the top).
  std::string ClusterStarted(const std::string& ind) {
    if (cluster_started_) return "";
    cluster_started_ = true;
    return ind + "tf_cluster_wait();  // every CTA of the cluster has started (its barriers ready)\n";
  }

  void EmitRowStores(const std::string& ind) {
    const std::vector<std::string> vars = {"i0", "i1"};
    // Stores of one value per row: the row's first thread writes them.
    for (const KernelStore& s : k_.stores) {
      if (UsesVar(s.index, 1)) continue;
      Emit(s.value, nullptr, ind);
      out_ += fmt::format("{}if (lane == 0{}) b{}[{}] = tf_pack_{}({});\n", ind, c_.cluster > 1 ? " && slice_begin == 0" : "", s.buffer,
                          PrintIndex(s.index, vars),
                          DTypeName(k_.buffers[s.buffer].dtype), Name(s.value));
    }
    LaunderPackedCaches(ind);
    std::vector<const KernelStore*> element_stores;
    std::vector<bool> seen(k_.values.size(), false);
    std::vector<int> loads;
    for (const KernelStore& s : k_.stores)
      if (UsesVar(s.index, 1)) {
        element_stores.push_back(&s);
        Prepare(s.value, seen, loads, ind);
      }
    if (element_stores.empty()) return;
    std::string close = OpenChunkLoop(ind);
    std::string in = ChunkBody(ind);
    EmitChunkLoads(loads, in);
    for (const KernelStore* s : element_stores)
      if (RowVectorizable(s->index, c_.vector)) out_ += in + VectorStore(*s).Declaration() + "\n";
    out_ += fmt::format("{}#pragma unroll\n{}for (int j = 0; j < kVec; ++j) {{\n{}  const tf_index_t i1 = i1b + j;\n", in, in, in);
    std::vector<bool> element(k_.values.size(), false);
    for (const KernelStore* s : element_stores) {
      Emit(s->value, &element, in + "  ");
      std::string_view dt = DTypeName(k_.buffers[s->buffer].dtype);
      if (RowVectorizable(s->index, c_.vector)) out_ += in + "  " + VectorStore(*s).Element(Name(s->value)) + "\n";
      else out_ += fmt::format("{}  b{}[{}] = tf_pack_{}({});\n", in, s->buffer, PrintIndex(s->index, vars), dt, Name(s->value));
    }
    out_ += fmt::format("{}}}\n", in);
    for (const KernelStore* s : element_stores)
      if (RowVectorizable(s->index, c_.vector))
        out_ += VectorStore(*s).Store(fmt::format("b{} + ({})", s->buffer, PrintIndex(s->index, {"i0", "i1b"})), in);
    out_ += close;
    ForgetChunkLoads();
  }

  const Kernel& k_;
  CudaKernelConfig c_;
  bool row_;
  std::string out_;
  std::vector<Array> array_;
  std::vector<bool> row_done_;
  // Inside a concat part (EmitConcatPart): i0's replacement, the position tests' answers
  // (-1 undecided) and the index variables' names.
  Index subst_;
  std::vector<int> known_;
  std::vector<std::string> vars_ = {"i0", "i1"};
  std::map<int, int> accumulator_value_;
  // Per reduction: the sum reduction computed in its pass (EmitOnlineMaxAndSum), or -1.
  std::vector<int> online_sum_;
  bool online_ = false;
  bool cluster_started_ = false;
  int staged_ = -1;  // StagedLoad: the load whose next row is prefetched, or -1
  // The lane form: whether the kernel took it, its uniform values and (while its vector loop
  // is printed) the values held as arrays.
  bool lanes_ = false;
  std::vector<bool> uniform_;
  std::vector<bool> lane_array_;
};

}  // namespace

StatusOr<CudaKernelSource> EmitCudaKernel(const Kernel& kernel, const CudaKernelConfig& config) {
  const Kernel rewritten = RewriteForEmission(kernel, {.stored_casts = true});
  const CudaKernelConfig resolved = ResolveCudaConfig(rewritten, config);
  if (resolved.tile > 0 && IsRowKernel(rewritten)) return EmitColumnKernel(rewritten, FindColumnTiling(rewritten), resolved);
  if (resolved.tile > 0) return EmitTransposedKernel(rewritten, FindTransposedTiling(rewritten), resolved);
  StatusOr<CudaKernelSource> source = CudaEmitter(rewritten, resolved).Run();
  // A thread per output where the column template was not asked away: say why it refused.
  if (source.ok() && IsRowKernel(rewritten) && config.tile >= 0 && resolved.threads_per_row == 1)
    source->strategy += fmt::format(" (no column template: {})", FindColumnTiling(rewritten).why_not);
  return source;
}

CudaKernelSource LoopKernelSource(const Kernel& k, const CudaKernelConfig& c, const std::string& body, int64_t work_blocks, std::string strategy,
                                  const std::string& extra_parameters, int min_blocks, const std::vector<int>& unpassed, bool inner_at_launch) {
  CudaKernelSource s;
  s.name = k.name;
  s.config = c;
  s.threads = c.threads;
  s.function = fmt::format("extern \"C\" __global__ void __launch_bounds__({}{}) {}(", c.threads,
                           min_blocks > 0 ? fmt::format(", {}", min_blocks) : "", k.name);
  auto passed = [&](size_t b) { return std::find(unpassed.begin(), unpassed.end(), static_cast<int>(b)) == unpassed.end(); };
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    if (!passed(b)) continue;
    const KernelBuffer& buf = k.buffers[b];
    s.function += fmt::format("{}{}{}* __restrict__ b{}", s.num_params++ ? ", " : "", buf.is_output ? "" : "const ", StorageType(buf.dtype), b);
  }
  const std::vector<int> symbols = PrintedSymbols(k, inner_at_launch);
  for (int id : symbols) s.function += fmt::format("{}const long long tf_sym_arg{}", s.num_params++ ? ", " : "", id);
  s.function += extra_parameters + ") {\n" + kAwaitPriorGrid;
  // 32-bit index arithmetic (cheaper, and divisions by constants much cheaper) when
  // every offset and loop bound fits with room for the grid-stride step.
  int64_t largest = k.outer * std::max<int64_t>(1, k.inner);
  for (const KernelBuffer& b : k.buffers) largest = std::max(largest, b.elements);
  s.function += fmt::format("  typedef {} tf_index_t;\n", largest < (int64_t{1} << 30) ? "int" : "int64_t");
  // The symbols in the index type: a division by a launch's length in 32 bits, not 64 (the
  // sizes they give are among the elements counted above).
  for (int id : symbols) s.function += fmt::format("  const tf_index_t tf_sym{0} = (tf_index_t)tf_sym_arg{0};\n", id);
  s.function += body + "}\n";
  s.launch.awaits_prior_grid = true;
  s.work_blocks = work_blocks;
  s.strategy = std::move(strategy);
  s.launch.grid = {s.work_blocks, 1, 1};
  s.launch.block = {s.threads, 1, 1};
  for (size_t b = 0; b < k.buffers.size(); ++b)
    if (passed(b)) s.launch.args.push_back({LaunchArg::Kind::kBuffer, k.buffers[b].node, {}, 0});
  for (int id : symbols) s.launch.args.push_back({LaunchArg::Kind::kScalar, -1, {}, k.symbols[static_cast<size_t>(id)]});
  return s;
}

void FinishTemplateSource(CudaKernelSource& s, std::string function, int64_t shared_bytes, bool awaits_in_skeleton) {
  // The wait goes first in the kernel's body: after the signature, whose parameters hold no
  // brace (tables and structs the emitter writes before the signature may).
  const size_t signature = function.find("extern \"C\" __global__");
  const size_t body = signature == std::string::npos ? std::string::npos : function.find("{\n", signature);
  TF_CHECK_MSG(body != std::string::npos, "a template kernel without its signature");
  if (!awaits_in_skeleton) function.insert(body + 2, kAwaitPriorGrid);
  s.launch.awaits_prior_grid = true;
  s.function = std::move(function);
  s.num_params = static_cast<int>(s.launch.args.size());
  s.launch.grid = {s.work_blocks, 1, 1};
  s.launch.block = {s.threads, 1, 1};
  s.launch.dynamic_shared_bytes = shared_bytes;
}

std::string CudaTranslationUnit(const std::vector<CudaKernelSource>& kernels) {
  // In namespace tf, the device library's scalar functions are what ops.def's expressions
  // call (tilefuse_device.cuh).
  // The device and tile libraries first, then each skeleton once.
  std::vector<std::string> includes = {"tilefuse_device.cuh", "tilefuse_tiles.cuh"};
  for (const CudaKernelSource& k : kernels)
    for (const std::string& header : k.includes)
      if (std::find(includes.begin(), includes.end(), header) == includes.end()) includes.push_back(header);
  std::string out = "// tilefuse generated CUDA kernels\n";
  if (std::any_of(kernels.begin(), kernels.end(), [](const CudaKernelSource& k) { return k.trigger_before_wait; }))
    out += "#define TF_TRIGGER_BEFORE_WAIT 1\n";
  for (const std::string& header : includes) out += fmt::format("#include \"{}\"\n", header);
  out += "\nnamespace tf {\n";
  for (const CudaKernelSource& k : kernels) out += "\n" + k.function;
  out += "\n}  // namespace tf\n";
  return out;
}

}  // namespace tilefuse
