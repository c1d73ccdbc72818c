// Pipelined row kernels (cpp_emitter.cc, "Pipelined row kernels"): the passes of
// consecutive rows in one inner loop. Compiled, run with poisoned outputs and compared
// with the f64 reference: blocks that do not divide the rows, a last block shorter than
// the pipeline, per-row outputs, NaN rows, long rows with blocked sums, and the
// configurations that turn pipelining off or set its block.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <limits>

#include "reference/interpreter.h"
#include "codegen/cpp/cpp_emitter.h"
#include "testing/cpp_emitter_test_util.h"
#include "backend/cpu/cpu_executable.h"
#include "testing/tensor_compare.h"

namespace tilefuse {
namespace {

struct Compiled {
  Graph graph;
  std::unique_ptr<CpuExecutable> compiled;
  std::string source;  // the generated kernels' functions
};

// Compiles the model; `config` (when given) is applied to every kernel.
Compiled CompileText(const std::string& text, const CppKernelConfig* config = nullptr) {
  emitter_test::CompiledModel m = emitter_test::CompileModelText(text, config);
  std::string source;
  if (m.compiled)
    for (const KernelInfo& k : m.compiled->kernels())
      if (k.generated) source += k.source.substr(k.source.rfind("extern \"C\""));
  return {std::move(m.graph), std::move(m.compiled), source};
}

void ExpectAllOutputsMatch(Compiled& c, const std::vector<Tensor>& inputs, Tolerance tol) {
  auto expected = RunReference(c.graph, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  auto actual = c.compiled->Run(inputs);
  ASSERT_TRUE(actual.ok()) << actual.status().ToString();
  ASSERT_EQ(actual->size(), expected->size());
  for (size_t o = 0; o < actual->size(); ++o) {
    Comparison cmp = CompareTensors((*actual)[o], (*expected)[o], tol);
    EXPECT_TRUE(cmp.pass) << "output " << o << ": " << cmp.reason;
  }
}

std::string SoftmaxModel(int rows, int cols) {
  return fmt::format(R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[{0},{1}] x) => (float[{0},{1}] y) {{
  y = Softmax <axis = -1> (x)
}})", rows, cols);
}

// Layer norm with its per-row Mean and InvStdDev outputs: three passes and stores
// outside the inner loop.
std::string LayerNormModel(int rows, int cols) {
  return fmt::format(R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[{0},{1}] x, float[{1}] s, float[{1}] b) => (float[{0},{1}] y, float[{0},1] mean, float[{0},1] inv) {{
  y, mean, inv = LayerNormalization <axis = -1, epsilon = 1e-5> (x, s, b)
}})", rows, cols);
}

bool Pipelined(const std::string& source) { return source.find("pipelined rows") != std::string::npos; }

// 200 rows of softmax: blocks of 24 (3 passes x 8) leave a last block of 8; NaNs in
// three rows (first element, a middle lane, the last element) make those rows NaN.
TEST(CppEmitterPipelineTest, SoftmaxMatchesReferenceIncludingNanRows) {
  Compiled c = CompileText(SoftmaxModel(200, 333));
  ASSERT_TRUE(Pipelined(c.source)) << c.source;
  EXPECT_NE(c.source.find("blocks of 24 rows"), std::string::npos) << c.source;
  Tensor x = Tensor::Random(DType::kF32, {200, 333}, 21);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  x.SetDouble(5 * 333, nan);          // a filling step's row (block 0)
  x.SetDouble(100 * 333 + 170, nan);  // a steady step's row
  x.SetDouble(199 * 333 + 332, nan);  // the last row: a draining step
  ExpectAllOutputsMatch(c, {x}, {1e-5, 1e-7});
  auto out = c.compiled->Run({x});
  ASSERT_TRUE(out.ok());
  for (int row : {5, 100, 199}) EXPECT_TRUE(std::isnan((*out)[0].GetDouble(row * 333 + 1))) << row;
  EXPECT_FALSE(std::isnan((*out)[0].GetDouble(6 * 333)));
}

// x - max(x): a NaN anywhere in a row makes the row's max NaN, so every element of that
// row is NaN, not only the NaN's own (the max pass shares its loop with the store pass
// of the row before, and its lanes are combined by OpenMP's max plus a NaN count).
TEST(CppEmitterPipelineTest, MaxPassPropagatesNanInEveryStepKind) {
  Compiled c = CompileText(R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[100,77] x) => (float[100,77] y) {
  axes = Constant <value = int64[1] {-1}> ()
  m = ReduceMax <keepdims = 1> (x, axes)
  y = Sub (x, m)
})");
  ASSERT_TRUE(Pipelined(c.source)) << c.source;
  Tensor x = Tensor::Random(DType::kF32, {100, 77}, 22);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int row : {0, 1, 50, 63, 99}) x.SetDouble(row * 77 + (row * 13) % 77, nan);
  ExpectAllOutputsMatch(c, {x}, {0, 0});
  auto out = c.compiled->Run({x});
  ASSERT_TRUE(out.ok());
  for (int row : {0, 1, 50, 63, 99}) EXPECT_TRUE(std::isnan((*out)[0].GetDouble(row * 77 + (row * 13 + 1) % 77))) << row;
}

