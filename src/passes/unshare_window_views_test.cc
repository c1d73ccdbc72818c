#include "passes/unshare_window_views.h"

#include <gtest/gtest.h>

#include "passes/dce.h"
#include "passes/pass_test_util.h"
#include "reference/interpreter.h"
#include "testing/tensor_compare.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

using pass_testing::CountOps;

TEST(UnshareWindowViewsTest, EachWindowGetsItsOwnTransposeAndOtherReadersKeepTheirs) {
  GraphBuilder b;
  Value nhwc = b.Parameter("x", DType::kF64, {1, 6, 6, 4});
  Value x = b.Transpose(nhwc, {0, 3, 1, 2});
  Value zero = b.Scalar(0, DType::kF64);
  PoolParams three{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}};
  PoolParams strided{{1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}};
  b.Output(b.Window(x, zero, three), "a");
  b.Output(b.Window(x, zero, strided), "b");
  b.Output(b.Unary(OpCode::kExp, x), "c");  // a reader that is no window
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto unshared = UnshareWindowViews(*graph);
  ASSERT_TRUE(unshared.ok()) << unshared.status().ToString();
  auto cleaned = EliminateDeadCode(*unshared);
  ASSERT_TRUE(cleaned.ok()) << cleaned.status().ToString();
  EXPECT_EQ(CountOps(*cleaned, OpCode::kTranspose), 3);
  std::vector<std::vector<int>> users = cleaned->ComputeUsers();
  for (const Node& n : cleaned->nodes())
    if (n.op == OpCode::kTranspose) {
      EXPECT_EQ(users[n.id].size(), 1u);
    }

  std::vector<Tensor> inputs = {Tensor::Random(DType::kF64, {1, 6, 6, 4}, 1)};
  auto expected = RunReference(*graph, inputs);
  auto actual = RunReference(*cleaned, inputs);
  ASSERT_TRUE(expected.ok() && actual.ok());
  for (size_t i = 0; i < expected->size(); ++i) EXPECT_TRUE(CompareTensors((*actual)[i], (*expected)[i]).pass);
}

}  // namespace
}  // namespace tilefuse
