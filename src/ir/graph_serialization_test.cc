// A graph serialized and read back is the same graph, constants' bytes included; damaged bytes
// are an error naming the damage, never a crash or a different graph.
#include "ir/graph_serialization.h"

#include <gtest/gtest.h>

#include "ir/printer.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

Graph Example() {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kBF16, {2, 3, 4});
  Value w = b.Constant(Tensor::Random(DType::kBF16, {4, 5}, 7));
  Value y = b.MatMul(x, w, /*tf32=*/true);
  Value t = b.Transpose(y, {0, 2, 1});
  Value s = b.Reduce(OpCode::kReduceSum, t, {2}, true);
  Value c = b.Cast(s, DType::kF32);
  b.Output(c, "out");
  StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return *g;
}

// Which input dims are the model's symbols survives the round trip (the compiled-model cache's
// graphs print their kernels' sizes over them).
TEST(GraphSerializationTest, ARoundTripKeepsTheSymbolicInputs) {
  Graph g = Example();
  g.set_symbolic_inputs({{{"x", {"batch", "", ""}}}, {{"batch", 2}}});
  StatusOr<Graph> back = DeserializeGraph(SerializeGraph(g));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->symbolic_inputs(), g.symbolic_inputs());
  EXPECT_NE(PrintGraph(*back).find("symbols(batch = 2)"), std::string::npos) << PrintGraph(*back);
  // Without symbols, the header has none to read back.
  StatusOr<Graph> plain = DeserializeGraph(SerializeGraph(Example()));
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->symbolic_inputs().empty());
}

TEST(GraphSerializationTest, ARoundTripKeepsTheGraphAndItsConstants) {
  const Graph g = Example();
  StatusOr<Graph> back = DeserializeGraph(SerializeGraph(g));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(PrintGraph(*back), PrintGraph(g));
  ASSERT_EQ(back->num_nodes(), g.num_nodes());
  for (int i = 0; i < g.num_nodes(); ++i) {
    const auto& a = g.node(i).attrs.value;
    const auto& b = back->node(i).attrs.value;
    ASSERT_EQ(a == nullptr, b == nullptr);
    if (a) {
      EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(a->data()), a->num_bytes()),
                std::string_view(reinterpret_cast<const char*>(b->data()), b->num_bytes()));
    }
  }
  EXPECT_EQ(SerializeGraph(*back), SerializeGraph(g));
  EXPECT_EQ(ConstantBytes(g), 4 * 5 * 2);
}

TEST(GraphSerializationTest, DamagedBytesAreAnError) {
  const std::string bytes = SerializeGraph(Example());
  EXPECT_FALSE(DeserializeGraph("").ok());
  EXPECT_FALSE(DeserializeGraph(bytes.substr(0, bytes.size() / 2)).ok());
  EXPECT_FALSE(DeserializeGraph(bytes.substr(0, bytes.size() - 1)).ok()) << "a constant cut short";
  std::string forward = bytes;  // a node reading one that comes after it
  const size_t in = forward.find("\"in\":[0");
  ASSERT_NE(in, std::string::npos);
  forward[in + 6] = '9';
  StatusOr<Graph> g = DeserializeGraph(forward);
  EXPECT_FALSE(g.ok());
  std::string op = bytes;
  op.replace(op.find("\"matmul\""), 8, "\"matmux\"");
  EXPECT_FALSE(DeserializeGraph(op).ok());
}

}  // namespace
}  // namespace tilefuse