// 49 rows: two blocks of 24 and a last block of one row, shorter than the pipeline.
TEST(CppEmitterPipelineTest, LastBlockShorterThanThePipeline) {
  Compiled c = CompileText(LayerNormModel(49, 100));
  ASSERT_TRUE(Pipelined(c.source)) << c.source;
  std::vector<Tensor> in = {Tensor::Random(DType::kF32, {49, 100}, 3), Tensor::Random(DType::kF32, {100}, 4),
                            Tensor::Random(DType::kF32, {100}, 5)};
  ExpectAllOutputsMatch(c, in, {1e-4, 1e-5});
}

// Rows longer than a sum block: the fused loop is blocked, the lanes add into doubles.
TEST(CppEmitterPipelineTest, LongRowsWithBlockedSums) {
  Compiled c = CompileText(LayerNormModel(64, 3000));
  ASSERT_TRUE(Pipelined(c.source)) << c.source;
  EXPECT_NE(c.source.find("i1_block"), std::string::npos) << c.source;
  std::vector<Tensor> in = {Tensor::Random(DType::kF32, {64, 3000}, 6), Tensor::Random(DType::kF32, {3000}, 7),
                            Tensor::Random(DType::kF32, {3000}, 8)};
  ExpectAllOutputsMatch(c, in, {1e-4, 1e-5});
}

// Dropout's random values prefilled per row (one Philox block per four elements) in the
// filling and the steady steps, into the slot of the row that enters the pipeline.
TEST(CppEmitterPipelineTest, PrefilledRandomValuesMatchReference) {
  Compiled c = CompileText(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[100,128] x, float[100,128] r, float[128] s) => (float[100,128] y) {
  ratio = Constant <value = float {0.5}> ()
  training = Constant <value = bool {1}> ()
  dropped = Dropout <seed = 11> (x, ratio, training)
  summed = Add (dropped, r)
  y = LayerNormalization <axis = -1, epsilon = 1e-5> (summed, s)
})");
  ASSERT_TRUE(Pipelined(c.source)) << c.source;
  EXPECT_NE(c.source.find("tf_philox_uniform4("), std::string::npos) << c.source;
  std::vector<Tensor> in = {Tensor::Random(DType::kF32, {100, 128}, 12), Tensor::Random(DType::kF32, {100, 128}, 13),
                            Tensor::Random(DType::kF32, {128}, 14)};
  ExpectAllOutputsMatch(c, in, {1e-4, 1e-5});
}

// A chunked schedule's chunk is the block; pipeline_rows false is the row-at-a-time loop.
TEST(CppEmitterPipelineTest, ConfigurationsSetTheBlockOrTurnItOff) {
  CppKernelConfig chunked{0, CppSchedule::kDynamic, 32, true, true};
  Compiled c = CompileText(SoftmaxModel(160, 200), &chunked);
  EXPECT_NE(c.source.find("blocks of 32 rows"), std::string::npos) << c.source;
  EXPECT_NE(c.source.find("schedule(dynamic, 1)"), std::string::npos) << c.source;
  Tensor x = Tensor::Random(DType::kF32, {160, 200}, 9);
  ExpectAllOutputsMatch(c, {x}, {1e-5, 1e-7});

  CppKernelConfig off;
  off.pipeline_rows = false;
  Compiled plain = CompileText(SoftmaxModel(160, 200), &off);
  EXPECT_FALSE(Pipelined(plain.source)) << plain.source;
  ExpectAllOutputsMatch(plain, {x}, {1e-5, 1e-7});
}

// Not pipelined: rows whose passes would not stay in cache together, and too few rows.
TEST(CppEmitterPipelineTest, LongRowsAndFewRowsRunOneRowAtATime) {
  EXPECT_FALSE(Pipelined(CompileText(SoftmaxModel(64, 40000)).source));
  EXPECT_FALSE(Pipelined(CompileText(SoftmaxModel(40, 64)).source));
}

}  // namespace
}  // namespace tilefuse
