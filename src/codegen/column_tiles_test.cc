// The column template: which reduction kernels take it (the analysis of
// codegen/column_tiles.h), the configuration it resolves, and the source it emits, compiled
// through NVRTC for sm_90a (skipped without NVRTC). GPU runs: scripts/gpu-check.sh runs
// tests/conv/se_pool_nhwc_bf16 and tests/conv/column_reductions_f32 against the reference.
#include "codegen/column_tiles.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>
#include <iostream>

#include "backend/cuda/nvrtc_compiler.h"
#include "codegen/cuda/cuda_column_emitter.h"
#include "codegen/kernel_verifier.h"
#include "testing/lower_test_util.h"
#include "testing/file_check.h"
#include "tune/cuda_search_space.h"

namespace tilefuse {
namespace {

Kernel ReduceOf(OpCode op, DType dtype, const Shape& shape, const std::vector<int64_t>& axes) {
  GraphBuilder b;
  b.Output(b.Reduce(op, b.Parameter("x", dtype, shape), axes, false), "y");
  return LowerSingleGroup(b);
}

// MobileNetV3-small's first squeeze-excitation pool, channels-last: 512 outputs of 3136 pixels.
Kernel SePool() { return ReduceOf(OpCode::kReduceMean, DType::kBF16, {32, 56, 56, 16}, {1, 2}); }

// Variance after mean over axis 0 of f32[500, 96], as one kernel (the planner splits it; the
// template must still take the chained form right): r1 reads r0's result.
Kernel ChainedVariance() {
  Kernel k;
  k.name = "chained_variance";
  k.kind = GroupKind::kReduction;
  k.outer = 96;
  k.inner = 500;
  k.buffers = {{0, DType::kF32, 500 * 96, false}, {1, DType::kF32, 96, true}};
  auto value = [&](ScalarValue::Kind kind, OpCode op, std::vector<int> args, int reduction) {
    ScalarValue v;
    v.kind = kind;
    v.op = op;
    v.args = std::move(args);
    v.reduction = reduction;
    v.inner = reduction < 0;
    if (kind == ScalarValue::Kind::kLoad) {
      v.buffer = 0;
      v.index = IndexAdd(IndexMul(IndexVar(1, 500), 96), IndexVar(0, 96));
    }
    k.values.push_back(std::move(v));
    return static_cast<int>(k.values.size()) - 1;
  };
  using K = ScalarValue::Kind;
  const int x = value(K::kLoad, OpCode::kAdd, {}, -1);
  const int mean = value(K::kAccumulator, OpCode::kAdd, {}, 0);
  const int d = value(K::kOp, OpCode::kSub, {x, mean}, -1);
  const int d2 = value(K::kOp, OpCode::kMul, {d, d}, -1);
  const int variance = value(K::kAccumulator, OpCode::kAdd, {}, 1);
  k.reductions = {{OpCode::kReduceMean, x, 500, DType::kF32}, {OpCode::kReduceMean, d2, 500, DType::kF32}};
  k.stores = {{1, variance, IndexVar(0, 96)}};
  return k;
}

CudaKernelSource Emit(const Kernel& k, const CudaKernelConfig& c = {}) {
  auto source = EmitCudaKernel(k, c);
  EXPECT_TRUE(source.ok()) << source.status().ToString();
  return source.ok() ? *source : CudaKernelSource{};
}

TEST(ColumnTilesTest, NhwcGlobalAveragePoolTakesTheColumnTemplate) {
  const Kernel k = SePool();
  const ColumnTiling t = FindColumnTiling(k);
  ASSERT_TRUE(t.tiled()) << t.why_not;
  EXPECT_EQ(t.output_dims, (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(t.row_dims, (std::vector<int64_t>{56, 56}));
  EXPECT_EQ(t.columns, 16);
  EXPECT_EQ(t.vector, 8) << "16 bytes of bf16";
  EXPECT_FALSE(t.chained);
  ASSERT_EQ(t.loads.size(), 1u);
  EXPECT_EQ(PrintIndex(t.loads[0].row_offset, {"i0", "i1"}), "i1 * 16") << "h and w read as one dim";
  const CudaKernelConfig c = ResolveCudaConfig(k, {});
  EXPECT_EQ(c.tile, 16);
  EXPECT_EQ(c.threads, 256);
  EXPECT_EQ(c.threads_per_row, 128);
  EXPECT_EQ(c.splits, 6) << "32 tiles: split to fill the GPU, each thread folding at least 4 pixels";
  const CudaKernelSource s = Emit(k);
  EXPECT_EQ(s.strategy, "column 16x128 x8, 6 splits");
  EXPECT_EQ(s.work_blocks, 32 * 6);
  EXPECT_EQ(s.launch.scratch_bytes, kScratchCounterBytes + 32 * 6 * 16 * 4) << "the counters region, then every split's partials";
  ASSERT_EQ(s.launch.args.size(), 4u);
  EXPECT_EQ(s.launch.args[3].kind, LaunchArg::Kind::kScratch);
  EXPECT_TRUE(MatchesChecks(s.function, R"(
    CHECK: unsigned* __restrict__ tile_counters, float* __restrict__ partials
    CHECK: const uint16_t* p0 = b0 + (((first / 16) * 50176 + (first % 16)));
    CHECK: for (tf_index_t i1 = row_begin + ty; i1 < row_end; i1 += kRowThreads) {
    CHECK-NEXT: uint16_t l0[kVec];
    CHECK-NEXT: tf_vload<kVec>(p0 + (i1 * 16), l0);
    CHECK: tf_warp_reduce_strided<kColumnThreads, tf_sum>
    CHECK: atomicAdd(tile_counters + tile, 1u) == kSplits - 1
    CHECK: finished[0][t] = total / float(3136);
    CHECK: b1[i0] = tf_pack_bf16(
  )"));
}

TEST(ColumnTilesTest, SumOverTheRowsOfAMatrix) {
  const Kernel k = ReduceOf(OpCode::kReduceSum, DType::kF32, {1000, 70}, {0});
  const ColumnTiling t = FindColumnTiling(k);
  ASSERT_TRUE(t.tiled()) << t.why_not;
  EXPECT_EQ(t.columns, 70);
  EXPECT_EQ(t.vector, 2) << "70 columns: 4 floats would cross a row";
  EXPECT_EQ(Emit(k).strategy, "column 64x8 x2, 31 splits");
}

TEST(ColumnTilesTest, MaxOverAMiddleAxis) {
  const Kernel k = ReduceOf(OpCode::kReduceMax, DType::kF16, {5, 300, 24}, {1});
  const ColumnTiling t = FindColumnTiling(k);
  ASSERT_TRUE(t.tiled()) << t.why_not;
  EXPECT_EQ(t.output_dims, (std::vector<int64_t>{5, 24}));
  EXPECT_EQ(t.vector, 8);
  const CudaKernelSource s = Emit(k);
  EXPECT_EQ(s.strategy, "column 32x64 x8") << "300 rows: one split";
  EXPECT_NE(s.function.find("tf_max::combine"), std::string::npos);
  EXPECT_EQ(s.function.find("atomicAdd"), std::string::npos);
}

// A 7x7 pool at the end of a ResNet: few rows, many outputs: wide tiles, no split.
TEST(ColumnTilesTest, ShortPoolsTakeWideTiles) {
  const CudaKernelConfig c = ResolveCudaConfig(ReduceOf(OpCode::kReduceMean, DType::kBF16, {32, 7, 7, 512}, {1, 2}), {});
  EXPECT_EQ(c.tile, 64);
  EXPECT_EQ(c.threads, 256);
  EXPECT_EQ(c.splits, 1);
}

TEST(ColumnTilesTest, ChainedReductionsTakeOneSplit) {
  const Kernel k = ChainedVariance();
  ASSERT_TRUE(VerifyKernel(k).ok()) << VerifyKernel(k).ToString();
  const ColumnTiling t = FindColumnTiling(k);
  ASSERT_TRUE(t.tiled()) << t.why_not;
  EXPECT_TRUE(t.chained);
  EXPECT_EQ(ResolveCudaConfig(k, {}).splits, 1);
  const CudaKernelSource s = Emit(k);
  EXPECT_TRUE(MatchesChecks(s.function, R"(
    CHECK: // r1: reduce_mean of v3
    CHECK: f0[j] = finished[0][tx * kVec + j];
    CHECK: const float v1 = f0[j];
  )"));
  CudaKernelConfig split = ResolveCudaConfig(k, {});
  split.splits = 2;
  auto refused = EmitCudaKernel(k, split);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("earlier one's result"), std::string::npos) << refused.status().ToString();
}

TEST(ColumnTilesTest, RefusesWhatItCannotTile) {
  auto why_not = [](const Kernel& k) { return FindColumnTiling(k).why_not; };
  EXPECT_NE(why_not(ReduceOf(OpCode::kReduceSum, DType::kF32, {64, 128}, {1})).find("a row reduction"), std::string::npos);
  EXPECT_NE(why_not(ReduceOf(OpCode::kReduceSum, DType::kF64, {64, 128}, {0})).find("accumulates in f32"), std::string::npos);
  {  // rows picked by a gather: no affine index
    GraphBuilder b;
    Value table = b.Parameter("t", DType::kF32, {1000, 64}), ids = b.Parameter("i", DType::kI64, {300});
    b.Output(b.Reduce(OpCode::kReduceSum, b.Gather(table, ids, 0), {0}, false), "y");
    EXPECT_NE(why_not(LowerSingleGroup(b)).find("gathered"), std::string::npos);
  }
  Kernel broadcast_back = ChainedVariance();  // and the centred values stored per element
  broadcast_back.buffers.push_back({2, DType::kF32, 500 * 96, true});
  broadcast_back.stores.push_back({2, 2, broadcast_back.values[0].index});
  ASSERT_TRUE(VerifyKernel(broadcast_back).ok()) << VerifyKernel(broadcast_back).ToString();
  EXPECT_NE(why_not(broadcast_back).find("stores per reduced element"), std::string::npos);
  GraphBuilder b;
  b.Output(b.Unary(OpCode::kRelu, b.Parameter("x", DType::kF32, {4096})), "y");
  EXPECT_EQ(why_not(LowerSingleGroup(b)), "not a reduction kernel");
  // The row template where asked for, and for what the analysis refuses.
  EXPECT_EQ(Emit(SePool(), {.tile = -1}).strategy, "row: thread per row, row re-read per pass x1");
  EXPECT_EQ(ResolveCudaConfig(ReduceOf(OpCode::kReduceSum, DType::kF32, {64, 128}, {1}), {}).tile, -1);
}

TEST(ColumnTilesTest, InvalidConfigurationsAreRefused) {
  const Kernel k = SePool();
  const CudaKernelConfig base = ResolveCudaConfig(k, {});
  for (auto change : std::vector<void (*)(CudaKernelConfig&)>{
           [](CudaKernelConfig& c) { c.vector = 16; },     // past the loads' alignment
           [](CudaKernelConfig& c) { c.tile = 24; },       // not a power of two
           [](CudaKernelConfig& c) { c.tile = 512; },      // 64 vectors across
           [](CudaKernelConfig& c) { c.splits = 4000; },   // more splits than rows
       }) {
    CudaKernelConfig c = base;
    change(c);
    EXPECT_FALSE(EmitCudaKernel(k, c).ok()) << CudaConfigToJson(c).dump();
  }
}

// Every kernel above, in every configuration the tuner tries, compiles for sm_90a without
// spilling (the ptxas report printed for the record).
TEST(ColumnTilesTest, EveryCandidateCompilesForSm90aWithoutSpills) {
  auto nvrtc = NvrtcCompiler::Create((std::filesystem::temp_directory_path() / "tilefuse_test_cache").string());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available: column kernels not compiled";
  std::vector<CudaKernelSource> sources;
  const std::vector<Kernel> kernels = {SePool(), ReduceOf(OpCode::kReduceSum, DType::kF32, {1000, 70}, {0}),
                                       ReduceOf(OpCode::kReduceMax, DType::kF16, {5, 300, 24}, {1}),
                                       ReduceOf(OpCode::kReduceMean, DType::kBF16, {32, 7, 7, 512}, {1, 2}), ChainedVariance()};
  for (size_t i = 0; i < kernels.size(); ++i) {
    const CudaSearchSpace space = CudaCandidates(kernels[i]);
    EXPECT_GE(space.candidates.size(), 6u);
    EXPECT_EQ(space.candidates.back().tile, -1) << "the row template is a candidate";
    for (size_t c = 0; c < space.candidates.size(); ++c) {
      Kernel k = kernels[i];
      k.name = fmt::format("column{}_{}", i, c);
      auto source = EmitCudaKernel(k, space.candidates[c]);
      ASSERT_TRUE(source.ok()) << CudaConfigToJson(space.candidates[c]).dump() << ": " << source.status().ToString();
      sources.push_back(*source);
    }
  }
  auto cubin = nvrtc->Compile(CudaTranslationUnit(sources), "sm_90a");
  ASSERT_TRUE(cubin.ok()) << cubin.status().ToString();
  const std::vector<PtxasKernelInfo> report = ParsePtxasLog(cubin->ptxas_log);
  EXPECT_EQ(report.size(), sources.size());
  for (const PtxasKernelInfo& info : report) {
    EXPECT_EQ(info.spill_store_bytes, 0) << info.line;
    EXPECT_EQ(info.spill_load_bytes, 0) << info.line;
    if (info.name.ends_with("_0")) std::cout << info.name << ": " << info.registers << " registers\n";
  }
}

}  // namespace
}  // namespace tilefuse
