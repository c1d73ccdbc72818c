// Fuzzing the planner: thousands of random graphs (pointwise, broadcast, view,
// reduction and matmul ops over random shapes) must give plans that verify (every node
// in one group, groups convex and in a runnable order, kinds legal) and that are the
// same when planned twice. A failure prints the seed that replays it.
#include <gtest/gtest.h>

#include <random>

#include "fusion/plan_verifier.h"
#include "fusion/planner.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

class RandomGraph {
 public:
  explicit RandomGraph(uint64_t seed) : rng_(seed) {}

  StatusOr<Graph> Build(int num_ops) {
    int64_t rows = Pick({1, 4, 16, 64}), cols = Pick({1, 8, 32, 128});
    values_.push_back(b_.Parameter("x", DType::kF32, {rows, cols}));
    values_.push_back(b_.Parameter("y", DType::kF32, {rows, cols}));
    for (int i = 0; i < num_ops && b_.ok(); ++i) values_.push_back(AddOp());
    // Outputs: the last value and, sometimes, an intermediate one too.
    b_.Output(values_.back(), "out0");
    if (values_.size() > 4 && Coin()) b_.Output(values_[values_.size() / 2], "out1");
    return b_.Build();
  }

 private:
  int64_t Pick(std::initializer_list<int64_t> options) {
    return *(options.begin() + std::uniform_int_distribution<size_t>(0, options.size() - 1)(rng_));
  }
  bool Coin() { return rng_() % 2 == 0; }
  Value Any() { return values_[std::uniform_int_distribution<size_t>(0, values_.size() - 1)(rng_)]; }
  // Prefer recent values so graphs are deep, not flat.
  Value Recent() { return values_[values_.size() - 1 - std::min<size_t>(values_.size() - 1, rng_() % 3)]; }

  Value SameShapeAs(Value like) {
    for (int tries = 0; tries < 8; ++tries) {
      Value v = Any();
      if (b_.shape(v) == b_.shape(like)) return v;
    }
    return like;
  }

  Value AddOp() {
    Value a = Recent();
    const Shape& s = b_.shape(a);
    switch (rng_() % 9) {
      case 0: return b_.Unary(Coin() ? OpCode::kExp : OpCode::kTanh, a);
      case 1: case 2: return b_.Binary(Coin() ? OpCode::kAdd : OpCode::kMul, a, SameShapeAs(a));
      case 3:  // reduce trailing or leading axis, sometimes keepdims, sometimes broadcast back
        if (s.size() == 2) {
          Value r = b_.Reduce(Coin() ? OpCode::kReduceSum : OpCode::kReduceMax, a, {Coin() ? 1 : 0}, true);
          return Coin() ? b_.Sub(a, r) : r;
        }
        return b_.Unary(OpCode::kNeg, a);
      case 4:
        if (s.size() == 2) return b_.Transpose(a, {1, 0});
        return b_.Unary(OpCode::kAbs, a);
      case 5:
        if (s.size() == 2) return b_.Reshape(a, {s[0] * s[1]});
        return b_.Unary(OpCode::kSigmoid, a);
      case 6:
        if (s.size() == 1) return b_.Reshape(a, {1, s[0]});
        return b_.Unary(OpCode::kRelu, a);
      case 7:
        if (s.size() == 2) {  // a @ aᵀ or aᵀ @ a: square results keep the graph going
          Value t = b_.Transpose(a, {1, 0});
          return Coin() ? b_.MatMul(a, t) : b_.MatMul(t, a);
        }
        return b_.Unary(OpCode::kExp, a);
      default: {
        Value bias = b_.Reduce(OpCode::kReduceMean, a, {0}, false);  // broadcast back over rows
        return s.size() == 2 ? b_.Add(a, bias) : b_.Mul(a, a);
      }
    }
  }

  std::mt19937_64 rng_;
  GraphBuilder b_;
  std::vector<Value> values_;
};

TEST(PlannerFuzzTest, RandomGraphsGiveVerifiedDeterministicPlans) {
  const int kGraphs = 3000;
  int fused_somewhere = 0;
  for (int seed = 0; seed < kGraphs; ++seed) {
    auto graph = RandomGraph(seed).Build(5 + seed % 40);
    ASSERT_TRUE(graph.ok()) << "seed " << seed << ": " << graph.status().ToString();
    for (bool fuse : {true, false}) {
      PlannerOptions options;
      options.fuse = fuse;
      options.device = seed % 2 ? "h200" : "cpu";
      auto plan = PlanFusion(*graph, options);
      ASSERT_TRUE(plan.ok()) << "seed " << seed << ": " << plan.status().ToString();
      Status verified = VerifyPlan(*graph, *plan);
      ASSERT_TRUE(verified.ok()) << "seed " << seed << " fuse=" << fuse << ": " << verified.ToString();
      auto again = PlanFusion(*graph, options);
      ASSERT_EQ(plan->group_of, again->group_of) << "seed " << seed << ": plan is not deterministic";
      if (fuse && plan->groups.size() < static_cast<size_t>(plan->unfused_kernels)) ++fused_somewhere;
    }
  }
  EXPECT_GT(fused_somewhere, kGraphs / 2) << "the fuzzer should exercise real merges";
}

}  // namespace
}  // namespace tilefuse
