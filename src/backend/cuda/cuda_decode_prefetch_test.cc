// The decode attention's keys and values prefetched to L2 before its wait for the grid ahead
// (CudaTarget overrides' decode_prefetch, TILEFUSE_DECODE_PREFETCH=0 off): the target's switch
// reaches the kernel's text. Lowered for the GPU without one.
#include <gtest/gtest.h>

#include "backend/cuda/cuda_compile_units.h"
#include "backend/cuda/cuda_program.h"
#include "fusion/group_classifier.h"
#include "passes/pipeline.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

// One query row a head over 200 cached keys: softmax(q · kᵀ / 8) · v.
Graph DecodeAttention() {
  GraphBuilder b;
  Value q = b.Parameter("q", DType::kBF16, {1, 12, 1, 64});
  Value k = b.Parameter("k", DType::kBF16, {1, 12, 200, 64});
  Value v = b.Parameter("v", DType::kBF16, {1, 12, 200, 64});
  Value probs = b.Softmax(b.MulScalar(b.MatMul(q, b.Transpose(k, {0, 1, 3, 2})), 0.125), -1);
  b.Output(b.MatMul(probs, v), "out");
  StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  StatusOr<Graph> passed = RunGraphPasses(std::move(*g), PassOptions{});
  EXPECT_TRUE(passed.ok()) << passed.status().ToString();
  return std::move(*passed);
}

std::string AttentionText(const Graph& g, const CudaTarget& target) {
  StatusOr<CudaPlan> plan = PlanFusionForCuda(g, PlannerOptions{}, target);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  StatusOr<CudaProgram> program = BuildCudaProgram(g, plan->plan, FindInlinedGenerators(g), "", {}, target);
  EXPECT_TRUE(program.ok()) << program.status().ToString();
  for (const CudaGroupProgram& p : program->groups)
    for (const CudaLaunchable* k : Launchables(p))
      if (k->source.function.find("tf::AttentionDecode<Config>") != std::string::npos) return k->source.function;
  ADD_FAILURE() << "no decode attention kernel";
  return "";
}

TEST(CudaDecodePrefetchTest, TheTargetsSwitchReachesTheDecodeAttention) {
  const Graph g = DecodeAttention();
  CudaTarget target;
  EXPECT_NE(AttentionText(g, target).find("tf::AttentionDecodePrefetch<Config>"), std::string::npos) << "on by default";
  target.overrides.decode_prefetch = false;
  const std::string off = AttentionText(g, target);
  EXPECT_EQ(off.find("Prefetch"), std::string::npos) << off;
  EXPECT_NE(off.find("tf::tf_await_prior_grid();"), std::string::npos) << off;
}

}  // namespace
}  // namespace tilefuse
