#include "codegen/kernel_verifier.h"

#include <gtest/gtest.h>

#include "testing/lower_test_util.h"

namespace tilefuse {
namespace {

Kernel Softmax() {
  GraphBuilder b;
  b.Output(b.Softmax(b.Parameter("x", DType::kF32, {4, 32}), -1), "y");
  Kernel k = LowerSingleGroup(b);
  k.name = "softmax";
  return k;
}

std::string Problem(const Kernel& k) {
  Status s = VerifyKernel(k);
  return s.ok() ? "" : s.message();
}

TEST(KernelVerifierTest, ALoweredKernelPasses) { EXPECT_EQ(Problem(Softmax()), ""); }

TEST(KernelVerifierTest, EachBrokenInvariantIsNamed) {
  Kernel forward = Softmax();
  for (ScalarValue& v : forward.values)
    if (v.kind == ScalarValue::Kind::kOp) {
      v.args[0] = static_cast<int>(forward.values.size()) - 1;  // a use before its definition
      break;
    }
  EXPECT_NE(Problem(forward).find("does not precede it"), std::string::npos) << Problem(forward);

  Kernel unwritten = Softmax();
  unwritten.stores.clear();
  EXPECT_NE(Problem(unwritten).find("is never stored"), std::string::npos) << Problem(unwritten);

  Kernel into_input = Softmax();
  for (KernelBuffer& b : into_input.buffers) b.is_output = false;
  EXPECT_NE(Problem(into_input).find("a store to input buffer"), std::string::npos) << Problem(into_input);

  Kernel stray_load = Softmax();
  for (ScalarValue& v : stray_load.values)
    if (v.kind == ScalarValue::Kind::kLoad) v.buffer = 7;
  EXPECT_NE(Problem(stray_load).find("loads buffer b7"), std::string::npos) << Problem(stray_load);

  Kernel wrong_arity = Softmax();
  for (ScalarValue& v : wrong_arity.values)
    if (v.kind == ScalarValue::Kind::kOp && v.args.size() == 2) {
      v.args.pop_back();
      break;
    }
  EXPECT_NE(Problem(wrong_arity).find("takes 2 arguments, has 1"), std::string::npos) << Problem(wrong_arity);
}

}  // namespace
}  // namespace tilefuse
