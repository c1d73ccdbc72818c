// Concat parts: the position tests of a concat's kernel, what each part decides, and the
// contiguity test that lets a part's loads move as vectors.
#include "codegen/concat_parts.h"

#include <gtest/gtest.h>

#include "codegen/cuda/cuda_emitter.h"
#include "testing/lower_test_util.h"

namespace tilefuse {
namespace {

// Rotary's rotate-half over [rows, 64]: concat(x1·cos − x2·sin, x2·cos + x1·sin) on the last axis.
Kernel RotateHalfKernel(int64_t rows) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {rows, 64});
  Value cos = b.Parameter("cos", DType::kF32, {rows, 32}), sin = b.Parameter("sin", DType::kF32, {rows, 32});
  Value x1 = b.Slice(x, {0}, {32}, {1}, {}), x2 = b.Slice(x, {32}, {64}, {1}, {});
  b.Output(b.Concat({b.Sub(b.Mul(x1, cos), b.Mul(x2, sin)), b.Add(b.Mul(x2, cos), b.Mul(x1, sin))}, 1), "y");
  return LowerSingleGroup(b);
}

TEST(ConcatPartsTest, RotateHalfHasTwoPartsEachDecidingThePositionTest) {
  Kernel k = RotateHalfKernel(16);
  ConcatParts parts = FindConcatParts(k, 8);
  ASSERT_EQ(parts.cuts, (std::vector<int64_t>{0, 32}));
  EXPECT_EQ(parts.period, 64);
  ASSERT_EQ(parts.comparisons.size(), 1u);
  EXPECT_EQ(KnownInPart(k, parts, 0, parts.comparisons[0], k.outer), 1);
  EXPECT_EQ(KnownInPart(k, parts, 1, parts.comparisons[0], k.outer), 0);
  // The loads each part reads (its own half of x, cos and sin) become contiguous in the part's
  // element: the clamps fold away. (The other part's loads fold to a constant offset.)
  for (int part : {0, 1}) {
    int contiguous = 0;
    for (const ScalarValue& v : k.values)
      if (v.kind == ScalarValue::Kind::kLoad)
        contiguous += ContiguousAlignedIn(SubstituteVar(v.index, 0, PartElement(parts, part, k.outer)), 0, 8);
    EXPECT_EQ(contiguous, 4) << "part " << part;
  }
}

// The CUDA pointwise template branches into the parts: vectors numbered part by part within
// chunks of 32 periods where the output has whole chunks, else in memory order.
TEST(ConcatPartsTest, CudaVectorLoopBranchesIntoTheParts) {
  for (int64_t rows : {64, 16}) {
    SCOPED_TRACE(rows);
    auto source = EmitCudaKernel(RotateHalfKernel(rows), CudaKernelConfig{});
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    const std::string& f = source->function;
    EXPECT_NE(f.find(rows == 64 ? "if (within < " : "if (rbase < "), std::string::npos) << f;
    EXPECT_GT(f.find("tf_clamp"), f.find("for (tf_index_t i0")) << "clamps only in the scalar tail:\n" << f;
  }
}

TEST(ConcatPartsTest, NoPartsWhereOneVectorHoldsTheWholePeriod) {
  Kernel k = RotateHalfKernel(16);
  EXPECT_TRUE(FindConcatParts(k, 64).cuts.empty()) << "a vector of 64 holds both halves: it decides nothing";
  EXPECT_FALSE(FindConcatParts(k, 32).cuts.empty());
}

// An unaligned depth padded with zeros (passes/pad_gemm_depth.h): [rows, 147] concatenated
// with a zero column. The vector holding the cut at 147 is a part of its own, testing its
// elements one by one; the vectors before it know they are all x. The period (148) takes
// vectors of 4, not 8: the CUDA template then narrows its vector to 4 to branch by part.
Kernel PaddedDepthKernel(int64_t rows) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {rows, 147});
  b.Output(b.Concat({b.Unary(OpCode::kExp, x), b.BroadcastTo(b.Scalar(0.0, DType::kF32), {rows, 1})}, 1), "y");
  return LowerSingleGroup(b);
}

TEST(ConcatPartsTest, AVectorHoldingACutIsAPartOfItsOwn) {
  Kernel k = PaddedDepthKernel(64);
  EXPECT_TRUE(FindConcatParts(k, 8).cuts.empty()) << "148 is not a multiple of 8";
  ConcatParts parts = FindConcatParts(k, 4);
  ASSERT_EQ(parts.cuts, (std::vector<int64_t>{0, 144}));
  EXPECT_EQ(parts.period, 148);
  ASSERT_EQ(parts.comparisons.size(), 1u);
  EXPECT_EQ(KnownInPart(k, parts, 0, parts.comparisons[0], k.outer), 1) << "elements 0..143 are all x's";
  EXPECT_EQ(KnownInPart(k, parts, 1, parts.comparisons[0], k.outer), -1) << "144..147: three of x, then the zero";
  auto source = EmitCudaKernel(k, CudaKernelConfig{});
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_NE(source->function.find("constexpr int kVec = 4;"), std::string::npos) << source->function;
  EXPECT_NE(source->function.find("if (within < "), std::string::npos) << source->function;
}

TEST(ConcatPartsTest, ContiguousAlignedIn) {
  Index r = IndexVar(0, 64), q = IndexVar(1, 4096);
  EXPECT_TRUE(ContiguousAlignedIn(IndexAdd(IndexMul(q, 128), r), 0, 16));
  EXPECT_TRUE(ContiguousAlignedIn(IndexAdd(IndexMul(IndexMod(IndexDiv(q, 32), 2048), 64), r), 0, 16));
  EXPECT_TRUE(ContiguousAlignedIn(IndexAdd(IndexAdd(IndexMul(q, 128), IndexConst(64)), r), 0, 16));
  EXPECT_FALSE(ContiguousAlignedIn(IndexAdd(IndexMul(q, 100), r), 0, 16)) << "rows of 100 are not 16-aligned";
  EXPECT_FALSE(ContiguousAlignedIn(IndexAdd(IndexMul(q, 128), IndexMul(r, 2)), 0, 16)) << "stride 2";
  EXPECT_FALSE(ContiguousAlignedIn(IndexMul(q, 128), 0, 16)) << "the same element for every r";
  EXPECT_FALSE(ContiguousAlignedIn(IndexAdd(IndexMul(q, 128), IndexClamp(IndexAdd(r, IndexConst(-8)), 0, 63)), 0, 16));
}

}  // namespace
}  // namespace tilefuse
