// Models whose inputs have symbolic dims (ONNX dim_param), as exporters write them for
// deployment: `tilefuse run` and `compile` take the dims' values from --shape or from the
// inputs given, and refuse (exit 2) with the dim's name and how to give it otherwise.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "backend/cuda/nvrtc_compiler.h"
#include "e2e/cli_test_util.h"
#include "frontend/onnx/importer.h"

namespace tilefuse {
namespace {

using testing_cli::CommandResult;
using testing_cli::Quote;
using testing_cli::RunTilefuse;
using testing_cli::ScratchDir;

// A residual block over [batch, seq, 8]: both inputs share both symbols.
constexpr const char* kModel = R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[batch, seq, 8] x, float[batch, seq, 8] r) => (float[batch, seq, 8] y)
{
  s = Add (x, r)
  y = Relu (s)
}
)ONNX";

std::string WriteModel(const ScratchDir& dir) {
  const std::string path = dir / "model.onnx";
  testing_cli::WriteBinaryModel(testing_cli::ParseOnnxText(kModel), path);
  return path;
}

void WriteInputs(const std::string& folder, const Shape& x, const Shape& r) {
  std::filesystem::create_directories(folder);
  ASSERT_TRUE(SaveTensorProtoFile(Tensor::Random(DType::kF32, x, 1), "x", folder + "/input_0.pb").ok());
  ASSERT_TRUE(SaveTensorProtoFile(Tensor::Random(DType::kF32, r, 2), "r", folder + "/input_1.pb").ok());
}

TEST(CliSymbolicDims, WithoutValuesTheRunNamesTheDimAndHowToGiveIt) {
  ScratchDir dir;
  CommandResult r = RunTilefuse("run " + Quote(WriteModel(dir)) + " --backend cpu");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("input 'x' has symbolic dim 0 ('batch'): give its value (--shape batch=N"), std::string::npos) << r.err;
}

TEST(CliSymbolicDims, ShapeGivesTheValuesAndTheRunChecks) {
  ScratchDir dir;
  const std::string model = WriteModel(dir);
  for (const char* shape : {"batch=2,seq=5", "batch=3,seq=1"}) {
    SCOPED_TRACE(shape);
    CommandResult r = RunTilefuse("run " + Quote(model) + " --backend cpu --check --shape " + shape);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    const std::string seq = std::string(shape).substr(std::string(shape).find("seq=") + 4);
    const std::string batch = std::string(shape).substr(6, std::string(shape).find(',') - 6);
    EXPECT_NE(r.out.find("f32[" + batch + "," + seq + ",8]"), std::string::npos) << r.out;
  }
  // The other commands that import a model take the same flag.
  for (const char* command : {"compile", "explain", "print", "bench --repeats 1"}) {
    CommandResult with = RunTilefuse(std::string(command) + " " + Quote(model) + " --shape batch=4,seq=16");
    EXPECT_EQ(with.exit_code, 0) << command << ": " << with.out << with.err;
    CommandResult without = RunTilefuse(std::string(command) + " " + Quote(model));
    EXPECT_EQ(without.exit_code, 2) << command << ": " << without.out << without.err;
    EXPECT_NE(without.err.find("('batch'): give its value"), std::string::npos) << command << ": " << without.err;
  }
}

TEST(CliSymbolicDims, TheInputsGivenFixTheDims) {
  ScratchDir dir;
  const std::string model = WriteModel(dir);
  WriteInputs(dir / "in", {3, 7, 8}, {3, 7, 8});
  CommandResult r = RunTilefuse("run " + Quote(model) + " --backend cpu --check --inputs " + Quote(dir / "in"));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("f32[3,7,8]"), std::string::npos) << r.out;
  // Inputs that disagree on a symbol, or with --shape, are refused naming both.
  WriteInputs(dir / "bad", {3, 7, 8}, {3, 6, 8});
  CommandResult bad = RunTilefuse("run " + Quote(model) + " --backend cpu --inputs " + Quote(dir / "bad"));
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("input 'r' is given with dim 1 ('seq') = 6, but 'seq' is 7 (from input 'x''s shape)"), std::string::npos)
      << bad.err;
  CommandResult against = RunTilefuse("run " + Quote(model) + " --backend cpu --shape batch=2 --inputs " + Quote(dir / "in"));
  EXPECT_EQ(against.exit_code, 2) << against.out << against.err;
  EXPECT_NE(against.err.find("dim 0 ('batch') = 3, but 'batch' is 2 (as given)"), std::string::npos) << against.err;
}

