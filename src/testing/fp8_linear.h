// For tests of FP8 products: a quantized linear layer as quantization tools write it
// (DequantizeLinear of an 8-bit activation with a per-tensor scale and of a constant 8-bit
// weight with one scale per output column, the product in bf16, a bias after), built in C++
// because the ONNX text parser (onnx 1.12) has no 8-bit float types; through `passes` and
// planned. Failures are test failures (the result is then empty).
#pragma once

#include <gtest/gtest.h>

#include "fusion/planner.h"
#include "passes/pipeline.h"
#include "testing/onnx_text_plan.h"
#include "tilefuse/builder.h"

namespace tilefuse {

// `v` repeated in blocks along `axis` to `operand`'s shape, as the importer writes a blocked
// DequantizeLinear's scale.
inline Value RepeatedBlocks(GraphBuilder& b, Value v, const Shape& operand, int64_t axis) {
  Shape split = b.shape(v), repeated = b.shape(v);
  const int64_t block = operand[axis] / split[axis];
  split.insert(split.begin() + axis + 1, 1);
  repeated.insert(repeated.begin() + axis + 1, block);
  return b.Reshape(b.BroadcastTo(b.Reshape(v, split), repeated), operand);
}

// The graph `b` holds, through `passes` and planned.
inline PlannedText PlanBuilt(GraphBuilder& b, const PassOptions& passes) {
  PlannedText out;
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  if (!graph.ok()) return out;
  auto passed = RunGraphPasses(std::move(*graph), passes);
  EXPECT_TRUE(passed.ok()) << passed.status().ToString();
  if (!passed.ok()) return out;
  out.graph = std::move(*passed);
  auto plan = PlanFusion(out.graph, {});
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (plan.ok()) out.plan = std::move(*plan);
  return out;
}

// `block_scales`: x's scale per row and 128 columns of K, the weight's per 128 rows of K and
// column (ONNX's blocked DequantizeLinear), instead of per tensor and per column;
// `weight_blocks` too: the weight's scale one per 128x128 block (DeepGEMM's weights), each
// repeated over its block's 128 columns.
inline PlannedText PlanFp8Linear(int64_t m, int64_t k, int64_t n, DType type, const PassOptions& passes, bool block_scales = false,
                                 bool weight_blocks = false) {
  GraphBuilder b;
  auto dequantize = [&](Value q, Value scale) { return b.Cast(b.Mul(b.Cast(q, DType::kF32), scale), DType::kBF16); };
  Value sx = block_scales ? RepeatedBlocks(b, b.Parameter("sx", DType::kF32, {m, k / 128}), {m, k}, 1) : b.Parameter("sx", DType::kF32, {});
  Value sw_blocks = weight_blocks ? RepeatedBlocks(b, b.Constant(Tensor::Random(DType::kF32, {k / 128, n / 128}, 12)), {k / 128, n}, 1)
                                  : b.Constant(Tensor::Random(DType::kF32, {k / 128, n}, 12));
  Value sw = block_scales ? RepeatedBlocks(b, sw_blocks, {k, n}, 0) : b.Constant(Tensor::Random(DType::kF32, {1, n}, 12));
  Value x = dequantize(b.Parameter("x", type, {m, k}), sx);
  Value w = dequantize(b.Constant(Tensor::Random(type, {k, n}, 11)), sw);
  b.Output(b.Add(b.MatMul(x, w), b.Parameter("bias", DType::kBF16, {n})), "y");
  return PlanBuilt(b, passes);
}

}  // namespace tilefuse
