// Which outputs a run may write into an input's own memory: planned and lowered for the GPU
// (no GPU needed), each case a graph whose answer follows from when its kernels read the input.
#include "backend/cuda/cuda_in_place_outputs.h"

#include <gtest/gtest.h>

#include "fusion/group_classifier.h"
#include "passes/pipeline.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

struct Lowered {
  FusionPlan plan;
  CudaProgram program;
  const CudaGroupProgram& GroupOf(const Graph& g, int node) const {
    for (const CudaGroupProgram& p : program.groups)
      if (p.group == plan.group_of[node]) return p;
    throw std::logic_error("no group");
  }
};

// Planned and lowered for the GPU as the backend does.
Lowered Lower(const Graph& g, CudaTarget target = {}) {
  StatusOr<CudaPlan> plan = PlanFusionForCuda(g, PlannerOptions{}, target);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  StatusOr<CudaProgram> program = BuildCudaProgram(g, plan->plan, FindInlinedGenerators(g), "", {}, target);
  EXPECT_TRUE(program.ok()) << program.status().ToString();
  return {plan->plan, *program};
}

bool MayOverwrite(const Graph& g, int output, int input) {
  Lowered l = Lower(g);
  return OutputMayOverwriteInput(g, l.plan, l.program, output, input);
}

// A static KV cache's update at a decode step: the new row at `position`, the rest kept.
Value CacheUpdate(GraphBuilder& b, Value cache, Value row, Value position) {
  const Shape shape = b.shape(cache);
  Value hit = b.Binary(OpCode::kEqual, b.Iota({1, 1, shape[2], 1}, 2, DType::kI64), b.Reshape(position, {1, 1, 1, 1}));
  return b.Where(b.BroadcastTo(hit, shape), b.BroadcastTo(row, shape), cache);
}

struct CacheGraph {
  GraphBuilder b;
  Value cache = b.Parameter("cache", DType::kF32, {1, 4, 64, 16});
  Value row = b.Parameter("row", DType::kF32, {1, 4, 1, 16});
  Value position = b.Parameter("position", DType::kI64, {1});
  Value updated = CacheUpdate(b, cache, row, position);
};

TEST(CudaInPlaceOutputsTest, ACacheWrittenAtOnePositionIsUpdatedInPlace) {
  CacheGraph c;
  c.b.Output(c.updated, "updated");
  c.b.Output(c.b.Reduce(OpCode::kReduceSum, c.row, {3}, false), "row_sums");  // another kernel, reading another input
  StatusOr<Graph> g = c.b.Build();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(MayOverwrite(*g, 0, 0));
  EXPECT_FALSE(MayOverwrite(*g, 0, 1)) << "another input's memory, of another shape";
  EXPECT_FALSE(MayOverwrite(*g, 1, 1)) << "a reduction's output";
}

// Written in place, the update reads and writes only the vectors its position changes: the
// kernel skips the rest where the run hands it the cache's own memory (both pointers equal).
TEST(CudaInPlaceOutputsTest, TheUpdateInPlaceSkipsWhatItLeavesAsItWas) {
  GraphBuilder b;
  Value cache_k = b.Parameter("cache_k", DType::kBF16, {1, 12, 256, 64});
  Value cache_v = b.Parameter("cache_v", DType::kBF16, {1, 12, 256, 64});
  Value row_k = b.Parameter("row_k", DType::kBF16, {1, 12, 1, 64});
  Value row_v = b.Parameter("row_v", DType::kBF16, {1, 12, 1, 64});
  Value position = b.Parameter("position", DType::kI64, {1});
  b.Output(CacheUpdate(b, cache_k, row_k, position), "k");
  b.Output(CacheUpdate(b, cache_v, row_v, position), "v");
  StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Lowered l = Lower(*g);
  const CudaGroupProgram& update = l.GroupOf(*g, g->outputs()[0].node);
  ASSERT_TRUE(update.kernel.has_value());
  const std::string& text = update.kernel->source.function;
  EXPECT_NE(text.find("!= 0) && b"), std::string::npos) << text;
  EXPECT_NE(text.find(") continue;  // nothing changes here"), std::string::npos) << text;
  // Both outputs in the one kernel, each compared with its own input.
  size_t compared = 0;
  for (size_t at = text.find(" == b"); at != std::string::npos; at = text.find(" == b", at + 1)) ++compared;
  EXPECT_EQ(compared, 2u) << text;
  EXPECT_TRUE(MayOverwrite(*g, 0, 0));
  EXPECT_TRUE(MayOverwrite(*g, 1, 1));
}

