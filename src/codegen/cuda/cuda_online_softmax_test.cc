// The CUDA row template's long-row forms on a GPU against the f64 reference: the online max
// and sum (codegen/cuda/cuda_emitter: EmitOnlineMaxAndSum), a row shared by the CTAs of a cluster
// (CudaKernelConfig::cluster; the pair combined across it by tf_cluster_reduce_max_sum, other
// totals by tf_cluster_reduce, each exchanged into every CTA's slots) and a block per SM
// prefetching its next row, on rows made to reach their edges: every value -inf,
// one +inf, one NaN, some -inf among finite values, a max that keeps growing along the row
// (each chunk rescales the sum), and values whose exp overflows f32. Needs a GPU; skipped
// without one, and run by scripts/gpu-check.sh.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backend/cuda/cuda_driver.h"
#include "backend/cuda/cuda_executable.h"
#include "driver/driver.h"
#include "passes/pipeline.h"
#include "testing/reference_check.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

// The builder's graph after the graph passes, as the backends take it.
Graph Passed(GraphBuilder& b) {
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  auto passed = RunGraphPasses(std::move(graph).value(), PassOptions{});
  EXPECT_TRUE(passed.ok()) << passed.status().ToString();
  return std::move(passed).value();
}

Graph LogSumExpAndSoftmax(int64_t rows, int64_t columns, DType dtype = DType::kF32) {
  GraphBuilder b;
  Value x = b.Parameter("x", dtype, {rows, columns});
  Value row_max = b.Reduce(OpCode::kReduceMax, x, {1}, true);
  Value row_sum = b.Reduce(OpCode::kReduceSum, b.Unary(OpCode::kExp, b.Sub(x, row_max)), {1}, true);
  b.Output(b.Add(b.Unary(OpCode::kLog, row_sum), row_max), "lse");
  b.Output(b.Softmax(x, 1), "softmax");
  return Passed(b);
}

// Two reductions in a row, each its own exchange across a cluster: a layer norm's mean and
// variance.
Graph LayerNormRows(int64_t rows, int64_t columns, DType dtype) {
  GraphBuilder b;
  Value x = b.Parameter("x", dtype, {rows, columns});
  Value centered = b.Sub(x, b.Reduce(OpCode::kReduceMean, x, {1}, true));
  Value variance = b.Reduce(OpCode::kReduceMean, b.Mul(centered, centered), {1}, true);
  b.Output(b.Div(centered, b.Unary(OpCode::kSqrt, b.AddScalar(variance, 1e-5))), "y");
  return Passed(b);
}

// Rows 0-6 reach the edges; any further rows are random.
Tensor EdgeRows(int64_t rows, int64_t columns, DType dtype = DType::kF32) {
  Tensor x = Tensor::Random(dtype, {rows, columns}, 71);
  const double inf = std::numeric_limits<double>::infinity();
  auto at = [&](int64_t row, int64_t column) { return row * columns + column; };
  for (int64_t c = 0; c < columns; ++c) {
    x.SetDouble(at(1, c), -inf);                                 // row 1: every value -inf
    if (c % 3 == 0) x.SetDouble(at(2, c), -inf);                 // row 2: a third -inf
    x.SetDouble(at(5, c), 40000.0 * c / columns);                // row 5: the max grows to 40000
    x.SetDouble(at(6, c), 1000 + x.GetDouble(at(6, c)));         // row 6: exp(x) overflows f32
  }
  x.SetDouble(at(3, 12345), inf);                                 // row 3: one +inf
  x.SetDouble(at(4, 777), std::numeric_limits<double>::quiet_NaN());  // row 4: one NaN
  return x;
}

struct LongRowCase {
  int64_t rows = 7, columns = 0;
  int cluster = 0;           // TemplateOverrides::row_cluster (0: the rule)
  const char* must_contain;  // the form the kernel must have taken
  DType dtype = DType::kF32;
};

class CudaLongRowTest : public testing::TestWithParam<LongRowCase> {};

