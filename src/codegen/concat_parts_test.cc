// Concat parts: the position tests of a concat's kernel, what each part decides, and the
// contiguity test that lets a part's loads move as vectors.
#include "codegen/concat_parts.h"

#include <gtest/gtest.h>

#include <cmath>

#include "reference/interpreter.h"

#include "codegen/cuda/cuda_emitter.h"
#include "testing/host_jit_test_util.h"
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

// The CUDA template's concat parts run: the emitted function compiled for the host with the
// few device helpers it calls written for it, every block and thread run in turn, the output
// poisoned with NaN first, against the reference. 64 rows take the chunked numbering (whole
// chunks of 32 periods), 20 the periods in memory order; both hold the vector with the cut.
TEST(ConcatPartsTest, TheCudaKernelRunOnTheHostWritesWhatTheReferenceComputes) {
  for (int64_t rows : {64, 20}) {
    SCOPED_TRACE(rows);
    auto padded = [&](GraphBuilder& b) {
      Value x = b.Parameter("x", DType::kF32, {rows, 147});
      b.Output(b.Concat({b.AddScalar(b.MulScalar(x, 2), 1), b.BroadcastTo(b.Scalar(0.0, DType::kF32), {rows, 1})}, 1), "y");
    };
    GraphBuilder for_reference, for_kernel;
    padded(for_reference);
    padded(for_kernel);
    auto graph = for_reference.Build();
    ASSERT_TRUE(graph.ok());
    Kernel k = LowerSingleGroup(for_kernel);
    ASSERT_EQ(k.buffers.size(), 2u);
    ASSERT_FALSE(k.buffers[0].is_output);
    ASSERT_TRUE(k.buffers[1].is_output);
    auto source = EmitCudaKernel(k, CudaKernelConfig{});
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    ASSERT_NE(source->function.find("if ("), std::string::npos) << "the parts' branch:\n" << source->function;
    const std::string host = R"(
#include <cstdint>
struct Dim3 { unsigned x = 1, y = 1, z = 1; };
static Dim3 blockIdx, blockDim, threadIdx, gridDim;
#define __global__
#define __launch_bounds__(...)
namespace tf {
inline void tf_await_prior_grid() {}
inline float tf_cvt_f32(float x) { return x; }
inline float tf_pack_f32(float x) { return x; }
template <int N, typename T> inline void tf_vstore(T* p, const T* v) { for (int i = 0; i < N; ++i) p[i] = v[i]; }
template <int N, typename T> inline void tf_vload(const T* p, T* v) { for (int i = 0; i < N; ++i) v[i] = p[i]; }
template <typename T, typename L, typename H> inline T tf_clamp(T x, L lo, H hi) { return x < (T)lo ? (T)lo : (x > (T)hi ? (T)hi : x); }
inline float select(float c, float a, float b) { return c != 0 ? a : b; }
inline float logical_and(float a, float b) { return (a != 0 && b != 0) ? 1.f : 0.f; }
)" + source->function + R"(
}  // namespace tf
extern "C" void run_on_host(const float* x, float* y, unsigned grid, unsigned block) {
  gridDim.x = grid;
  blockDim.x = block;
  for (unsigned g = 0; g < grid; ++g)
    for (unsigned t = 0; t < block; ++t) {
      blockIdx.x = g;
      threadIdx.x = t;
      tf::)" + source->name + R"((x, y);
    }
}
)";
    auto library = CompileForHost(host);
    ASSERT_TRUE(library.ok()) << library.status().ToString();
    auto run = (*library)->Function<void(const float*, float*, unsigned, unsigned)>("run_on_host");
    ASSERT_TRUE(run.ok());
    const Tensor input = Tensor::Random(DType::kF32, {rows, 147}, 11);
    const std::vector<double> values = input.ToDoubles();
    const std::vector<float> xs(values.begin(), values.end());
    std::vector<float> y(static_cast<size_t>(rows) * 148, NAN);
    (*run)(xs.data(), y.data(), 3, 64);  // a grid smaller than the work: the strides matter
    auto expected = RunReference(*graph, {input});
    ASSERT_TRUE(expected.ok());
    const std::vector<double> want = (*expected)[0].ToDoubles();
    ASSERT_EQ(want.size(), y.size());
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(static_cast<double>(y[i]), want[i]) << "element " << i;
  }
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