TEST(CudaInPlaceOutputsTest, AnElementwiseUpdateSkipsNothing) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kBF16, {64, 64});
  b.Output(b.AddScalar(x, 1), "x1");
  StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Lowered l = Lower(*g);
  const CudaGroupProgram& p = l.GroupOf(*g, g->outputs()[0].node);
  ASSERT_TRUE(p.kernel.has_value());
  EXPECT_EQ(p.kernel->source.function.find("continue;"), std::string::npos) << p.kernel->source.function;
}

TEST(CudaInPlaceOutputsTest, AnUpdateComputedInsideAReductionKernelIsNotInPlace) {
  // The reduction's kernel computes the update too: a kernel that reads its rows more than
  // once (a softmax's passes) would read updated elements as the old ones.
  CacheGraph c;
  c.b.Output(c.updated, "updated");
  c.b.Output(c.b.Reduce(OpCode::kReduceSum, c.updated, {2}, false), "sums");
  StatusOr<Graph> g = c.b.Build();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Lowered l = Lower(*g);
  ASSERT_NE(l.plan.groups[l.plan.group_of[g->outputs()[0].node]].kind, GroupKind::kPointwise)
      << "the planner no longer fuses the update into the reduction: this case needs another graph";
  EXPECT_FALSE(OutputMayOverwriteInput(*g, l.plan, l.program, 0, 0));
}

TEST(CudaInPlaceOutputsTest, AnInputReadAgainAfterTheUpdateKeepsItsOwnMemory) {
  CacheGraph c;
  c.b.Output(c.updated, "updated");
  // The old cache, read by a kernel that needs the new one first: after the update.
  Value both = c.b.Sub(c.b.Reduce(OpCode::kReduceSum, c.updated, {2}, true), c.b.Reduce(OpCode::kReduceSum, c.cache, {2}, true));
  c.b.Output(both, "difference");
  StatusOr<Graph> g = c.b.Build();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_FALSE(MayOverwrite(*g, 0, 0));
}

TEST(CudaInPlaceOutputsTest, ACounterReadByAKernelLaunchedWithItsIncrementIsNotInPlace) {
  // A cache's length: the position written is read from it, and it grows by one. Where the
  // two kernels are launched together, nothing orders the read before the write.
  CacheGraph c;
  c.b.Output(c.b.AddScalar(c.position, 1), "length_after");
  c.b.Output(c.b.Reduce(OpCode::kReduceSum, c.updated, {2}, false), "sums");
  StatusOr<Graph> g = c.b.Build();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Lowered l = Lower(*g);
  const CudaGroupProgram& increment = l.GroupOf(*g, g->outputs()[0].node);
  ASSERT_NE(increment.launched_with, -1) << "the increment is no longer launched with another kernel: this case needs another graph";
  EXPECT_FALSE(OutputMayOverwriteInput(*g, l.plan, l.program, 0, 2));
}

TEST(CudaInPlaceOutputsTest, ACounterIncrementedAloneIsInPlace) {
  GraphBuilder b;
  Value length = b.Parameter("length", DType::kI64, {1});
  b.Output(b.AddScalar(length, 1), "length_after");
  StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(MayOverwrite(*g, 0, 0));
}

// An input also returned as it is: the run copies it out of its own memory after the kernels,
// so no output may be written there first (the copy would return the new value).
TEST(CudaInPlaceOutputsTest, AnInputAlsoReturnedAsItIsIsNotOverwritten) {
  GraphBuilder b;
  Value length = b.Parameter("length", DType::kI64, {1});
  b.Output(b.AddScalar(length, 1), "length_after");
  b.Output(length, "length_before");
  StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_FALSE(MayOverwrite(*g, 0, 0));
}

