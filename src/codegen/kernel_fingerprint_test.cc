#include "codegen/kernel_fingerprint.h"

#include <gtest/gtest.h>

#include "testing/lower_test_util.h"

namespace tilefuse {
namespace {

// A softmax over rows of `columns`, after `padding` unrelated nodes shift every node id.
Kernel SoftmaxKernel(int64_t columns, int padding) {
  GraphBuilder b;
  Value shift = b.Parameter("shift", DType::kF32, {8, columns});
  for (int i = 0; i < padding; ++i) shift = b.AddScalar(shift, 1.0);
  Value x = b.Parameter("x", DType::kF32, {8, columns});
  b.Output(shift, "shifted");
  b.Output(b.Softmax(x, -1), "y");
  auto graph = RunGraphPasses(*b.Build(), PassOptions{});
  EXPECT_TRUE(graph.ok());
  auto plan = PlanFusion(*graph, PlannerOptions{});
  EXPECT_TRUE(plan.ok());
  const FusionGroup& softmax = plan->groups.back();
  EXPECT_EQ(softmax.kind, GroupKind::kRowReduction);
  auto lowered = LowerGroup(*graph, softmax, FindInlinedGenerators(*graph));
  EXPECT_TRUE(lowered.ok()) << lowered.status().ToString();
  Kernel kernel = *lowered;
  kernel.name = "tf_group" + std::to_string(padding) + "_row_reduction";
  return kernel;
}

TEST(KernelFingerprintTest, SameComputationSameFingerprintWhateverItsNameAndNodes) {
  Kernel first = SoftmaxKernel(64, 0), moved = SoftmaxKernel(64, 3);
  ASSERT_NE(first.buffers[0].node, moved.buffers[0].node);
  ASSERT_NE(first.name, moved.name);
  EXPECT_EQ(KernelFingerprint(first), KernelFingerprint(moved));
}

TEST(KernelFingerprintTest, AnotherShapeOrOpIsAnotherKernel) {
  Kernel base = SoftmaxKernel(64, 0);
  EXPECT_NE(KernelFingerprint(base), KernelFingerprint(SoftmaxKernel(128, 0)));
  Kernel other_op = base;
  for (ScalarValue& v : other_op.values)
    if (v.kind == ScalarValue::Kind::kOp && v.op == OpCode::kExp) v.op = OpCode::kTanh;
  EXPECT_NE(KernelFingerprint(base), KernelFingerprint(other_op));
}

}  // namespace
}  // namespace tilefuse
