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

inline PlannedText PlanFp8Linear(int64_t m, int64_t k, int64_t n, DType type, const PassOptions& passes) {
  GraphBuilder b;
  auto dequantize = [&](Value q, Value scale) { return b.Cast(b.Mul(b.Cast(q, DType::kF32), scale), DType::kBF16); };
  Value x = dequantize(b.Parameter("x", type, {m, k}), b.Parameter("sx", DType::kF32, {}));
  Value w = dequantize(b.Constant(Tensor::Random(type, {k, n}, 11)), b.Constant(Tensor::Random(DType::kF32, {1, n}, 12)));
  b.Output(b.Add(b.MatMul(x, w), b.Parameter("bias", DType::kBF16, {n})), "y");
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

}  // namespace tilefuse
