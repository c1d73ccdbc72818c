#include <gtest/gtest.h>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

TEST(OnnxScatterTest, ScatterElementsAlongAxisWithNegativeIndex) {
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 3] data, float[2, 1] updates) => (float[2, 3] y) {
      indices = Constant <value = int64[2, 1] {2, -3}> ()
      y = ScatterElements <axis = 1> (data, indices, updates)
    })"));
  ExpectNear(RunGraph(g, {F32({2, 3}, {0, 0, 0, 0, 0, 0}), F32({2, 1}, {7, 8})}), {0, 0, 7, 8, 0, 0});
}

TEST(OnnxScatterTest, ScatterElementsReductionsOverDuplicates) {
  Graph g = Import(WithOpset(18, R"(
    g (float[3] data, float[3] updates) => (float[3] none, float[3] add, float[3] mul, float[3] max, float[3] min) {
      indices = Constant <value = int64[3] {1, 1, 0}> ()
      none = ScatterElements(data, indices, updates)
      add = ScatterElements <reduction = "add"> (data, indices, updates)
      mul = ScatterElements <reduction = "mul"> (data, indices, updates)
      max = ScatterElements <reduction = "max"> (data, indices, updates)
      min = ScatterElements <reduction = "min"> (data, indices, updates)
    })"));
  std::vector<Tensor> in = {F32({3}, {1, 2, 3}), F32({3}, {5, -4, 10})};
  ExpectNear(RunGraph(g, in, 0), {10, -4, 3});  // the last write wins
  ExpectNear(RunGraph(g, in, 1), {11, 3, 3});
  ExpectNear(RunGraph(g, in, 2), {10, -40, 3});
  ExpectNear(RunGraph(g, in, 3), {10, 5, 3});
  ExpectNear(RunGraph(g, in, 4), {1, -4, 3});
}

TEST(OnnxScatterTest, ScatterNDWritesSlices) {
  Graph g = Import(WithOpset(16, R"(
    g (float[3, 2] data, float[2, 2] updates) => (float[3, 2] y, float[3, 2] add) {
      indices = Constant <value = int64[2, 1] {2, 0}> ()
      y = ScatterND(data, indices, updates)
      add = ScatterND <reduction = "add"> (data, indices, updates)
    })"));
  std::vector<Tensor> in = {F32({3, 2}, {1, 1, 1, 1, 1, 1}), F32({2, 2}, {5, 6, 7, 8})};
  ExpectNear(RunGraph(g, in, 0), {7, 8, 1, 1, 5, 6});
  ExpectNear(RunGraph(g, in, 1), {8, 9, 1, 1, 6, 7});
}

TEST(OnnxScatterTest, ErrorsNameTheNodeAndCause) {
  std::string range = ImportError(WithOpset(13, R"(
    g (float[3] data, float[1] updates) => (float[3] y) {
      indices = Constant <value = int64[1] {3}> ()
      y = ScatterElements(data, indices, updates)
    })"));
  EXPECT_TRUE(Contains(range, "(ScatterElements, opset 13)")) << range;
  EXPECT_TRUE(Contains(range, "index 3 is out of range for a dim of size 3")) << range;
  std::string runtime = ImportError(WithOpset(13, R"(
    g (float[3] data, int64[1] indices, float[1] updates) => (float[3] y) { y = ScatterND(data, indices, updates) })"));
  EXPECT_TRUE(Contains(runtime, "must be known at import time")) << runtime;
  std::string shape = ImportError(WithOpset(13, R"(
    g (float[3, 2] data, float[2] updates) => (float[3, 2] y) {
      indices = Constant <value = int64[1, 1] {0}> ()
      y = ScatterND(data, indices, updates)
    })"));
  EXPECT_TRUE(Contains(shape, "updates have shape [2], expected [1, 2]")) << shape;
}

}  // namespace
}  // namespace tilefuse::onnx_testing
