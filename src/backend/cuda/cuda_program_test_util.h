// For tests of the CUDA program on the CPU: a graph planned and lowered for a target, as the
// backend does (no GPU needed), failures reported as test failures.
#pragma once

#include <gtest/gtest.h>

#include "backend/cuda/cuda_program.h"
#include "fusion/group_classifier.h"

namespace tilefuse {

inline CudaProgram LowerForTest(const Graph& g, const CudaTarget& target) {
  StatusOr<CudaPlan> plan = PlanFusionForCuda(g, PlannerOptions{}, target);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (!plan.ok()) return {};
  StatusOr<CudaProgram> program = BuildCudaProgram(g, plan->plan, FindInlinedGenerators(g), "", {}, target);
  EXPECT_TRUE(program.ok()) << program.status().ToString();
  return program.ok() ? std::move(*program) : CudaProgram{};
}

}  // namespace tilefuse
