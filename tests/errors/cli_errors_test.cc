// Bad input never crashes the CLI: each case exits 2 and prints "error: ..." on stderr
// with a message that names the cause (the file, the node, the op, the input).
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <random>

#include "e2e/cli_test_util.h"
#include "frontend/onnx/importer.h"

namespace tilefuse {
namespace {

namespace fs = std::filesystem;
using testing_cli::CommandResult;
using testing_cli::Quote;
using testing_cli::RunTilefuse;
using testing_cli::ScratchDir;

// A model with a 64x64 initializer, so its binary form is big enough to cut in half.
constexpr const char* kWeightedModel = R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
weighted (float[2,3] x, float[2,3] y) => (float[2,3] z)
{
  z = Add (x, y)
}
)ONNX";

onnx::ModelProto ModelWithInitializer() {
  onnx::ModelProto model = testing_cli::ParseOnnxText(kWeightedModel);
  onnx::TensorProto* w = model.mutable_graph()->add_initializer();
  w->set_name("unused_weight");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(64);
  w->add_dims(64);
  for (int i = 0; i < 64 * 64; ++i) w->add_float_data(static_cast<float>(i));
  return model;
}

// Checks exit code 2, an "error: " line on stderr holding every one of `words`.
void ExpectBadInput(const CommandResult& r, const std::vector<std::string>& words) {
  EXPECT_EQ(r.exit_code, 2) << "stdout: " << r.out << "\nstderr: " << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  for (const std::string& word : words) EXPECT_NE(r.err.find(word), std::string::npos) << word << " in: " << r.err;
}

TEST(CliErrors, NonexistentModel) {
  ExpectBadInput(RunTilefuse("run /nonexistent/model.onnx"), {"/nonexistent/model.onnx", "does not exist"});
}

TEST(CliErrors, DeviceOrdinalTheMachineLacksExitsTwoNamingTheCount) {
  const std::string model = Quote(std::string(TILEFUSE_SOURCE_DIR) + "/examples/softmax_manual.onnxtxt");
  // On this machine "... has 0 usable CUDA GPUs: no CUDA driver ..."; on a GPU machine "... has N CUDA GPU(s)".
  for (const std::string& command : {"run " + model + " --device 4096", "run " + model + " --backend cuda --device 4096",
                                     "bench " + model + " --backend cuda --device 4096", std::string("demo --device 4096")})
    ExpectBadInput(RunTilefuse(command), {"there is no GPU 4096: this machine has ", "CUDA GPU"});
  ExpectBadInput(RunTilefuse("run " + model + " --backend cpu --device 1"), {"device 1 names a GPU", "runs on the host"});
  ExpectBadInput(RunTilefuse("bench " + model + " --device 1"), {"device 1 names a GPU", "runs on the host"});
  for (const char* command : {"run", "bench", "demo"}) {
    CommandResult help = RunTilefuse(std::string(command) + " --help");
    EXPECT_NE(help.out.find("--device"), std::string::npos) << command << ": " << help.out;
  }
}

TEST(CliErrors, MalformedProtobuf) {
  ScratchDir dir;
  std::mt19937 rng(1);
  std::string junk(4096, '\0');
  for (char& c : junk) c = static_cast<char>(rng());
  testing_cli::WriteFile(dir / "junk.onnx", junk);
  ExpectBadInput(RunTilefuse("run " + Quote(dir / "junk.onnx")), {"junk.onnx", "not a valid ONNX model"});
}

TEST(CliErrors, TruncatedModel) {
  ScratchDir dir;
  std::string bytes;
  ModelWithInitializer().SerializeToString(&bytes);
  testing_cli::WriteFile(dir / "whole.onnx", bytes);
  ASSERT_EQ(RunTilefuse("run " + Quote(dir / "whole.onnx")).exit_code, 0) << "the uncut model must run";
  testing_cli::WriteFile(dir / "half.onnx", bytes.substr(0, bytes.size() / 2));
  ExpectBadInput(RunTilefuse("run " + Quote(dir / "half.onnx")), {"half.onnx", "not a valid ONNX model"});
}

TEST(CliErrors, EmptyFile) {
  ScratchDir dir;
  testing_cli::WriteFile(dir / "empty.onnx", "");
  ExpectBadInput(RunTilefuse("run " + Quote(dir / "empty.onnx")), {"empty.onnx"});
}

TEST(CliErrors, TextSyntaxError) {
  ScratchDir dir;
  testing_cli::WriteFile(dir / "broken.onnxtxt", "<ir_version: 8, opset_import: [\"\" : 17]>\nbroken (float[2] x) => (");
  ExpectBadInput(RunTilefuse("run " + Quote(dir / "broken.onnxtxt")), {"broken.onnxtxt"});
}

constexpr const char* kUnknownOpModel = R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
mystery (float[2] x) => (float[2] y)
{
  h = Relu (x)
  y = Foo (h)
}
)ONNX";

