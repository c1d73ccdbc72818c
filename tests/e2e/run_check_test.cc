// `tilefuse run --check` on backend-test folders written here: matching expected
// outputs pass (exit 0), wrong ones fail (exit 1), tolerances and NaN follow the
// documented rules. Expected values are worked out by hand in the comments.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "e2e/cli_test_util.h"
#include "frontend/onnx/importer.h"

namespace tilefuse {
namespace {

using testing_cli::CommandResult;
using testing_cli::Quote;
using testing_cli::RunTilefuse;
using testing_cli::ScratchDir;

// y = a * b + a, row_sum = sum of y over the last axis.
constexpr const char* kAxpyModel = R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
axpy (float[2,3] a, float[2,3] b) => (float[2,3] y, float[2] row_sum)
{
  axes = Constant <value = int64[1] {1}> ()
  prod = Mul (a, b)
  y = Add (prod, a)
  row_sum = ReduceSum <keepdims = 0> (y, axes)
}
)ONNX";

const std::vector<double> kA = {1, 2, 3, 4, 5, 6};
const std::vector<double> kB = {0.5, -1, 2, 0, 1, -2};
// a*b = [0.5, -2, 6, 0, 5, -12]; y = [1.5, 0, 9, 4, 10, -6]; row sums 10.5 and 8.
const std::vector<double> kY = {1.5, 0, 9, 4, 10, -6};
const std::vector<double> kRowSum = {10.5, 8};

void Save(const Tensor& t, const std::string& name, const std::string& path) {
  ASSERT_TRUE(SaveTensorProtoFile(t, name, path).ok()) << path;
}

// Writes DIR/model.onnx and DIR/test_data_set_0 with the given expected y.
void WriteAxpyFolder(const std::string& dir, const std::vector<double>& expected_y,
                     const Shape& y_shape = {2, 3}) {
  testing_cli::WriteBinaryModel(testing_cli::ParseOnnxText(kAxpyModel), dir + "/model.onnx");
  std::string data = dir + "/test_data_set_0";
  std::filesystem::create_directories(data);
  Save(Tensor::FromDoubles(DType::kF32, {2, 3}, kA), "a", data + "/input_0.pb");
  Save(Tensor::FromDoubles(DType::kF32, {2, 3}, kB), "b", data + "/input_1.pb");
  Save(Tensor::FromDoubles(DType::kF32, y_shape, expected_y), "y", data + "/output_0.pb");
  Save(Tensor::FromDoubles(DType::kF32, {2}, kRowSum), "row_sum", data + "/output_1.pb");
}

nlohmann::json ParseJson(const CommandResult& r) {
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j;
}

TEST(CliRunCheck, MatchingExpectedOutputsPass) {
  ScratchDir dir;
  WriteAxpyFolder(dir.path(), kY);
  CommandResult r = RunTilefuse("run " + Quote(dir.path()) + " --check");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("output 'y'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("output 'row_sum'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("result: PASS"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");
}

TEST(CliRunCheck, WrongExpectedOutputFailsWithExit1) {
  ScratchDir dir;
  std::vector<double> wrong = kY;
  wrong[2] = 9.25;  // off by 0.25, far outside rtol 1e-3
  WriteAxpyFolder(dir.path(), wrong);
  CommandResult text = RunTilefuse("run " + Quote(dir.path()) + " --check");
  EXPECT_EQ(text.exit_code, 1) << text.out << text.err;
  EXPECT_NE(text.out.find("FAIL"), std::string::npos) << text.out;

  CommandResult r = RunTilefuse("run " + Quote(dir.path()) + " --check --json");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  nlohmann::json j = ParseJson(r);
  EXPECT_EQ(j["status"], "fail");
  EXPECT_EQ(j["check"], "expected_outputs");
  ASSERT_EQ(j["outputs"].size(), 2u);
  EXPECT_EQ(j["outputs"][0]["name"], "y");
  EXPECT_EQ(j["outputs"][0]["pass"], false);
  EXPECT_EQ(j["outputs"][0]["mismatches"], 1);
  EXPECT_NEAR(j["outputs"][0]["max_abs_err"].get<double>(), 0.25, 1e-6);
  EXPECT_NEAR(j["outputs"][0]["max_rel_err"].get<double>(), 0.25 / 9.25, 1e-6);
  EXPECT_EQ(j["outputs"][1]["pass"], true);
  EXPECT_EQ(j["outputs"][1]["dtype"], "f32");
  EXPECT_EQ(j["outputs"][1]["shape"], nlohmann::json::array({2}));
}

TEST(CliRunCheck, NodeRuleF32ToleranceIsRelativeOneInAThousand) {
  // Expected 9 * (1 + 5e-4): |9 - e| = 4.5e-3 <= 1e-7 + 1e-3 * e  -> pass.
  ScratchDir close;
  std::vector<double> y = kY;
  y[2] = 9 * (1 + 5e-4);
  WriteAxpyFolder(close.path(), y);
  CommandResult pass = RunTilefuse("run " + Quote(close.path()) + " --check --check-rule node");
  EXPECT_EQ(pass.exit_code, 0) << pass.out;
  EXPECT_NE(pass.out.find("node-test rule"), std::string::npos) << pass.out;
  // Expected 9 * (1 + 2e-3): |9 - e| = 1.8e-2 > 1e-3 * e  -> fail.
  ScratchDir far;
  y[2] = 9 * (1 + 2e-3);
  WriteAxpyFolder(far.path(), y);
  EXPECT_EQ(RunTilefuse("run " + Quote(far.path()) + " --check --check-rule node").exit_code, 1);
}

// A model's expected outputs (not a node test's) are held to each output's scale: y's
// largest |value| is 10, so y[1] = 0 may be off by 1e-4 * 10 = 1e-3 (the node rule's
// atol 1e-7 would fail it), but not by 5e-2.
TEST(CliRunCheck, ModelRuleHoldsEachOutputToItsScale) {
  ScratchDir close;
  std::vector<double> y = kY;
  y[1] = 5e-4;
  WriteAxpyFolder(close.path(), y);
  CommandResult pass = RunTilefuse("run " + Quote(close.path()) + " --check");
  EXPECT_EQ(pass.exit_code, 0) << pass.out;
  EXPECT_NE(pass.out.find("whole-model rule"), std::string::npos) << pass.out;
  EXPECT_NE(pass.out.find("worst element 1: 0 where 0.0005"), std::string::npos) << pass.out;
  EXPECT_EQ(RunTilefuse("run " + Quote(close.path()) + " --check --check-rule node").exit_code, 1);
  EXPECT_EQ(RunTilefuse("run " + Quote(close.path()) + " --check --rtol 1e-5").exit_code, 1) << "--rtol overrides the rule";
  ScratchDir far;
  y[1] = 5e-2;
  WriteAxpyFolder(far.path(), y);
  EXPECT_EQ(RunTilefuse("run " + Quote(far.path()) + " --check").exit_code, 1);
}

// A real exported model (expected outputs from onnxruntime) passes the whole-model rule on
// the CPU backend, and one output element moved by 1e-3 of the output's scale (far less
// than a miscompiled kernel moves it) fails it.
TEST(CliRunCheck, ModelRuleCatchesOneWrongElementOfARealModel) {
  const std::string model = std::string(TILEFUSE_SOURCE_DIR) + "/tests/models/gpt2_2layer";
  CommandResult good = RunTilefuse("run " + Quote(model) + " --backend cpu --check");
  EXPECT_EQ(good.exit_code, 0) << good.out << good.err;
  ScratchDir copy;
  std::filesystem::copy(model, copy.path(), std::filesystem::copy_options::recursive);
  const std::string out_pb = copy.path() + "/test_data_set_0/output_0.pb";
  StatusOr<Tensor> expected = LoadTensorProtoFile(out_pb);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  double scale = 0;
  for (int64_t i = 0; i < expected->num_elements(); ++i) scale = std::max(scale, std::fabs(expected->GetDouble(i)));
  Tensor wrong = *expected;
  wrong.SetDouble(7, wrong.GetDouble(7) + 1e-3 * scale);
  Save(wrong, "output", out_pb);
  CommandResult bad = RunTilefuse("run " + Quote(copy.path()) + " --backend cpu --check");
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  EXPECT_NE(bad.out.find("worst element 7"), std::string::npos) << bad.out;
}

TEST(CliRunCheck, ShapeMismatchIsAFailure) {
  ScratchDir dir;
  WriteAxpyFolder(dir.path(), kY, /*y_shape=*/{3, 2});
  CommandResult r = RunTilefuse("run " + Quote(dir.path()) + " --check");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("got f32[2,3] but expected f32[3,2]"), std::string::npos) << r.out;
}

// sqrt of [-1, 4] is [NaN, 2].
constexpr const char* kSqrtModel = R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
root (float[2] x) => (float[2] y)
{
  y = Sqrt (x)
}
)ONNX";

int RunSqrtWithExpected(const std::vector<double>& expected) {
  ScratchDir dir;
  testing_cli::WriteBinaryModel(testing_cli::ParseOnnxText(kSqrtModel), dir / "model.onnx");
  std::string data = dir / "test_data_set_0";
  std::filesystem::create_directories(data);
  Save(Tensor::FromDoubles(DType::kF32, {2}, {-1, 4}), "x", data + "/input_0.pb");
  Save(Tensor::FromDoubles(DType::kF32, {2}, expected), "y", data + "/output_0.pb");
  return RunTilefuse("run " + Quote(dir.path()) + " --check").exit_code;
}

TEST(CliRunCheck, NanMatchesOnlyNanInTheSamePlace) {
  EXPECT_EQ(RunSqrtWithExpected({NAN, 2}), 0);
  EXPECT_EQ(RunSqrtWithExpected({0, 2}), 1);    // NaN where 0 is expected
  EXPECT_EQ(RunSqrtWithExpected({NAN, NAN}), 1);  // 2 where NaN is expected
}

TEST(CliRunCheck, InputsFolderWithExpectedOutputs) {
  ScratchDir dir;
  WriteAxpyFolder(dir.path(), kY);
  std::string model = dir / "model.onnx";
  std::string data = dir / "test_data_set_0";
  CommandResult r = RunTilefuse("run " + Quote(model) + " --inputs " + Quote(data) + " --check --json");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json j = ParseJson(r);
  EXPECT_EQ(j["status"], "pass");
  EXPECT_EQ(j["inputs"], data);
}

TEST(CliRunCheck, WithoutExpectedOutputsComparesWithTheGraphBeforePasses) {
  std::string model = std::string(TILEFUSE_SOURCE_DIR) + "/examples/layernorm_composite.onnxtxt";
  CommandResult r = RunTilefuse("run " + Quote(model) + " --check --json");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json j = ParseJson(r);
  EXPECT_EQ(j["check"], "reference_before_passes");
  EXPECT_EQ(j["status"], "pass");
  EXPECT_EQ(j["inputs"], "random (seed 0)");
}

// A check against the reference that fails says whether the reference itself, rounded as
// other correct kernels may (reference/conditioning.h), fails it too: held to 1e-9, an f32
// softmax is off, and so is every legitimate f32 computation of it — the check is
// ill-conditioned for that tolerance. A passing check probes nothing.
TEST(CliRunCheck, AFailedCheckSaysWhetherLegitimateRoundingFailsItToo) {
  std::string model = std::string(TILEFUSE_SOURCE_DIR) + "/examples/softmax_manual.onnxtxt";
  CommandResult strict = RunTilefuse("run " + Quote(model) + " --backend cpu --check --rtol 1e-9 --atol 0 --json");
  EXPECT_EQ(strict.exit_code, 1) << strict.out << strict.err;
  nlohmann::json j = ParseJson(strict);
  ASSERT_EQ(j["outputs"].size(), 1u) << strict.out;
  const nlohmann::json& out = j["outputs"][0];
  EXPECT_FALSE(out["pass"].get<bool>());
  EXPECT_GT(out["sensitivity_ratio"].get<double>(), 1) << out.dump();
  EXPECT_TRUE(out["explained_by_conditioning"].get<bool>()) << out.dump();
  EXPECT_NE(out["conditioning"].get<std::string>().find("every rounded intermediate by up to 1 ulp"), std::string::npos);
  CommandResult text = RunTilefuse("run " + Quote(model) + " --backend cpu --check --rtol 1e-9 --atol 0");
  EXPECT_NE(text.out.find("cannot tell a correct kernel from a wrong one"), std::string::npos) << text.out;
  CommandResult normal = RunTilefuse("run " + Quote(model) + " --backend cpu --check --json");
  EXPECT_EQ(normal.exit_code, 0) << normal.out << normal.err;
  EXPECT_FALSE(ParseJson(normal)["outputs"][0].contains("sensitivity_ratio"));
}

// Backend tests feed axes as graph inputs; tilefuse binds them as constants at import.
constexpr const char* kAxesInputModel = R"ONNX(
<ir_version: 8, opset_import: ["" : 18]>
sum_rows (float[2,3] x, int64[1] axes) => (float[2] y)
{
  y = ReduceSum <keepdims = 0> (x, axes)
}
)ONNX";

