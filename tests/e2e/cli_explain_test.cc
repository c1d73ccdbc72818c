// `tilefuse explain` as a user runs it: text and JSON on stdout, DOT and SVG files
// written whole, and bad options rejected with exit code 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "e2e/cli_test_util.h"
#include "support/file_util.h"

namespace tilefuse {
namespace {

using testing_cli::Quote;
using testing_cli::RunTilefuse;

std::string Example(const char* name) { return Quote(std::string(TILEFUSE_SOURCE_DIR) + "/examples/" + name); }

TEST(CliExplainTest, TextAndJson) {
  auto text = RunTilefuse("explain " + Example("softmax_manual.onnxtxt"));
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("-> 1 fused"), std::string::npos) << text.out;
  auto json = RunTilefuse("explain " + Example("mlp_block.onnxtxt") + " --json --device h200");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  nlohmann::json parsed = nlohmann::json::parse(json.out);
  EXPECT_EQ(parsed["device"], "h200");
  // f32 with erf GELU: the GEMM template's 3xTF32 form takes both epilogues (the layer norm,
  // then two products with theirs).
  EXPECT_EQ(parsed["fused_kernels"], 3);
  // Under TF32, whose tensor cores read B K-major only, the weights (inputs read [K][N]) leave
  // both products to cuBLASLt, each epilogue a kernel of its own, and the plan says why.
  auto why = RunTilefuse("explain " + Example("mlp_block.onnxtxt") + " --device h200 --precision high");
  EXPECT_EQ(why.exit_code, 0) << why.err;
  EXPECT_NE(why.out.find("-> 5 fused"), std::string::npos) << why.out;
  EXPECT_NE(why.out.find("epilogue as its own kernel (cuBLASLt's product, no GEMM template:"), std::string::npos) << why.out;
  // bf16 takes the template: the epilogue is fused.
  testing_cli::ScratchDir dir;
  testing_cli::WriteFile(dir / "bf16.onnxtxt", R"(<ir_version: 8, opset_import: ["" : 17]>
g (bfloat16[256,512] x, bfloat16[512,1024] w, bfloat16[1024] b) => (bfloat16[256,1024] y) {
  p = MatMul (x, w)
  q = Add (p, b)
  y = Tanh (q)
})");
  auto fused = RunTilefuse("explain " + Quote(dir / "bf16.onnxtxt") + " --json");
  ASSERT_EQ(fused.exit_code, 0) << fused.err;
  EXPECT_EQ(nlohmann::json::parse(fused.out)["fused_kernels"], 1) << fused.out;
  // On the CPU an epilogue is always a pass of its own.
  auto cpu = RunTilefuse("explain " + Quote(dir / "bf16.onnxtxt") + " --device cpu");
  EXPECT_NE(cpu.out.find("BLAS writes the product"), std::string::npos) << cpu.out;
}

// An f32 linear layer with a constant weight and a residual: the GEMM template fuses the
// residual at either precision (3xTF32 under highest, TF32 under high). With the weight an
// input read [K][N], 3xTF32 still fuses it (it transposes B's parts itself); TF32, whose tensor
// cores read B K-major only, leaves the residual a kernel of its own (cuBLASLt fuses none).
TEST(CliExplainTest, F32EpiloguesFuseWhereTheTemplateReadsTheWeight) {
  testing_cli::ScratchDir dir;
  testing_cli::WriteFile(dir / "f32.onnxtxt", R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[256,8] x, float[256,8] r) => (float[256,8] y) {
  w = Constant <value = float[8,8] {-0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, -0.75}> ()
  p = MatMul (x, w)
  y = Add (p, r)
})");
  testing_cli::WriteFile(dir / "input_weight.onnxtxt", R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[256,8] x, float[8,8] w, float[256,8] r) => (float[256,8] y) {
  p = MatMul (x, w)
  y = Add (p, r)
})");
  // The kernels `explain` plans for `file` with `flags`.
  auto fused_kernels = [&](const char* file, const std::string& flags) -> nlohmann::json {
    auto run = RunTilefuse("explain " + Quote(dir / file) + " --json" + flags);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return run.exit_code == 0 ? nlohmann::json::parse(run.out)["fused_kernels"] : nlohmann::json();
  };
  EXPECT_EQ(fused_kernels("f32.onnxtxt", ""), 1);
  EXPECT_EQ(fused_kernels("f32.onnxtxt", " --precision high"), 1);
  EXPECT_EQ(fused_kernels("input_weight.onnxtxt", ""), 1);
  EXPECT_EQ(fused_kernels("input_weight.onnxtxt", " --precision high"), 2);
  auto wrong = RunTilefuse("explain " + Quote(dir / "f32.onnxtxt") + " --precision tf32");
  EXPECT_EQ(wrong.exit_code, 2) << wrong.out;
}

TEST(CliExplainTest, NoFusionAndDisabledKinds) {
  auto unfused = RunTilefuse("explain " + Example("mlp_block.onnxtxt") + " --json --no-fusion");
  ASSERT_EQ(unfused.exit_code, 0) << unfused.err;
  nlohmann::json parsed = nlohmann::json::parse(unfused.out);
  EXPECT_EQ(parsed["fused_kernels"], parsed["unfused_kernels"]);
  auto no_gemm = RunTilefuse("explain " + Example("matmul_bias_relu.onnxtxt") + " --disable-fusion=gemm");
  EXPECT_EQ(no_gemm.exit_code, 0) << no_gemm.err;
  EXPECT_NE(no_gemm.out.find("gemm fusion is disabled"), std::string::npos) << no_gemm.out;
}

TEST(CliExplainTest, DotAndSvgFiles) {
  testing_cli::ScratchDir dir;
  std::string dot = dir / "plan.dot", svg = dir / "plan.svg";
  auto r = RunTilefuse("explain " + Example("causal_attention.onnxtxt") + " --dot " + Quote(dot) + " --svg " + Quote(svg));
  if (FindOnPath("dot").empty()) {
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("Graphviz"), std::string::npos) << r.err;
    GTEST_SKIP() << "Graphviz `dot` is not installed: checked the error instead of the SVG";
  }
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(testing_cli::ReadFile(dot).find("cluster_0"), std::string::npos);
  std::string rendered = testing_cli::ReadFile(svg);
  EXPECT_NE(rendered.find("<svg"), std::string::npos);
  EXPECT_NE(rendered.find("attention"), std::string::npos);
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << "left behind: " << entry.path();
}

TEST(CliExplainTest, BadOptionsExitTwo) {
  auto device = RunTilefuse("explain " + Example("softmax_manual.onnxtxt") + " --device tpu");
  EXPECT_EQ(device.exit_code, 2);
  EXPECT_NE(device.err.find("unknown device 'tpu'"), std::string::npos) << device.err;
  auto kind = RunTilefuse("explain " + Example("softmax_manual.onnxtxt") + " --disable-fusion=loops");
  EXPECT_EQ(kind.exit_code, 2);
  EXPECT_NE(kind.err.find("unknown group kind 'loops'"), std::string::npos) << kind.err;
}

}  // namespace
}  // namespace tilefuse
