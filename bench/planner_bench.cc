// Planning time on big graphs: transformer-like blocks (layernorm, attention written by
// hand, MLP with GELU) stacked to 10k+ nodes, planned for the H100 cost model.
//
//   build/tilefuse_bench_planner [--min-nodes N]
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "fusion/plan_verifier.h"
#include "fusion/planner.h"
#include "passes/pipeline.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

constexpr int64_t kTokens = 512, kModel = 256, kHeads = 4, kHidden = 1024;

Value LayerNorm(GraphBuilder& b, Value x) {
  Value centered = b.Sub(x, b.Reduce(OpCode::kReduceMean, x, {-1}, true));
  Value var = b.Reduce(OpCode::kReduceMean, b.Mul(centered, centered), {-1}, true);
  return b.Mul(centered, b.Unary(OpCode::kRsqrt, b.AddScalar(var, 1e-5)));
}

Value Weight(GraphBuilder& b, Shape shape) { return b.Constant(Tensor::Random(DType::kBF16, std::move(shape), 1)); }

Value Block(GraphBuilder& b, Value x) {
  const int64_t head = kModel / kHeads;
  auto split_heads = [&](Value v) { return b.Transpose(b.Reshape(v, {kTokens, kHeads, head}), {1, 0, 2}); };
  Value h = LayerNorm(b, x);
  Value q = split_heads(b.MatMul(h, Weight(b, {kModel, kModel})));
  Value k = split_heads(b.MatMul(h, Weight(b, {kModel, kModel})));
  Value v = split_heads(b.MatMul(h, Weight(b, {kModel, kModel})));
  Value scores = b.MulScalar(b.MatMul(q, b.Transpose(k, {0, 2, 1})), 1.0 / std::sqrt(double(head)));
  Value mask = b.Binary(OpCode::kLessEqual, b.Iota({kTokens, kTokens}, 1, DType::kI64), b.Iota({kTokens, kTokens}, 0, DType::kI64));
  scores = b.Where(mask, scores, b.Scalar(-1e4, DType::kBF16));
  Value e = b.Unary(OpCode::kExp, b.Sub(scores, b.Reduce(OpCode::kReduceMax, scores, {-1}, true)));
  Value attn = b.MatMul(b.Div(e, b.Reduce(OpCode::kReduceSum, e, {-1}, true)), v);
  attn = b.Reshape(b.Transpose(attn, {1, 0, 2}), {kTokens, kModel});
  x = b.Add(x, b.MatMul(attn, Weight(b, {kModel, kModel})));
  Value up = b.Add(b.MatMul(LayerNorm(b, x), Weight(b, {kModel, kHidden})), Weight(b, {kHidden}));
  Value gelu = b.Mul(b.MulScalar(up, 0.5), b.AddScalar(b.Unary(OpCode::kErf, b.MulScalar(up, M_SQRT1_2)), 1.0));
  return b.Add(x, b.MatMul(gelu, Weight(b, {kHidden, kModel})));
}

int Run(int min_nodes) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kBF16, {kTokens, kModel});
  int blocks = 0;
  while (b.graph().num_nodes() < min_nodes * 3 / 2) {  // the passes remove about a third
    x = Block(b, x);
    ++blocks;
  }
  b.Output(x, "y");
  auto built = b.Build();
  if (!built.ok()) return fmt::print(stderr, "error: {}\n", built.status().ToString()), 1;
  auto graph = RunGraphPasses(std::move(built).value(), PassOptions{});
  if (!graph.ok()) return fmt::print(stderr, "error: {}\n", graph.status().ToString()), 1;
  for (bool fuse : {false, true}) {
    PlannerOptions options;
    options.fuse = fuse;
    auto start = std::chrono::steady_clock::now();
    auto plan = PlanFusion(*graph, options);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!plan.ok()) return fmt::print(stderr, "error: {}\n", plan.status().ToString()), 1;
    Status verified = VerifyPlan(*graph, *plan);
    fmt::print("{} blocks, {} nodes, {}: {} groups (unfused {}), planned in {:.3f} s, plan {}\n", blocks,
               graph->num_nodes(), fuse ? "fused" : "no fusion", plan->groups.size(), plan->unfused_kernels, seconds,
               verified.ok() ? "verified" : verified.ToString());
  }
  return 0;
}

}  // namespace
}  // namespace tilefuse

int main(int argc, char** argv) {
  int min_nodes = 10000;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--min-nodes") == 0) min_nodes = std::atoi(argv[i + 1]);
  return tilefuse::Run(min_nodes);
}