TEST(CliErrors, UnknownOpNamesNodeOpAndOpset) {
  ScratchDir dir;
  testing_cli::WriteFile(dir / "mystery.onnxtxt", kUnknownOpModel);
  CommandResult r = RunTilefuse("run " + Quote(dir / "mystery.onnxtxt"));
  // The parser names an unnamed node after its first output, here 'y'.
  ExpectBadInput(r, {"unsupported", "Foo", "opset 17", "y"});
}

TEST(CliErrors, UnknownOpWithJsonStillReportsTheError) {
  ScratchDir dir;
  testing_cli::WriteFile(dir / "mystery.onnxtxt", kUnknownOpModel);
  CommandResult r = RunTilefuse("run " + Quote(dir / "mystery.onnxtxt") + " --check --json");
  ExpectBadInput(r, {"Foo"});
  EXPECT_NE(r.out.find("\"status\": \"error\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"code\": \"unsupported\""), std::string::npos) << r.out;
}

// --inputs folders for the two-input model x, y: f32[2,3].
class CliBadInputsTest : public testing::Test {
 protected:
  void SetUp() override {
    testing_cli::WriteFile(dir_ / "model.onnxtxt", kWeightedModel);
    fs::create_directories(dir_ / "in");
  }
  void Save(const Tensor& t, const std::string& file) {
    ASSERT_TRUE(SaveTensorProtoFile(t, "t", dir_ / ("in/" + file)).ok());
  }
  CommandResult Run() { return RunTilefuse("run " + Quote(dir_ / "model.onnxtxt") + " --inputs " + Quote(dir_ / "in")); }
  ScratchDir dir_;
};

TEST_F(CliBadInputsTest, GoodInputsRun) {
  Save(Tensor(DType::kF32, {2, 3}), "input_0.pb");
  Save(Tensor(DType::kF32, {2, 3}), "input_1.pb");
  EXPECT_EQ(Run().exit_code, 0);
}

TEST_F(CliBadInputsTest, WrongInputCount) {
  Save(Tensor(DType::kF32, {2, 3}), "input_0.pb");
  ExpectBadInput(Run(), {"2 input(s)", "provides 1"});
}

TEST_F(CliBadInputsTest, WrongInputShape) {
  Save(Tensor(DType::kF32, {2, 3}), "input_0.pb");
  Save(Tensor(DType::kF32, {3, 3}), "input_1.pb");
  ExpectBadInput(Run(), {"input 1 'y'", "expects f32[2,3]", "f32[3,3]"});
}

TEST_F(CliBadInputsTest, WrongInputDtype) {
  Save(Tensor(DType::kI64, {2, 3}), "input_0.pb");
  Save(Tensor(DType::kF32, {2, 3}), "input_1.pb");
  ExpectBadInput(Run(), {"input 0 'x'", "expects f32[2,3]", "i64[2,3]"});
}

TEST_F(CliBadInputsTest, CorruptTensorFile) {
  Save(Tensor(DType::kF32, {2, 3}), "input_0.pb");
  testing_cli::WriteFile(dir_ / "in/input_1.pb", std::string("\xff\xff\xff\xff garbage", 12));
  ExpectBadInput(Run(), {"input_1.pb"});
}

TEST_F(CliBadInputsTest, MissingInputsFolder) {
  CommandResult r = RunTilefuse("run " + Quote(dir_ / "model.onnxtxt") + " --inputs " + Quote(dir_ / "nowhere"));
  ExpectBadInput(r, {"nowhere", "does not exist"});
}

// The initializer of ModelWithInitializer() moved to DIR/weights.bin; `weight_bytes` is
// what that file holds (64 * 64 floats are 16384 bytes; nullopt: no file at all).
void WriteExternalDataModel(const ScratchDir& dir, std::optional<size_t> weight_bytes) {
  onnx::ModelProto model = ModelWithInitializer();
  onnx::TensorProto* w = model.mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  onnx::StringStringEntryProto* location = w->add_external_data();
  location->set_key("location");
  location->set_value("weights.bin");
  testing_cli::WriteBinaryModel(model, dir / "external.onnx");
  if (weight_bytes) testing_cli::WriteFile(dir / "weights.bin", std::string(*weight_bytes, '\0'));
}

