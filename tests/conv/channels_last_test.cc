// The convolution cases and the convolution networks of the model zoo through the GPU's
// graph passes (channels-last forms, transposes sunk), checked without a GPU:
//   - the passed graph computes what the imported one does (both on the f64 reference
//     interpreter, Conv and the pools as the oracle kernels), random inputs;
//   - the CPU backend's generated kernels for the passed graph match it, outputs poisoned;
//   - layouts change only at the graph's edges: every NCHW↔NHWC transpose left reads a graph
//     input or a window, feeds windows or matmuls only, or is a graph output; and no group
//     of the GPU's plan stores a transposed copy of a value.
#include <gtest/gtest.h>

#include <filesystem>

#include <fmt/format.h>

#include "backend/cpu/cpu_executable.h"
#include "driver/driver.h"
#include "frontend/onnx/importer.h"
#include "passes/pipeline.h"
#include "reference/interpreter.h"
#include "testing/tensor_compare.h"

namespace tilefuse {
namespace {

std::vector<Tensor> RandomInputs(const Graph& graph) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Node& p = graph.node(graph.inputs()[i]);
    inputs.push_back(IsFloat(p.dtype) ? Tensor::Random(p.dtype, p.shape, 300 + i) : Tensor(p.dtype, p.shape));
  }
  return inputs;
}

void ExpectSameOutputs(const std::vector<Tensor>& actual, const std::vector<Tensor>& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    Comparison c = CompareModelOutput(actual[i], expected[i], ModelRtolFor(expected[i].dtype()));
    EXPECT_TRUE(c.pass) << what << ", output " << i << ": " << c.reason;
  }
}

bool IsWindowOrItsReshape(const Graph& g, int id) {
  const Node& n = g.node(id);
  return n.op == OpCode::kWindow || (n.op == OpCode::kReshape && g.node(n.inputs[0]).op == OpCode::kWindow);
}

bool MovesChannels(const std::vector<int64_t>& perm) {
  return perm == std::vector<int64_t>{0, 3, 1, 2} || perm == std::vector<int64_t>{0, 2, 3, 1};
}

// Transposes between NCHW and NHWC that are not at an edge: they move data between the two
// layouts inside the network. (Weights, attention heads and the im2col matrix's column
// order have transposes of their own; a matmul's operands are laid out as it contracts
// them: attention's Kᵀ, U-Net's bilinear upsampling as two matmuls over W then H.)
std::vector<int> InteriorLayoutChanges(const Graph& g) {
  std::vector<std::vector<int>> users = g.ComputeUsers();
  std::vector<bool> is_output(g.num_nodes(), false);
  for (const Graph::Output& o : g.outputs()) is_output[o.node] = true;
  std::vector<int> interior;
  for (const Node& n : g.nodes()) {
    if (n.op != OpCode::kTranspose || !MovesChannels(n.attrs.perm) || is_output[n.id]) continue;
    const Node& input = g.node(n.inputs[0]);
    if (input.op == OpCode::kParameter || input.op == OpCode::kConstant || IsWindowOrItsReshape(g, input.id)) continue;
    bool feeds_operands = std::all_of(users[n.id].begin(), users[n.id].end(), [&](int u) {
      return g.node(u).op == OpCode::kWindow || g.node(u).op == OpCode::kMatMul;
    });
    if (!feeds_operands) interior.push_back(n.id);
  }
  return interior;
}

// Groups that store a value moved between NCHW and NHWC (a layout transpose among their
// outputs, computed from another member) other than the graph's outputs: "%id in group g".
std::vector<std::string> GroupsStoringATransposedCopy(const Graph& g, const FusionPlan& plan) {
  std::vector<bool> is_output(g.num_nodes(), false);
  for (const Graph::Output& o : g.outputs()) is_output[o.node] = true;
  std::vector<std::string> found;
  for (const FusionGroup& group : plan.groups)
    for (int id : group.outputs) {
      const Node& n = g.node(id);
      // (The padded NHWC copy of an image's few channels, passes/stage_conv_inputs, transposes
      // the padding's window of its input: views, nothing the group computes.)
      if (n.op == OpCode::kTranspose && MovesChannels(n.attrs.perm) && !is_output[id] &&
          plan.group_of[n.inputs[0]] == group.id && !IsWindowOrItsReshape(g, n.inputs[0]))
        found.push_back(fmt::format("%{} in group {}", id, group.id));
    }
  return found;
}

class ChannelsLastModelTest : public testing::TestWithParam<std::string> {};

TEST_P(ChannelsLastModelTest, MatchesTheImportedGraphOnTheReferenceAndTheCpu) {
  auto model = ImportOnnx(GetParam());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const Graph imported = model->graph;
  PassOptions passes;
  passes.channels_last = true;  // as the CUDA backend's graphs are passed
  auto passed = RunGraphPasses(std::move(model->graph), passes);
  ASSERT_TRUE(passed.ok()) << passed.status().ToString();
  EXPECT_EQ(InteriorLayoutChanges(*passed), std::vector<int>{}) << "transposes between the network's layers";
  // Nor does the GPU's plan store one: a transpose only windows read joins their gemm
  // prologues, not the group writing its input.
  auto plan = PlanForDevice(*passed, PlannerOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(GroupsStoringATransposedCopy(*passed, *plan), std::vector<std::string>{});

  std::vector<Tensor> inputs = RandomInputs(imported);
  auto expected = RunReference(imported, inputs);
  auto rewritten = RunReference(*passed, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  ExpectSameOutputs(*rewritten, *expected, "reference, channels-last graph");

  CpuCompileOptions options;
  options.poison_outputs = true;
  options.cache_dir = (std::filesystem::temp_directory_path() / "tilefuse_test_cache").string();
  auto compiled = CompileForCpu(*passed, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  auto actual = (*compiled)->Run(inputs);
  ASSERT_TRUE(actual.ok()) << actual.status().ToString();
  ExpectSameOutputs(*actual, *rewritten, "cpu kernels, channels-last graph");
}

std::vector<std::string> ConvModels() {
  std::vector<std::string> paths;
  const std::string root = TILEFUSE_SOURCE_DIR;
  for (const auto& e : std::filesystem::directory_iterator(root + "/tests/conv"))
    if (e.path().extension() == ".onnxtxt") paths.push_back(e.path().string());
  for (const char* m : {"resnet_tiny", "resnet_tiny_dynamo", "mobilenetv3_block", "mobilenetv3_block_dynamo", "unet_tiny",
                        "unet_convtranspose", "vit_tiny"})
    paths.push_back(root + "/tests/models/" + m);
  std::sort(paths.begin(), paths.end());
  return paths;
}

INSTANTIATE_TEST_SUITE_P(Models, ChannelsLastModelTest, testing::ValuesIn(ConvModels()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return std::filesystem::path(info.param).stem().string();
                         });

}  // namespace
}  // namespace tilefuse
