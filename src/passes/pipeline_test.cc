#include "passes/pipeline.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <unistd.h>

#include "ir/printer.h"
#include "passes/pass_test_util.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

using pass_testing::CountKind;
using pass_testing::CountOps;

// y = layer_norm(softmax(x) + (2 + 3) + unused duplicates), a graph with something
// for every pass to do.
Graph BuildModel() {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {4, 8});
  Value scale = b.Parameter("scale", DType::kF32, {8});
  Value five = b.Add(b.Scalar(2, DType::kF32), b.Scalar(3, DType::kF32));
  Value s1 = b.Softmax(x, -1);
  Value s2 = b.Softmax(x, -1);
  Value dead = b.Unary(OpCode::kExp, s2);
  (void)dead;
  Value shifted = b.Add(b.Add(s1, s2), five);
  b.SetLocation("", "ln");
  b.Output(b.LayerNorm(shifted, scale, Value{}, 1, 1e-5), "y");
  return std::move(b.Build()).value();
}

TEST(PipelineTest, ProducesPrimitivesOnly) {
  auto result = RunGraphPasses(BuildModel(), {});
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(CountKind(*result, OpKind::Composite), 0);
  EXPECT_EQ(CountOps(*result, OpCode::kExp), 1);        // the two softmaxes merged, dead exp gone
  EXPECT_EQ(CountOps(*result, OpCode::kReduceMax), 1);
  EXPECT_EQ(CountOps(*result, OpCode::kReduceMean), 2);  // layer_norm's mean and variance
  EXPECT_EQ(result->inputs().size(), 2u);
}

TEST(PipelineTest, KeepsCompositesWhenAskedTo) {
  PassOptions options;
  options.decompose = false;
  auto result = RunGraphPasses(BuildModel(), options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(CountOps(*result, OpCode::kSoftmax), 1);
  EXPECT_EQ(CountOps(*result, OpCode::kLayerNorm), 1);
}

TEST(PipelineTest, IsIdempotent) {
  auto once = RunGraphPasses(BuildModel(), {});
  ASSERT_TRUE(once.ok()) << once.status().ToString();
  std::string first = PrintGraph(*once);
  auto twice = RunGraphPasses(std::move(once).value(), {});
  ASSERT_TRUE(twice.ok()) << twice.status().ToString();
  EXPECT_EQ(PrintGraph(*twice), first);
}

TEST(PipelineTest, DumpsOneFilePerPass) {
  auto dir = std::filesystem::temp_directory_path() / ("tilefuse_pipeline_dump_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  PassOptions options;
  options.dump_dir = (dir / "nested").string();  // created by the pipeline
  auto result = RunGraphPasses(BuildModel(), options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();

  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(options.dump_dir))
    files.push_back(entry.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"00-verify.txt", "01-infer.txt", "02-fold-constants.txt", "03-cse.txt",
                                             "04-dce.txt", "05-decompose.txt", "06-outer-products.txt", "07-attention-grads.txt",
                                             "08-window-ops.txt", "09-fold-constants.txt", "10-cse.txt", "11-dce.txt",
                                             "12-unshare-reshapes.txt", "13-dce.txt", "14-verify.txt"}));
  std::ifstream last(std::filesystem::path(options.dump_dir) / "14-verify.txt");
  std::string text((std::istreambuf_iterator<char>(last)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, PrintGraph(*result));
  std::ifstream decomposed(std::filesystem::path(options.dump_dir) / "05-decompose.txt");
  std::string decomposed_text((std::istreambuf_iterator<char>(decomposed)), std::istreambuf_iterator<char>());
  EXPECT_NE(decomposed_text.find("reduce_max"), std::string::npos);
  EXPECT_EQ(decomposed_text.find("softmax"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(PipelineTest, AnUnwritableDumpDirIsAnError) {
  auto file = std::filesystem::temp_directory_path() / ("tilefuse_pipeline_file_" + std::to_string(getpid()));
  std::ofstream(file) << "not a directory";
  PassOptions options;
  options.dump_dir = (file / "dumps").string();
  auto result = RunGraphPasses(BuildModel(), options);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("dump"), std::string::npos) << result.status().ToString();
  std::filesystem::remove(file);
}

TEST(PipelineTest, RejectsAnInvalidGraphAtTheStart) {
  Graph graph;
  Node x;
  x.op = OpCode::kParameter;
  x.name = "x";
  x.attrs.shape = {2};
  x.attrs.to = DType::kF32;
  x.shape = {3};  // declared wrong
  graph.AddOutput(graph.AddNode(x), "y");
  auto result = RunGraphPasses(std::move(graph), {});
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("verify"), std::string::npos) << result.status().ToString();
}

}  // namespace
}  // namespace tilefuse
