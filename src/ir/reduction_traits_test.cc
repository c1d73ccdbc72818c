// The TF_REDUCTION rows against the op table: every reduction has one, its combiner is a
// binary pointwise op, and its identity is the combiner's neutral element (folding it
// into any element gives the element), NaN included for max and min.
#include "ir/reduction_traits.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ir/scalar_eval.h"

namespace tilefuse {
namespace {

TEST(ReductionTraitsTest, EveryReductionFoldsFromANeutralIdentity) {
  int reductions = 0;
  for (int i = 0; i < NumOps(); ++i) {
    const OpInfo& info = GetOpInfo(static_cast<OpCode>(i));
    if (info.kind != OpKind::Reduction) continue;
    ++reductions;
    const ReductionTraits& traits = GetReductionTraits(info.code);
    const OpInfo& combiner = GetOpInfo(traits.combiner);
    EXPECT_EQ(combiner.kind, OpKind::Pointwise) << info.name;
    EXPECT_EQ(combiner.arity, 2) << info.name;
    const double inf = INFINITY;
    for (double x : {-3.5, 0.0, 1.0, 7.25, inf, -inf})
      EXPECT_EQ(EvaluateScalarOp(traits.combiner, traits.identity, x), x) << info.name << " " << x;
    EXPECT_TRUE(std::isnan(EvaluateScalarOp(traits.combiner, traits.identity, NAN))) << info.name;
  }
  EXPECT_EQ(reductions, 5);
}

TEST(ReductionTraitsTest, MeanAloneDividesByTheCount) {
  EXPECT_TRUE(GetReductionTraits(OpCode::kReduceMean).divides_by_count);
  EXPECT_EQ(GetReductionTraits(OpCode::kReduceMean).combiner, OpCode::kAdd);
  for (OpCode op : {OpCode::kReduceSum, OpCode::kReduceMax, OpCode::kReduceMin, OpCode::kReduceProd})
    EXPECT_FALSE(GetReductionTraits(op).divides_by_count) << OpName(op);
}

// Max and min keep a NaN once it is folded in, whichever side it arrives on.
TEST(ReductionTraitsTest, MaxAndMinCombinersKeepNan) {
  for (OpCode op : {OpCode::kReduceMax, OpCode::kReduceMin}) {
    OpCode combiner = GetReductionTraits(op).combiner;
    EXPECT_TRUE(std::isnan(EvaluateScalarOp(combiner, NAN, 1.0))) << OpName(op);
    EXPECT_TRUE(std::isnan(EvaluateScalarOp(combiner, 1.0, NAN))) << OpName(op);
  }
}

}  // namespace
}  // namespace tilefuse
