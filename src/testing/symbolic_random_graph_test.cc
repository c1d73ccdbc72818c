#include "testing/symbolic_random_graph.h"

#include <gtest/gtest.h>

#include <set>

#include "ir/symbolic_shapes.h"

namespace tilefuse {
namespace {

// The graph's ops but its views: a broadcast or a reshape is left out where a size is 1 (the
// builder adds no node that changes nothing), so the op sequence is what must not change.
std::vector<OpCode> Ops(const Graph& g) {
  static const std::set<OpCode> kViews = {OpCode::kBroadcast, OpCode::kReshape, OpCode::kTranspose,
                                          OpCode::kSlice};
  std::vector<OpCode> ops;
  for (const Node& n : g.nodes())
    if (!kViews.count(n.op)) ops.push_back(n.op);
  return ops;
}

// One seed, one graph: the bindings change sizes only, so the fuzzer checks the same
// kernels' code at each of them.
TEST(SymbolicRandomGraphTest, ASeedGivesTheSameOpsAtEveryBinding) {
  int with_symbols_inside = 0;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    std::vector<SymbolicBinding> bindings = SymbolicBindingsFor(seed);
    ASSERT_EQ(bindings.size(), 3u);
    std::set<int64_t> seqs;
    std::vector<std::vector<OpCode>> ops;
    for (const SymbolicBinding& at : bindings) {
      seqs.insert(at.seq);
      StatusOr<Graph> g = GenerateSymbolicGraph(seed, at, DType::kF32);
      ASSERT_TRUE(g.ok()) << "seed " << seed << " at " << at.ToString() << ": " << g.status().ToString();
      EXPECT_EQ(g->symbolic_inputs().values.at("seq"), at.seq);
      EXPECT_EQ(g->node(g->inputs()[0]).shape, (Shape{at.batch, at.seq, g->node(g->inputs()[0]).shape[2]}));
      ops.push_back(Ops(*g));
      // Some node's dims are expressions of several symbols (past + seq, batch * seq).
      SymbolicShapes shapes = InferSymbolicShapes(*g);
      bool compound = false;
      for (const auto& dims : shapes.dims)
        for (const SymExpr& d : dims) compound = compound || d.Symbols().size() > 1;
      with_symbols_inside += compound;
    }
    EXPECT_EQ(seqs.size(), 3u) << "seed " << seed << ": three different lengths";
    EXPECT_EQ(ops[0], ops[1]) << "seed " << seed;
    EXPECT_EQ(ops[0], ops[2]) << "seed " << seed;
  }
  EXPECT_GT(with_symbols_inside, 30) << "few graphs combine their symbols";
}

TEST(SymbolicRandomGraphTest, RefusesHalfTypes) {
  EXPECT_FALSE(GenerateSymbolicGraph(0, SymbolicBinding{}, DType::kBF16).ok());
}

}  // namespace
}  // namespace tilefuse
