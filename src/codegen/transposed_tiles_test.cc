// The tiled-transpose template: which pointwise kernels take it (the analysis of
// codegen/transposed_tiles.h), the shared-memory layout it picks, and the source it emits.
#include "codegen/transposed_tiles.h"

#include <gtest/gtest.h>

#include "codegen/cuda/cuda_emitter.h"
#include "testing/lower_test_util.h"
#include "codegen/transposed_tile_layout.h"
#include "testing/file_check.h"

namespace tilefuse {
namespace {

Kernel ReluOfTranspose(DType dtype, const Shape& shape, const std::vector<int64_t>& perm) {
  GraphBuilder b;
  b.Output(b.Unary(OpCode::kRelu, b.Transpose(b.Parameter("x", dtype, shape), perm)), "y");
  return LowerSingleGroup(b);
}

const ScalarValue& StagedValue(const Kernel& k, const TransposedTiling& t, size_t i) { return k.values[t.loads[i].value]; }

TEST(TransposedTilesTest, NhwcToNchwTilesChannelsAgainstThePlane) {
  Kernel k = ReluOfTranspose(DType::kBF16, {32, 56, 56, 64}, {0, 3, 1, 2});
  TransposedTiling t = FindTransposedTiling(k);
  ASSERT_TRUE(t.tiled()) << t.why_not;
  EXPECT_EQ(t.dims, (std::vector<int64_t>{32, 64, 3136})) << "h and w merged: the load reads them as one dim too";
  EXPECT_EQ(t.across, 1);
  ASSERT_EQ(t.loads.size(), 1u);
  EXPECT_EQ(t.loads[0].coefficients, (std::vector<int64_t>{200704, 1, 64}));
  EXPECT_EQ(t.loads[0].offset, 0);
}

TEST(TransposedTilesTest, NchwToNhwcTilesThePlaneAgainstChannels) {
  Kernel k = ReluOfTranspose(DType::kF32, {8, 64, 30, 34}, {0, 2, 3, 1});
  TransposedTiling t = FindTransposedTiling(k);
  ASSERT_TRUE(t.tiled()) << t.why_not;
  EXPECT_EQ(t.dims, (std::vector<int64_t>{8, 1020, 64}));
  EXPECT_EQ(t.across, 1);
  EXPECT_EQ(t.loads[0].coefficients, (std::vector<int64_t>{65280, 1, 1020}));
}

TEST(TransposedTilesTest, MatrixTranspose) {
  TransposedTiling t = FindTransposedTiling(ReluOfTranspose(DType::kBF16, {384, 512}, {1, 0}));
  ASSERT_TRUE(t.tiled()) << t.why_not;
  EXPECT_EQ(t.dims, (std::vector<int64_t>{512, 384}));
  EXPECT_EQ(t.across, 0);
}

TEST(TransposedTilesTest, KernelsWithoutATransposedLoadKeepTheFlatTemplate) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kBF16, {32, 64, 56, 56}), bias = b.Parameter("b", DType::kBF16, {64, 1, 1});
  b.Output(b.Unary(OpCode::kRelu, b.Add(x, bias)), "y");
  TransposedTiling t = FindTransposedTiling(LowerSingleGroup(b));
  EXPECT_FALSE(t.tiled());
  EXPECT_NE(t.why_not.find("is transposed against the output"), std::string::npos) << t.why_not;
}

TEST(TransposedTilesTest, ShortDimsKeepTheFlatTemplate) {
  // An RGB image to NHWC: three channels, each read as a contiguous run already.
  TransposedTiling rgb = FindTransposedTiling(ReluOfTranspose(DType::kF32, {4, 3, 64, 64}, {0, 2, 3, 1}));
  EXPECT_FALSE(rgb.tiled());
  EXPECT_NE(rgb.why_not.find("short"), std::string::npos) << rgb.why_not;
  // And back: the output's rows are 4096 long, the load's contiguous dim 3.
  EXPECT_FALSE(FindTransposedTiling(ReluOfTranspose(DType::kF32, {4, 64, 64, 3}, {0, 3, 1, 2})).tiled());
}

TEST(TransposedTilesTest, SmallTransposedOperandsAreReadInPlace) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {32, 64, 56}), small = b.Parameter("s", DType::kF32, {56, 64});
  b.Output(b.Add(x, b.Transpose(small, {1, 0})), "y");
  TransposedTiling t = FindTransposedTiling(LowerSingleGroup(b));
  EXPECT_FALSE(t.tiled());
  EXPECT_NE(t.why_not.find("no load of 4096 elements or more"), std::string::npos) << t.why_not;
}

TEST(TransposedTilesTest, RowKernelsAreNotTiled) {
  GraphBuilder b;
  b.Output(b.Reduce(OpCode::kReduceSum, b.Transpose(b.Parameter("x", DType::kF32, {64, 128}), {1, 0}), {1}, false), "y");
  EXPECT_EQ(FindTransposedTiling(LowerSingleGroup(b)).why_not, "not a pointwise kernel");
}