TEST_P(CudaLongRowTest, EdgeRowsMatchTheReference) {
  auto device = CudaDevice::Get();
  if (!device.ok()) GTEST_SKIP() << "no GPU: " << device.status().ToString() << "; the long-row forms not run";
  const LongRowCase& c = GetParam();
  Graph graph = LogSumExpAndSoftmax(c.rows, c.columns, c.dtype);
  CudaCompileOptions options;
  options.poison_outputs = true;
  options.overrides.row_cluster = c.cluster;
  auto compiled = CompileForCuda(graph, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  EXPECT_NE((*compiled)->source().find(c.must_contain), std::string::npos) << "the form was not taken:\n" << (*compiled)->source();
  std::vector<Tensor> inputs = {EdgeRows(c.rows, c.columns, c.dtype)};
  // NaN where the reference has NaN (rows 1, 3 and 4), nowhere else.
  const std::vector<Tensor> expected = ExpectMatchesReference(graph, inputs, (*compiled)->Run(inputs));
  ASSERT_EQ(expected.size(), 2u);
  const Tensor& lse = expected[0];
  EXPECT_TRUE(std::isnan(lse.GetDouble(1)) && std::isnan(lse.GetDouble(3)) && std::isnan(lse.GetDouble(4)))
      << "the edge rows do not reach the edges they are meant to";
  EXPECT_FALSE(std::isnan(lse.GetDouble(2)) || std::isnan(lse.GetDouble(5)) || std::isnan(lse.GetDouble(6)));
}

// f32 rows of 40000 are more than a 1024-thread block holds in registers (32 values a
// thread): re-read per pass, the max and sum share the first. Split over a cluster of 2 or
// 4 (rows of 65536 over 8), each CTA's slice fits in registers; rows of 200000 over 2 do not
// (re-read slices). Either way the cluster combines one max-and-sum pair. 300
// rows of 32768 fill a 1024-thread block's registers, more rows than SMs: a block per SM
// walks the rows, its next row copied into shared memory meanwhile. Half-type rows of 65536
// go by rule to a cluster of 4 holding its slices as pairs: the max taken on the pairs, then
// the sum against it; rows of 40000 too, whose slices end part-way through a chunk (their form:
// CudaProgramRowClusterTest.RaggedSlicesTakeTheMaxOnThePairs).
INSTANTIATE_TEST_SUITE_P(LongRows, CudaLongRowTest,
                         testing::Values(LongRowCase{7, 40000, 0, "tf_block_reduce_max_sum<"},
                                         LongRowCase{7, 40000, 2, "tf_cluster_reduce_max_sum<kCluster>"},
                                         LongRowCase{7, 40000, 4, "tf_cluster_reduce_max_sum<kCluster>"},
                                         LongRowCase{7, 65536, 8, "tf_cluster_reduce_max_sum<kCluster>"},
                                         LongRowCase{7, 200000, 2, "tf_cluster_reduce_max_sum<kCluster>"},
                                         LongRowCase{300, 32768, 0, "tf_row_stage"},
                                         LongRowCase{7, 65536, 0, "tf_max_pairs_bf16(", DType::kBF16},
                                         LongRowCase{7, 65536, 0, "tf_max_pairs_f16(", DType::kF16},
                                         LongRowCase{7, 40000, 0, "tf_max_pairs_bf16(", DType::kBF16}),
                         [](const testing::TestParamInfo<LongRowCase>& info) {
                           return std::to_string(info.param.rows) + "x" + std::to_string(info.param.columns) + "_cluster" +
                                  std::to_string(info.param.cluster) + "_" + std::string(DTypeName(info.param.dtype));
                         });

// The exchange's other word counts: f64 pairs (four words a CTA), and single totals of one
// (f32) and two (f64) words, two exchanges in one row, over clusters of 2 and 4.
TEST(CudaClusterExchangeTest, F64PairsAndSingleTotalsMatchTheReference) {
  auto device = CudaDevice::Get();
  if (!device.ok()) GTEST_SKIP() << "no GPU: " << device.status().ToString() << "; the cluster exchanges not run";
  struct Case {
    Graph graph;
    Tensor input;
    int cluster;
    const char* must_contain;
  };
  std::vector<Case> cases;
  cases.push_back({LogSumExpAndSoftmax(7, 40000, DType::kF64), EdgeRows(7, 40000, DType::kF64), 2, "tf_cluster_reduce_max_sum<kCluster>"});
  cases.push_back({LayerNormRows(5, 40000, DType::kF32), Tensor::Random(DType::kF32, {5, 40000}, 72), 4, "tf_cluster_reduce<kCluster"});
  cases.push_back({LayerNormRows(5, 40000, DType::kF64), Tensor::Random(DType::kF64, {5, 40000}, 73), 2, "tf_cluster_reduce<kCluster"});
  for (Case& c : cases) {
    SCOPED_TRACE(c.must_contain + std::string(" over ") + std::to_string(c.cluster));
    CudaCompileOptions options;
    options.poison_outputs = true;
    options.overrides.row_cluster = c.cluster;
    auto compiled = CompileForCuda(c.graph, options);
    ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
    EXPECT_NE((*compiled)->source().find(c.must_contain), std::string::npos) << "the form was not taken:\n" << (*compiled)->source();
    EXPECT_NE((*compiled)->source().find("tf_exchange_start()"), std::string::npos);
    std::vector<Tensor> inputs = {c.input};
    ExpectMatchesReference(c.graph, inputs, (*compiled)->Run(inputs));
  }
}

}  // namespace
}  // namespace tilefuse
