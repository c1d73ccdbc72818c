// Scaling benchmark: import + verify + graph passes + reference run of generated ONNX
// graphs of 10k to 100k nodes. The per-node cost must stay flat (linear scaling).
//
//   build/tilefuse_bench_scaling [--max-nodes N]
//
// The graph is a chain of pointwise ops over a small tensor in which every fifth node
// also reads a value from 1..64 nodes back, so values stay live for a while and the
// passes see shared operands, not just a line.
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "reference/interpreter.h"
#include "frontend/onnx/importer.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"

namespace tilefuse {
namespace {

void AddValueInfo(onnx::ValueInfoProto* info, const std::string& name) {
  info->set_name(name);
  auto* tensor = info->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx::TensorProto::FLOAT);
  tensor->mutable_shape()->add_dim()->set_dim_value(16);
  tensor->mutable_shape()->add_dim()->set_dim_value(16);
}

std::string WriteChainModel(int num_nodes, const std::string& path) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto* graph = model.mutable_graph();
  graph->set_name("chain");
  AddValueInfo(graph->add_input(), "v0");
  const char* unary[] = {"Tanh", "Sigmoid", "Neg", "Abs"};
  const char* binary[] = {"Add", "Mul", "Sub", "Max"};
  for (int i = 1; i <= num_nodes; ++i) {
    onnx::NodeProto* node = graph->add_node();
    node->set_name(fmt::format("n{}", i));
    node->add_input(fmt::format("v{}", i - 1));
    if (i % 5 == 0) {
      node->set_op_type(binary[(i / 5) % 4]);
      node->add_input(fmt::format("v{}", std::max(0, i - 1 - (i * 7919) % 64)));
    } else {
      node->set_op_type(unary[i % 4]);
    }
    node->add_output(fmt::format("v{}", i));
  }
  AddValueInfo(graph->add_output(), fmt::format("v{}", num_nodes));
  std::ofstream out(path, std::ios::binary);
  model.SerializeToOstream(&out);
  return path;
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int Run(int max_nodes) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / fmt::format("tilefuse-scaling-{}", getpid());
  std::filesystem::create_directories(dir);
  fmt::print("{:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12}\n", "nodes", "import s", "verify s", "passes s",
             "run s", "total s", "us per node");
  for (int n : {10000, 25000, 50000, 100000}) {
    if (n > max_nodes) break;
    std::string path = WriteChainModel(n, (dir / fmt::format("chain{}.onnx", n)).string());
    auto t0 = std::chrono::steady_clock::now();
    auto model = ImportOnnx(path);
    double t_import = Seconds(t0);
    if (!model.ok()) return fmt::print(stderr, "error: {}\n", model.status().ToString()), 1;
    t0 = std::chrono::steady_clock::now();
    Status verified = VerifyGraph(model->graph);
    double t_verify = Seconds(t0);
    if (!verified.ok()) return fmt::print(stderr, "error: {}\n", verified.ToString()), 1;
    t0 = std::chrono::steady_clock::now();
    auto graph = RunGraphPasses(model->graph, PassOptions{});
    double t_passes = Seconds(t0);
    if (!graph.ok()) return fmt::print(stderr, "error: {}\n", graph.status().ToString()), 1;
    t0 = std::chrono::steady_clock::now();
    auto outputs = RunReference(*graph, {Tensor::Random(DType::kF32, {16, 16}, 1)});
    double t_run = Seconds(t0);
    if (!outputs.ok()) return fmt::print(stderr, "error: {}\n", outputs.status().ToString()), 1;
    double total = t_import + t_verify + t_passes + t_run;
    fmt::print("{:>8} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>10.3f} {:>12.2f}\n", n, t_import, t_verify,
               t_passes, t_run, total, total / n * 1e6);
  }
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace tilefuse

int main(int argc, char** argv) {
  int max_nodes = 100000;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--max-nodes") == 0) max_nodes = std::atoi(argv[i + 1]);
  return tilefuse::Run(max_nodes);
}
