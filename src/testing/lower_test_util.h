// Test helper: a graph built with the C++ API, through the passes and the planner, planned
// as one group and lowered to its Kernel IR.
#pragma once

#include <gtest/gtest.h>

#include "codegen/lower.h"
#include "fusion/group_classifier.h"
#include "fusion/planner.h"
#include "passes/pipeline.h"
#include "tilefuse/builder.h"

namespace tilefuse {

inline Kernel LowerSingleGroup(GraphBuilder& b) {
  auto built = b.Build();
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  auto graph = RunGraphPasses(std::move(built).value(), PassOptions{});
  EXPECT_TRUE(graph.ok());
  auto plan = PlanFusion(*graph, PlannerOptions{});
  EXPECT_TRUE(plan.ok());
  EXPECT_EQ(plan->groups.size(), 1u);
  auto kernel = LowerGroup(*graph, plan->groups[0], FindInlinedGenerators(*graph));
  EXPECT_TRUE(kernel.ok()) << kernel.status().ToString();
  return *kernel;
}

}  // namespace tilefuse