// A range (TensorRT's min/opt/max): without inputs the run takes its typical value; inputs within
// it run, inputs outside it are refused naming the dim, its value and the range.
TEST(CliSymbolicDims, ARangeCompilesAtItsTypicalValueAndRefusesInputsOutsideIt) {
  ScratchDir dir;
  const std::string model = WriteModel(dir);
  CommandResult typical = RunTilefuse("run " + Quote(model) + " --backend cpu --check --shape batch=2,seq=1..6..64");
  EXPECT_EQ(typical.exit_code, 0) << typical.out << typical.err;
  EXPECT_NE(typical.out.find("f32[2,6,8]"), std::string::npos) << typical.out;
  CommandResult largest = RunTilefuse("compile " + Quote(model) + " --backend cpu --json --shape batch=2,seq=1..64");
  EXPECT_EQ(largest.exit_code, 0) << largest.out << largest.err;
  WriteInputs(dir / "in", {3, 7, 8}, {3, 7, 8});
  CommandResult within = RunTilefuse("run " + Quote(model) + " --backend cpu --check --shape seq=1..64 --inputs " + Quote(dir / "in"));
  EXPECT_EQ(within.exit_code, 0) << within.out << within.err;
  EXPECT_NE(within.out.find("f32[3,7,8]"), std::string::npos) << within.out;
  CommandResult outside = RunTilefuse("run " + Quote(model) + " --backend cpu --shape seq=8..64 --inputs " + Quote(dir / "in"));
  EXPECT_EQ(outside.exit_code, 2) << outside.out << outside.err;
  EXPECT_NE(outside.err.find("--shape: dim 'seq' is 7 in the inputs given, outside its range 8..64"), std::string::npos)
      << outside.err;
  CommandResult reversed = RunTilefuse("run " + Quote(model) + " --backend cpu --shape batch=2,seq=64..1");
  EXPECT_EQ(reversed.exit_code, 2) << reversed.out << reversed.err;
  EXPECT_NE(reversed.err.find("'seq=64..1' is not a range: MIN <= TYPICAL <= MAX"), std::string::npos) << reversed.err;
}

// A transformers BERT exported with symbolic batch and sequence dims (tests/models, the legacy
// exporter's dynamic_axes): its data set's shape, and two more given by --shape, each checked
// against the reference with no group on the reference interpreter.
TEST(CliSymbolicDims, AnExportedBertRunsAtThreeShapes) {
  const std::string folder = std::string(TILEFUSE_SOURCE_DIR) + "/tests/models/bert_tiny_dynamic";
  CommandResult data = RunTilefuse("run " + Quote(folder) + " --backend cpu --check --strict");
  EXPECT_EQ(data.exit_code, 0) << data.out << data.err;
  EXPECT_NE(data.out.find("f32[2,24,64]"), std::string::npos) << data.out;
  for (const char* shape : {"batch=1,sequence=7", "batch=3,sequence=40"}) {
    CommandResult r = RunTilefuse("run " + Quote(folder + "/model.onnx") + " --backend cpu --check --strict --shape " + shape);
    EXPECT_EQ(r.exit_code, 0) << shape << r.out << r.err;
    EXPECT_NE(r.out.find("result: PASS"), std::string::npos) << shape << r.out;
  }
}