TEST(CliRunCheck, IntegerInputsThatMustBeConstantAreBound) {
  ScratchDir dir;
  testing_cli::WriteBinaryModel(testing_cli::ParseOnnxText(kAxesInputModel), dir / "model.onnx");
  std::string data = dir / "test_data_set_0";
  std::filesystem::create_directories(data);
  Save(Tensor::FromDoubles(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6}), "x", data + "/input_0.pb");
  Save(Tensor::FromDoubles(DType::kI64, {1}, {1}), "axes", data + "/input_1.pb");
  Save(Tensor::FromDoubles(DType::kF32, {2}, {6, 15}), "y", data + "/output_0.pb");  // row sums
  CommandResult r = RunTilefuse("run " + Quote(dir.path()) + " --check --json");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json j = ParseJson(r);
  EXPECT_EQ(j["status"], "pass");
  EXPECT_EQ(j["bound_inputs"], nlohmann::json::array({"axes"}));

  // With random inputs there is nothing to bind: the model stays unsupported.
  CommandResult random = RunTilefuse("run " + Quote(dir.path()) + " --random 1");
  EXPECT_EQ(random.exit_code, 2) << random.out;
  EXPECT_NE(random.err.find("unsupported"), std::string::npos) << random.err;
}

TEST(CliRun, WithoutCheckSummarizesOutputs) {
  ScratchDir dir;
  WriteAxpyFolder(dir.path(), kY);
  CommandResult r = RunTilefuse("run " + Quote(dir.path()) + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json j = ParseJson(r);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_TRUE(j["check"].is_null());
  ASSERT_EQ(j["outputs"].size(), 2u);
  // y = [1.5, 0, 9, 4, 10, -6]: min -6, max 10, mean 18.5 / 6.
  EXPECT_DOUBLE_EQ(j["outputs"][0]["min"].get<double>(), -6);
  EXPECT_DOUBLE_EQ(j["outputs"][0]["max"].get<double>(), 10);
  EXPECT_NEAR(j["outputs"][0]["mean"].get<double>(), 18.5 / 6, 1e-12);
}

TEST(CliRun, RandomInputsAreDeterministicPerSeed) {
  std::string model = std::string(TILEFUSE_SOURCE_DIR) + "/examples/rmsnorm.onnxtxt";
  auto mean_for = [&](const std::string& seed) {
    CommandResult r = RunTilefuse("run " + Quote(model) + " --random " + seed + " --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return ParseJson(r)["outputs"][0]["mean"].get<double>();
  };
  EXPECT_EQ(mean_for("7"), mean_for("7"));
  EXPECT_NE(mean_for("7"), mean_for("8"));
}

TEST(CliRun, DumpDirHoldsTheIrAfterEveryPass) {
  ScratchDir dir;
  std::string dumps = dir / "dumps";
  std::string model = std::string(TILEFUSE_SOURCE_DIR) + "/examples/softmax_composite.onnxtxt";
  CommandResult r = RunTilefuse("run " + Quote(model) + " --dump-dir " + Quote(dumps));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dumps)) {
    EXPECT_GT(std::filesystem::file_size(entry.path()), 0u) << entry.path();
    ++files;
  }
  EXPECT_GE(files, 2);
  // The staging folder is gone once the dumps are published.
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".partial"), std::string::npos) << entry.path();
  }
}

}  // namespace
}  // namespace tilefuse