TEST(CliErrors, ExternalDataIsFoundBesideTheModel) {
  ScratchDir dir;
  WriteExternalDataModel(dir, 64 * 64 * 4);
  CommandResult r = RunTilefuse("run " + Quote(dir / "external.onnx"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(CliErrors, MissingExternalData) {
  ScratchDir dir;
  WriteExternalDataModel(dir, std::nullopt);
  ExpectBadInput(RunTilefuse("run " + Quote(dir / "external.onnx")), {"unused_weight", "weights.bin", "does not exist"});
}

TEST(CliErrors, TruncatedExternalData) {
  ScratchDir dir;
  WriteExternalDataModel(dir, 100);
  ExpectBadInput(RunTilefuse("run " + Quote(dir / "external.onnx")), {"unused_weight", "100 bytes"});
}

TEST(CliErrors, BadUsage) {
  std::string model = std::string(TILEFUSE_SOURCE_DIR) + "/examples/rmsnorm.onnxtxt";
  ExpectBadInput(RunTilefuse(""), {"subcommand"});
  ExpectBadInput(RunTilefuse("frobnicate"), {});
  ExpectBadInput(RunTilefuse("run"), {"MODEL"});
  ExpectBadInput(RunTilefuse("run " + Quote(model) + " --no-such-option"), {"--no-such-option"});
  ExpectBadInput(RunTilefuse("run " + Quote(model) + " --inputs /tmp --random 3"), {"excludes"});
  ExpectBadInput(RunTilefuse("run " + Quote(model) + " --random minus-one"), {"--random"});
  ExpectBadInput(RunTilefuse("run " + Quote(model) + " --backend tpu"), {"--backend"});
  ExpectBadInput(RunTilefuse("print " + Quote(model) + " --dump-dir /tmp/x"), {"--passes"});
}

// Asked for explicitly, the GPU backend runs where there is one and is a clear error (exit 2,
// naming the missing driver) where there is none; auto falls back to the CPU with a note.
TEST(CliErrors, CudaBackendWithoutDriverIsAClearError) {
  std::string model = std::string(TILEFUSE_SOURCE_DIR) + "/examples/rmsnorm.onnxtxt";
  CommandResult cuda = RunTilefuse("run " + Quote(model) + " --backend cuda");
  if (cuda.exit_code == 0) GTEST_SKIP() << "this machine has a GPU: the cuda backend ran";
  ExpectBadInput(cuda, {"CUDA driver"});
  CommandResult fallback = RunTilefuse("run " + Quote(model));
  EXPECT_EQ(fallback.exit_code, 0) << fallback.err;
  EXPECT_NE(fallback.out.find("backend: cpu"), std::string::npos) << fallback.out;
  EXPECT_NE(fallback.out.find("cuda backend unavailable"), std::string::npos) << fallback.out;
}

TEST(CliErrors, FailingModelLeavesNoDumpBehind) {
  ScratchDir dir;
  testing_cli::WriteFile(dir / "mystery.onnxtxt", kUnknownOpModel);
  std::string dumps = dir / "dumps";
  ExpectBadInput(RunTilefuse("run " + Quote(dir / "mystery.onnxtxt") + " --dump-dir " + Quote(dumps)), {"Foo"});
  EXPECT_FALSE(fs::exists(dumps));
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename().string().find("partial"), std::string::npos) << entry.path();
  }
}

TEST(CliErrors, FailingRunAfterPassesPublishesOnlyCompleteDumps) {
  // The model imports and passes, then the inputs are wrong: the dumps that exist are whole.
  ScratchDir dir;
  testing_cli::WriteFile(dir / "model.onnxtxt", kWeightedModel);
  fs::create_directories(dir / "in");
  ASSERT_TRUE(SaveTensorProtoFile(Tensor(DType::kF32, {9}), "x", dir / "in/input_0.pb").ok());
  std::string dumps = dir / "dumps";
  CommandResult r = RunTilefuse("run " + Quote(dir / "model.onnxtxt") + " --inputs " + Quote(dir / "in") +
                                " --dump-dir " + Quote(dumps));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  if (fs::exists(dumps)) {
    for (const auto& entry : fs::directory_iterator(dumps)) {
      std::string text = testing_cli::ReadFile(entry.path().string());
      EXPECT_FALSE(text.empty()) << entry.path();
      EXPECT_EQ(text.back(), '\n') << entry.path() << " ends mid-line";
    }
  }
}

}  // namespace
}  // namespace tilefuse
