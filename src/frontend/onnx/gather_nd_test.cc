#include <gtest/gtest.h>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

TEST(OnnxGatherNDTest, RuntimeIndexTuplesPickRowsAndNegativeIndicesWrap) {
  Graph g = Import(WithOpset(13, R"(
    g (float[3, 4, 2] data, int64[2, 2] idx) => (float[2, 2] y) { y = GatherND(data, idx) })"));
  std::vector<double> data = RandomNonZero(24, 1);
  // Tuples (1, 3) and (-1, 0) = (2, 0): the slices data[1, 3, :] and data[2, 0, :].
  std::vector<double> expected = {data[(1 * 4 + 3) * 2], data[(1 * 4 + 3) * 2 + 1], data[(2 * 4 + 0) * 2],
                                  data[(2 * 4 + 0) * 2 + 1]};
  ExpectNear(RunGraph(g, {F32({3, 4, 2}, data), I64({2, 2}, {1, 3, -1, 0})}), expected);
}

TEST(OnnxGatherNDTest, FullTuplesPickScalars) {
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 3] data, int64[4, 2] idx) => (float[4] y) { y = GatherND(data, idx) })"));
  std::vector<double> data = RandomNonZero(6, 2);
  std::vector<double> idx = {0, 0, 1, 2, 0, -1, 1, 1};
  std::vector<double> expected;
  for (int t = 0; t < 4; ++t) {
    int i = static_cast<int>(idx[2 * t]), j = static_cast<int>(idx[2 * t + 1]);
    expected.push_back(data[i * 3 + (j < 0 ? j + 3 : j)]);
  }
  ExpectNear(RunGraph(g, {F32({2, 3}, data), I64({4, 2}, idx)}), expected);
}

TEST(OnnxGatherNDTest, KnownIndicesWithBatchDimsBecomeConstantRows) {
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 3, 4] data) => (float[2, 4] y) {
      idx = Constant <value = int64[2, 1] {2, -3}> ()
      y = GatherND <batch_dims = 1> (data, idx)
    })"));
  const Node& gather = OutputNode(g);
  ASSERT_EQ(gather.op, OpCode::kGather);
  EXPECT_EQ(g.node(gather.inputs[1]).op, OpCode::kConstant);
  std::vector<double> data = RandomNonZero(24, 3);
  std::vector<double> expected;
  for (int c = 0; c < 4; ++c) expected.push_back(data[(0 * 3 + 2) * 4 + c]);  // batch 0, row 2
  for (int c = 0; c < 4; ++c) expected.push_back(data[(1 * 3 + 0) * 4 + c]);  // batch 1, row -3 = 0
  ExpectNear(RunGraph(g, {F32({2, 3, 4}, data)}), expected);
}

TEST(OnnxGatherNDTest, RuntimeIndicesWithBatchDims) {
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 3, 4] data, int32[2, 3, 2] idx) => (float[2, 3] y) { y = GatherND <batch_dims = 1> (data, idx) })"));
  std::vector<double> data = RandomNonZero(24, 4);
  std::vector<double> idx = {0, 3, 2, 1, -1, -4, 1, 0, 2, 2, 0, 3};
  std::vector<double> expected;
  for (int batch = 0; batch < 2; ++batch)
    for (int t = 0; t < 3; ++t) {
      int i = static_cast<int>(idx[(batch * 3 + t) * 2]), j = static_cast<int>(idx[(batch * 3 + t) * 2 + 1]);
      if (i < 0) i += 3;
      if (j < 0) j += 4;
      expected.push_back(data[(batch * 3 + i) * 4 + j]);
    }
  ExpectNear(RunGraph(g, {F32({2, 3, 4}, data), Tensor::FromDoubles(DType::kI32, {2, 3, 2}, idx)}), expected);
}

TEST(OnnxGatherNDTest, BadIndicesAndAttributesAreNamedErrors) {
  std::string out_of_range = ImportError(WithOpset(13, R"(
    g (float[2, 3] data) => (float[1] y) {
      idx = Constant <value = int64[1, 2] {1, 3}> ()
      y = GatherND(data, idx)
    })"));
  EXPECT_TRUE(Contains(out_of_range, "node 'y' (GatherND, opset 13)")) << out_of_range;
  EXPECT_TRUE(Contains(out_of_range, "out of range")) << out_of_range;

  std::string batch_dims = ImportError(WithOpset(13, R"(
    g (float[2, 3] data, int64[2, 1] idx) => (float[2] y) { y = GatherND <batch_dims = 2> (data, idx) })"));
  EXPECT_TRUE(Contains(batch_dims, "(GatherND, opset 13)")) << batch_dims;
  EXPECT_TRUE(Contains(batch_dims, "batch_dims 2")) << batch_dims;

  std::string tuple = ImportError(WithOpset(13, R"(
    g (float[2, 3] data, int64[2, 3] idx) => (float[2] y) { y = GatherND(data, idx) })"));
  EXPECT_TRUE(Contains(tuple, "last dim (3)")) << tuple;

  std::string batch_mismatch = ImportError(WithOpset(13, R"(
    g (float[2, 3] data, int64[3, 1] idx) => (float[3] y) { y = GatherND <batch_dims = 1> (data, idx) })"));
  EXPECT_TRUE(Contains(batch_mismatch, "batch dim 0 differs")) << batch_mismatch;

  std::string float_indices = ImportError(WithOpset(13, R"(
    g (float[2, 3] data, float[2, 1] idx) => (float[2, 3] y) { y = GatherND(data, idx) })"));
  EXPECT_TRUE(Contains(float_indices, "indices must be integers")) << float_indices;
}

}  // namespace
}  // namespace tilefuse::onnx_testing