// The loop kernels print the sizes the symbols give over launch parameters, and the attention
// template takes its batch and lengths at launch: a model made of them compiles once, and its
// second and third bindings find every kernel in the cache.
TEST(CliSymbolicDims, ASecondAndThirdBindingCompileNoKernel) {
  ScratchDir dir;
  if (!NvrtcCompiler::Create(dir / "probe").ok()) GTEST_SKIP() << "NVRTC not available: CUDA kernels not compiled";
  // A model file compiled for sm_90a at `shapes` in turn over a cold kernel cache of its own:
  // the first compiles every unit (more than `min_cubins`), the others the same units and none
  // anew.
  auto compiles_only_first = [&](const std::string& model, const std::string& cache, const std::vector<std::string>& shapes,
                                 int min_cubins) {
    setenv("TILEFUSE_CACHE_DIR", (dir / cache).c_str(), 1);
    int first_cubins = 0;
    for (const std::string& shape : shapes) {
      CommandResult r = RunTilefuse("compile " + Quote(model) + " --backend cuda --json --shape " + shape);
      ASSERT_EQ(r.exit_code, 0) << shape << r.out << r.err;
      const nlohmann::json j = nlohmann::json::parse(r.out);
      if (first_cubins == 0) {
        first_cubins = j["cubins"].get<int>();
        EXPECT_GT(first_cubins, min_cubins) << model;
        EXPECT_EQ(j["nvrtc_compiles"].get<int>(), first_cubins) << "a cold cache compiles every unit";
        continue;
      }
      EXPECT_EQ(j["cubins"].get<int>(), first_cubins) << model << " " << shape;
      EXPECT_EQ(j["nvrtc_compiles"].get<int>(), 0) << model << " " << shape << ": " << r.out;
    }
  };
  const std::vector<std::pair<std::string, std::vector<std::string>>> models = {
      {"norm_gelu_softmax_symbolic_f32", {"batch=2,seq=24", "batch=3,seq=40", "batch=16,seq=128"}},
      {"attention_symbolic_bf16", {"batch=2,seq=100", "batch=3,seq=333", "batch=8,seq=77"}},
      {"causal_attention_symbolic_bf16", {"batch=2,seq=1000", "batch=2,seq=1100", "batch=3,seq=777"}},
      // A decode step: 101 keys (no whole key block), 228, 1024 (all whole).
      {"decode_attention_symbolic_bf16", {"batch=1,past=100", "batch=1,past=227", "batch=1,past=1023"}}};
  for (const auto& [name, shapes] : models)
    compiles_only_first(std::string(TILEFUSE_SOURCE_DIR) + "/tests/shapes/" + name + ".onnxtxt", "cache-" + name, shapes, 0);
  // An exported BERT (transformers, symbolic batch and sequence): its products take their rows
  // at launch, its reductions along the sequence their lengths and its transposed tiles their
  // extents, so a second and third binding compile nothing (issue 48's criterion; each of them
  // large enough to tile the transposes and of lengths that are multiples of 8: other lengths
  // change the vector width, a batch of 1 the dims' structure).
  compiles_only_first(std::string(TILEFUSE_SOURCE_DIR) + "/tests/models/bert_tiny_dynamic/model.onnx", "cache-bert",
                      {"batch=3,sequence=40", "batch=4,sequence=56", "batch=2,sequence=48"}, 5);
  // A KV-cache decode step exported as deployments export it (f32: its attention split, the
  // softmax over past + 1 keys a row held in registers): the row's length comes at launch and
  // its chunk count (64 keys a chunk here) stays in the text, so past lengths of one count and
  // vector width compile nothing (201, 231 and 241 keys: 4 chunks of one key a thread).
  compiles_only_first(std::string(TILEFUSE_SOURCE_DIR) + "/tests/models/gpt2_kv_step_dynamic/model.onnx", "cache-kv",
                      {"batch=1,past=200", "batch=1,past=230", "batch=1,past=240"}, 3);
  unsetenv("TILEFUSE_CACHE_DIR");
}