TEST(CudaInPlaceOutputsTest, AnInputReadThroughATransposeIsNotOverwritten) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {64, 64});
  b.Output(b.AddScalar(b.Transpose(x, {1, 0}), 1), "transposed");  // element (i, j) reads (j, i)
  StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_FALSE(MayOverwrite(*g, 0, 0));
}

TEST(CudaInPlaceOutputsTest, AnElementwiseUpdateIsInPlace) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {64, 64});
  Value scale = b.Parameter("scale", DType::kF32, {64});
  b.Output(b.Mul(b.AddScalar(x, 1), b.BroadcastTo(scale, {64, 64})), "scaled");
  StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(MayOverwrite(*g, 0, 0));
  EXPECT_FALSE(MayOverwrite(*g, 0, 1)) << "scale is broadcast, and of another shape";
  EXPECT_FALSE(MayOverwrite(*g, 1, 0)) << "no such output";
}

TEST(CudaInPlaceOutputsTest, ACacheUpdateFoldedIntoTheDecodeAttentionIsInPlace) {
  // The attention reads the caches as they were (the fold: cuda_cache_update_fold.h) at the
  // update's own step, but never the position's row, which it writes: the runtime may still
  // write the updated caches over the caches. Were they diverted into its buffers, the kernel
  // would copy every other key there each call.
  GraphBuilder b;
  const Shape cache = {1, 4, 64, 64}, row = {1, 4, 1, 64};
  Value k_cache = b.Parameter("k_cache", DType::kBF16, cache);
  Value v_cache = b.Parameter("v_cache", DType::kBF16, cache);
  Value k_row = b.Parameter("k_row", DType::kBF16, row);
  Value v_row = b.Parameter("v_row", DType::kBF16, row);
  Value position = b.Parameter("position", DType::kI64, {1});
  Value q = b.Parameter("q", DType::kBF16, row);
  // As PyTorch's index_copy_ is traced: the comparison at the cache's shape, one kernel for both.
  Value hit = b.Binary(OpCode::kEqual, b.Iota(cache, 2, DType::kI64), b.BroadcastTo(b.Reshape(position, {1, 1, 1, 1}), cache));
  Value k = b.Where(hit, b.BroadcastTo(k_row, cache), k_cache);
  Value v = b.Where(hit, b.BroadcastTo(v_row, cache), v_cache);
  Value probs = b.Softmax(b.MulScalar(b.MatMul(q, b.Transpose(k, {0, 1, 3, 2})), 0.125), -1);
  b.Output(b.MatMul(probs, v), "out");
  b.Output(k, "k_updated");
  b.Output(v, "v_updated");
  StatusOr<Graph> built = b.Build();
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  StatusOr<Graph> g = RunGraphPasses(std::move(*built), PassOptions{});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  CudaTarget target;
  target.overrides.cache_updates_in_attention = true;
  Lowered l = Lower(*g, target);
  const CudaGroupProgram& update = l.GroupOf(*g, g->outputs()[1].node);
  ASSERT_GE(update.grouped_into, 0) << "the update is not folded into the attention: this case needs another graph";
  EXPECT_TRUE(OutputMayOverwriteInput(*g, l.plan, l.program, 1, 0));
  EXPECT_TRUE(OutputMayOverwriteInput(*g, l.plan, l.program, 2, 1));
  // Not folded: the update's kernel runs before the attention reads the caches, in place too.
  CudaTarget without_fold;
  without_fold.overrides.cache_updates_in_attention = false;
  Lowered apart = Lower(*g, without_fold);
  ASSERT_LT(apart.GroupOf(*g, g->outputs()[1].node).grouped_into, 0);
  EXPECT_TRUE(OutputMayOverwriteInput(*g, apart.plan, apart.program, 1, 0));
}

}  // namespace
}  // namespace tilefuse
