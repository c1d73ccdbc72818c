#include "frontend/onnx/opset_versions.h"

#include <gtest/gtest.h>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

using onnx_import::CheckOpMeaningAtOpset;
using onnx_import::OpsetChange;

TEST(OnnxOpsetVersionsTest, Opset22And23ModelsOfUnchangedOpsImport) {
  // MaxPool got a new version in 22 (bfloat16), Squeeze in 23 (float4): same meaning.
  for (int opset : {22, 23}) {
    Graph g = Import(WithOpset(opset, R"(
      g (float[1, 1, 4, 4] x) => (float[2, 2] y) {
        p = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (x)
        axes = Constant <value = int64[2] {0, 1}> ()
        y = Squeeze(p, axes)
      })"));
    std::vector<double> x(16);
    for (int i = 0; i < 16; ++i) x[i] = i;
    ExpectNear(RunGraph(g, {F32({1, 1, 4, 4}, x)}), {5, 7, 13, 15});
  }
}

TEST(OnnxOpsetVersionsTest, ChangedMeaningIsRefusedWithTheOpNamed) {
  constexpr OpsetChange kChanges[] = {{22, "Foo", false}, {23, "Bar", true}};
  EXPECT_TRUE(CheckOpMeaningAtOpset("Foo", 21, kChanges).ok());
  Status refused = CheckOpMeaningAtOpset("Foo", 22, kChanges);
  EXPECT_EQ(refused.code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(Contains(refused.message(), "Foo changed meaning in opset 22")) << refused.ToString();
  EXPECT_TRUE(CheckOpMeaningAtOpset("Foo", 23, kChanges).code() == StatusCode::kUnimplemented);
  EXPECT_TRUE(CheckOpMeaningAtOpset("Bar", 23, kChanges).ok());
  EXPECT_TRUE(CheckOpMeaningAtOpset("Baz", 23, kChanges).ok());
}

TEST(OnnxOpsetVersionsTest, EveryListedChangeIsAfterOpset21) {
  for (const OpsetChange& change : onnx_import::OpsetChangesAfter21()) {
    EXPECT_GE(change.opset, 22) << change.op;
    EXPECT_LE(change.opset, 23) << change.op;
  }
}

}  // namespace
}  // namespace tilefuse::onnx_testing
