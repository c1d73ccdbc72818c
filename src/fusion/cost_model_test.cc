// The cost model's arithmetic rates: a convolution kept whole (the CPU's oneDNN path) is
// charged at the matrix rate, like the matmul it is, not at the vector rate it was charged at.
#include "fusion/cost_model.h"

#include <gtest/gtest.h>

#include "fusion/device_spec.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

TEST(CostModelTest, AConvolutionIsChargedAtTheMatrixRate) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {1, 64, 56, 56});
  Value w = b.Parameter("w", DType::kF32, {64, 64, 3, 3});
  PoolParams p;
  p.kernel = {3, 3};
  p.strides = {1, 1};
  p.pads = {1, 1, 1, 1};
  p.dilations = {1, 1};
  Value y = b.Conv(x, w, Value{}, p);
  b.Output(y, "y");
  StatusOr<Graph> graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  const DeviceSpec* cpu = FindDeviceSpec("cpu");
  ASSERT_NE(cpu, nullptr);
  CostModel model(*graph, *cpu);
  const int conv = y.id;
  const double flops = model.NodeFlops(graph->node(conv));
  EXPECT_DOUBLE_EQ(flops, 2.0 * 64 * 56 * 56 * 64 * 9);
  GroupCost cost = model.PredictGroupTime({conv});
  const double at_matrix_rate = flops / cpu->MatmulFlops(DType::kF32);
  const double bytes_time = cost.bytes / cpu->bandwidth_bytes_per_s;
  EXPECT_NEAR(cost.seconds, std::max(at_matrix_rate, bytes_time) + cpu->launch_overhead_s, 1e-9);
  EXPECT_LT(cost.seconds, flops / cpu->vector_flops_f32);  // not the vector rate
}

}  // namespace
}  // namespace tilefuse