// A residual in the output's layout and a per-channel bias beside the transposed input: only
// the transposed load is staged; two transposed loads of the same permutation share the tile.
TEST(TransposedTilesTest, OnlyTransposedLoadsAreStagedAndTheyShareTheTile) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kBF16, {4, 64, 28, 28}), x2 = b.Parameter("x2", DType::kBF16, {4, 64, 28, 28});
  Value r = b.Parameter("r", DType::kBF16, {4, 28, 28, 64}), bias = b.Parameter("b", DType::kBF16, {64});
  Value t = b.Add(b.Transpose(x, {0, 2, 3, 1}), b.Transpose(x2, {0, 2, 3, 1}));
  b.Output(b.Unary(OpCode::kRelu, b.Add(b.Add(t, r), bias)), "y");
  Kernel k = LowerSingleGroup(b);
  TransposedTiling tiling = FindTransposedTiling(k);
  ASSERT_TRUE(tiling.tiled()) << tiling.why_not;
  ASSERT_EQ(tiling.loads.size(), 2u);
  EXPECT_NE(k.buffers[StagedValue(k, tiling, 0).buffer].node, k.buffers[StagedValue(k, tiling, 1).buffer].node);
  auto source = EmitCudaKernel(k);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_TRUE(MatchesChecks(source->function, R"(
    CHECK: __shared__ __align__(16) uint16_t s0[64 * 68];
    CHECK-NEXT: __shared__ __align__(16) uint16_t s1[64 * 68];
    CHECK: __syncthreads();
    CHECK: tf_vload<8>(b
    CHECK-SAME: + offset + 0, c
    CHECK: tf_cvt_bf16(s0[(row + j) * 68 + column])
    CHECK: tf_cvt_bf16(s1[(row + j) * 68 + column])
    CHECK: tf_pack2_bf16(o
    CHECK: tf_vstore<4>(reinterpret_cast<uint32_t*>(b
  )"));
}

// relu + transpose of bf16 [32,56,56,64] NHWC into NCHW: 16-byte loads along channels into a
// tile padded to 68 (8-byte stores into it), 16-byte stores along the plane, converted in pairs.
TEST(TransposedTilesTest, EmitsTheTiledKernel) {
  auto source = EmitCudaKernel(ReluOfTranspose(DType::kBF16, {32, 56, 56, 64}, {0, 3, 1, 2}));
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->strategy, "pointwise transposed 64x64 x8");
  EXPECT_EQ(source->config.tile, 64);
  EXPECT_EQ(source->threads, 256);
  EXPECT_EQ(source->launch.grid[0], 49 * 32) << "tiles along the plane x batch";
  EXPECT_TRUE(MatchesChecks(source->function, R"(
    CHECK: __shared__ __align__(16) uint16_t s0[64 * 68];
    CHECK: const tf_index_t in0 = tile % 49 * 64;
    CHECK-NEXT: const tf_index_t d0 = 0;
    CHECK-NEXT: const tf_index_t x0 = tile / 49;
    CHECK: uint16_t r[2][8];
    CHECK: row = q / 8, column = q % 8 * 8;
    CHECK: if (x2 < 3136 && x1 < 64) {
    CHECK-NEXT: tf_vload<8>(b0 + ((x2 * 64 + (x1 + x0 * 200704))), r[it]);
    CHECK: tf_vstore<4>(s0 + row * 68 + column + h
    CHECK: __syncthreads();
    CHECK: column = q / 2 % 64, row = (q / 128 * 2 + q % 2) * 8;
    CHECK: const tf_index_t offset = ((x0 * 64 + x1) * 3136 + first);
    CHECK: tf_cvt_bf16(s0[(row + j) * 68 + column])
    CHECK: else o1[j / 2] = tf_pack2_bf16(o1_low, (float)(v
    CHECK: tf_vstore<4>(reinterpret_cast<uint32_t*>(b1 + offset), o1);
  )"));
}

// Ragged tiles: [8,64,30,34] to NHWC; 1020 positions take 8-byte loads (4 bf16), and the
// predicates stop at the dims' ends.
TEST(TransposedTilesTest, RaggedTilesArePredicatedAndVectorsFollowAlignment) {
  auto source = EmitCudaKernel(ReluOfTranspose(DType::kBF16, {8, 64, 30, 34}, {0, 2, 3, 1}));
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->launch.grid[0], 16 * 8);
  EXPECT_TRUE(MatchesChecks(source->function, R"(
    CHECK: const tf_index_t in0 = 0;
    CHECK-NEXT: const tf_index_t d0 = tile % 16 * 64;
    CHECK: if (x2 < 64 && x1 < 1020) {
    CHECK-NEXT: tf_vload<4>(b0 +
    CHECK: if (x1 < 1020 && first < 64) {
  )"));
}

TEST(TransposedTilesTest, ConfigurationsChooseTheTileOrTheFlatTemplate) {
  Kernel k = ReluOfTranspose(DType::kF32, {16, 32, 32, 96}, {0, 3, 1, 2});
  auto small = EmitCudaKernel(k, CudaKernelConfig{.tile = 32});
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ(small->strategy, "pointwise transposed 32x32 x4");
  EXPECT_EQ(small->threads, 256);
  auto flat = EmitCudaKernel(k, CudaKernelConfig{.tile = -1});
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(flat->strategy, "pointwise x8");
  EXPECT_EQ(flat->function.find("__shared__"), std::string::npos);
  EXPECT_FALSE(EmitCudaKernel(k, CudaKernelConfig{.tile = 48}).ok()) << "not a power of two";
  EXPECT_FALSE(EmitCudaKernel(k, CudaKernelConfig{.vector = 64, .tile = 64}).ok());
  // A kernel with nothing transposed ignores the request.
  GraphBuilder b;
  b.Output(b.Unary(OpCode::kRelu, b.Parameter("x", DType::kF32, {4096})), "y");
  auto plain = EmitCudaKernel(LowerSingleGroup(b), CudaKernelConfig{.tile = 64});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->strategy, "pointwise x8");
}

// Four f32 tiles of 64 x 68 would take 68 KB: the default falls back to 32 x 32.
TEST(TransposedTilesTest, ManyStagedLoadsTakeSmallerTiles) {
  GraphBuilder b;
  Value sum;
  for (int i = 0; i < 4; ++i) {
    Value t = b.Transpose(b.Parameter("x" + std::to_string(i), DType::kF32, {4, 64, 32, 32}), {0, 2, 3, 1});
    sum = i == 0 ? t : b.Add(sum, t);
  }
  b.Output(sum, "y");
  Kernel k = LowerSingleGroup(b);
  EXPECT_EQ(FindTransposedTiling(k).loads.size(), 4u);
  EXPECT_EQ(ResolveCudaConfig(k, {}).tile, 32);
  EXPECT_FALSE(EmitCudaKernel(k, CudaKernelConfig{.tile = 64}).ok()) << "past 48 KB of shared memory";
}

// Each instruction costs only the wavefronts its width needs: a 16-lane group per 8-byte
// store, one wavefront per 2- or 4-byte read, so the layouts the template uses are free of
// bank conflicts.
TEST(TransposedTileLayoutTest, ChosenPitchesAreFreeOfBankConflicts) {
  struct Case {
    int element_bytes, load_vector, store_vector, lanes_in, tile;
    int pitch;
  };
  for (const Case& c : {Case{2, 8, 8, 2, 64, 68}, Case{4, 4, 4, 2, 64, 68}, Case{4, 4, 4, 2, 32, 36}, Case{4, 1, 4, 2, 64, 68},
                        Case{2, 4, 4, 4, 64, 68}}) {
    SCOPED_TRACE(testing::Message() << c.element_bytes << " bytes, load " << c.load_vector << ", store " << c.store_vector << ", tile " << c.tile);
    TileLayout t = WithBestPitch({c.tile, c.tile, c.element_bytes, c.load_vector, c.store_vector, c.lanes_in, c.tile, c.load_vector});
    EXPECT_EQ(t.pitch, c.pitch);
    const int shared_bytes = t.shared_vector * t.element_bytes;
    const int64_t load_groups = shared_bytes <= 4 ? 1 : shared_bytes / 4;
    const int64_t ideal = (t.load_vector / t.shared_vector) * load_groups + t.store_vector;
    EXPECT_EQ(SharedWavefronts(t), ideal) << "pitch " << t.pitch << ", shared vector " << t.shared_vector;
  }
}

// 32 bf16 columns are 64 bytes: rows 8 apart (the store phase) want a pitch of 4 mod 8
// elements, and that puts the load phase's rows r and r + 2 on the same banks. The best
// padding leaves one of the two 2-way conflicted.
TEST(TransposedTileLayoutTest, NarrowHalfPrecisionTilesConflictTwoWayAtMost) {
  TileLayout t = WithBestPitch({32, 32, 2, 8, 8, 2, 32, 8});
  EXPECT_EQ(t.pitch, 36);
  EXPECT_LE(SharedWavefronts(t), 2 * (2 * 2) + 8);
}

TEST(TransposedTileLayoutTest, AnUnpaddedTileConflicts) {
  TileLayout t{64, 64, 2, 8, 8, 2, 64, 8};
  EXPECT_GT(SharedWavefronts(t), 2 * 4 + 8) << "the store phase's rows 8 apart share banks";
}

}  // namespace
}  // namespace tilefuse
