#include <gtest/gtest.h>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

TEST(OnnxIndexingTest, GatherRowsOfAnEmbeddingTable) {
  Graph g = Import(WithOpset(13, R"(
    g (float[4, 2] table, int64[2, 1] ids) => (float[2, 1, 2] y) { y = Gather(table, ids) })"));
  EXPECT_EQ(OutputNode(g).op, OpCode::kGather);
  ExpectNear(RunGraph(g, {F32({4, 2}, {0, 1, 10, 11, 20, 21, 30, 31}), I64({2, 1}, {3, 1})}), {30, 31, 10, 11});
}

TEST(OnnxIndexingTest, NegativeKnownIndicesAreFixedAtImport) {
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 3] x) => (float[2, 2] y) {
      idx = Constant <value = int64[2] {-1, 0}> ()
      y = Gather <axis = 1> (x, idx)
    })"));
  const Node& gather = OutputNode(g);
  const Node& indices = g.node(gather.inputs[1]);
  ASSERT_EQ(indices.op, OpCode::kConstant);
  EXPECT_EQ(indices.attrs.value->ToDoubles(), (std::vector<double>{2, 0}));
  ExpectNear(RunGraph(g, {F32({2, 3}, {1, 2, 3, 4, 5, 6})}), {3, 1, 6, 4});
}

TEST(OnnxIndexingTest, NegativeRuntimeIndicesAreWrapped) {
  Graph g = Import(WithOpset(13, R"(
    g (float[3] x, int64[3] idx) => (float[3] y) { y = Gather(x, idx) })"));
  ExpectNear(RunGraph(g, {F32({3}, {7, 8, 9}), I64({3}, {-1, 0, -3})}), {9, 7, 7});
}

TEST(OnnxIndexingTest, OutOfRangeKnownIndexNamesTheNode) {
  std::string error = ImportError(WithOpset(13, R"(
    g (float[3] x) => (float[1] y) {
      idx = Constant <value = int64[1] {3}> ()
      y = Gather(x, idx)
    })"));
  EXPECT_TRUE(Contains(error, "node 'y' (Gather, opset 13)")) << error;
  EXPECT_TRUE(Contains(error, "out of range")) << error;
}

TEST(OnnxIndexingTest, GatherElementsAlongAnAxis) {
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 2] x, int64[2, 2] idx) => (float[2, 2] y) { y = GatherElements <axis = 1> (x, idx) })"));
  EXPECT_EQ(OutputNode(g).op, OpCode::kGatherElements);
  ExpectNear(RunGraph(g, {F32({2, 2}, {1, 2, 3, 4}), I64({2, 2}, {0, 0, 1, -2})}), {1, 1, 4, 3});
}

}  // namespace
}  // namespace tilefuse::onnx_testing