// The CPU backend's loop kernels print their sizes over the symbols too (their values passed
// after the buffers): the model's shared object is the same at every binding whose kernels make
// the same choices (past the few rows a single thread runs), so `run --check` at a second and
// third binding compiles nothing (the JSON report's jit_compiles).
TEST(CliSymbolicDims, ACpuRunAtASecondAndThirdBindingCompilesNothing) {
  ScratchDir dir;
  setenv("TILEFUSE_CACHE_DIR", (dir / "cache").c_str(), 1);
  const std::string model = std::string(TILEFUSE_SOURCE_DIR) + "/tests/shapes/norm_gelu_softmax_symbolic_f32.onnxtxt";
  std::vector<int> compiles;
  for (const char* shape : {"batch=16,seq=128", "batch=8,seq=100", "batch=5,seq=333"}) {
    CommandResult r = RunTilefuse("run " + Quote(model) + " --backend cpu --check --strict --json --shape " + shape);
    ASSERT_EQ(r.exit_code, 0) << shape << r.out << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["status"], "pass") << shape << r.out;
    compiles.push_back(j["jit_compiles"].get<int>());
  }
  EXPECT_EQ(compiles, (std::vector<int>{1, 0, 0}));
  // The CPU's attention kernel takes its lengths and batch from the symbols too: a decode step's
  // and a padded self-attention's shared objects serve their next bindings; so do reductions
  // along seq.
  for (const auto& [name, shapes] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"decode_attention_symbolic_bf16", {"batch=1,past=100", "batch=1,past=101", "batch=2,past=50"}},
           {"attention_symbolic_bf16", {"batch=3,seq=333", "batch=4,seq=300", "batch=2,seq=700"}},
           // Reductions whose row is the sequence: the C++ inner loop takes its length at run time.
           {"seq_softmax_pool_symbolic_f32", {"batch=16,seq=128", "batch=24,seq=100", "batch=9,seq=333"}}}) {
    compiles.clear();
    for (const std::string& shape : shapes) {
      CommandResult r = RunTilefuse("run " + Quote(std::string(TILEFUSE_SOURCE_DIR) + "/tests/shapes/" + name + ".onnxtxt") +
                                    " --backend cpu --check --strict --json --shape " + shape);
      ASSERT_EQ(r.exit_code, 0) << shape << r.out << r.err;
      const nlohmann::json j = nlohmann::json::parse(r.out);
      EXPECT_EQ(j["status"], "pass") << name << " " << shape << r.out;
      compiles.push_back(j["jit_compiles"].get<int>());
    }
    EXPECT_EQ(compiles, (std::vector<int>{1, 0, 0})) << name;
  }
  // With every size written in, each binding is a compile of its own.
  setenv("TILEFUSE_SYMBOLIC_SIZES", "0", 1);
  CommandResult literal = RunTilefuse("run " + Quote(model) + " --backend cpu --json --shape batch=7,seq=100");
  unsetenv("TILEFUSE_SYMBOLIC_SIZES");
  unsetenv("TILEFUSE_CACHE_DIR");
  ASSERT_EQ(literal.exit_code, 0) << literal.out << literal.err;
  EXPECT_EQ(nlohmann::json::parse(literal.out)["jit_compiles"], 1);
}

// explain says which values the plan was made at and each group's outputs in the symbols.
TEST(CliSymbolicDims, ExplainShowsTheSymbols) {
  const std::string model = std::string(TILEFUSE_SOURCE_DIR) + "/tests/shapes/mlp_symbolic_bf16.onnxtxt";
  CommandResult text = RunTilefuse("explain " + Quote(model) + " --shape batch=2,seq=100");
  ASSERT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(text.out.find("symbols: batch = 2, seq = 100"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("[batch, seq, 1024]"), std::string::npos) << text.out;
  CommandResult json = RunTilefuse("explain " + Quote(model) + " --shape batch=2,seq=100 --json");
  ASSERT_EQ(json.exit_code, 0) << json.out << json.err;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["symbols"]["batch"], 2);
  EXPECT_EQ(j["symbols"]["seq"], 100);
}

TEST(CliSymbolicDims, AMalformedShapeFlagIsABadInput) {
  ScratchDir dir;
  const std::string model = WriteModel(dir);
  for (const char* flag : {"batch", "batch=x", "batch=-1", "batch=2,batch=3", "=4"}) {
    CommandResult r = RunTilefuse("run " + Quote(model) + " --backend cpu --shape " + Quote(flag));
    EXPECT_EQ(r.exit_code, 2) << flag << r.out << r.err;
    EXPECT_NE(r.err.find("--shape"), std::string::npos) << flag << ": " << r.err;
  }
}

}  // namespace
}  // namespace tilefuse
