// The generated CPU kernels of a model timed alone, fused and unfused: every group
// lowered (LowerGroup), printed (EmitCppFunction) and compiled in one translation unit,
// then called in plan order on buffers allocated and touched once. `tilefuse bench`
// times CpuExecutable::Run, which also allocates, zero-fills and frees the graph
// outputs each run; at sizes beyond the last-level cache on this VM that costs more than
// the kernels, so kernel work is measured here apart from it.
//
//   build/tilefuse_bench_cpu_kernels bench/cpu_cases/*.onnxtxt [--repeats N] [--json]
//
// A model with a group no loop kernel expresses (gemm, attention, opaque) is reported
// as skipped, with the reason.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

#include "backend/cpu/host_jit.h"
#include "codegen/cpp/cpp_emitter.h"
#include "codegen/lower.h"
#include "frontend/onnx/importer.h"
#include "fusion/group_classifier.h"
#include "fusion/planner.h"
#include "passes/pipeline.h"

namespace tilefuse {
namespace {

using KernelFunction = void(void* const*);

struct LoadedPlan {
  std::shared_ptr<const JitLibrary> library;  // keeps the functions loaded
  std::vector<KernelFunction*> functions;      // in plan order
  std::vector<std::vector<int>> buffer_nodes;  // per kernel, in Kernel::buffers order
};

StatusOr<LoadedPlan> CompilePlan(const Graph& graph, bool fuse, HostJit& jit) {
  PlannerOptions options;
  options.device = "cpu";
  options.fuse = fuse;
  ASSIGN_OR_RETURN(FusionPlan plan, PlanFusion(graph, options));
  std::vector<bool> inlined = FindInlinedGenerators(graph);
  std::string source = CppPrelude();
  std::vector<std::string> names;
  LoadedPlan loaded;
  for (const FusionGroup& group : plan.groups) {
    StatusOr<Kernel> kernel = LowerGroup(graph, group, inlined);
    if (!kernel.ok())
      return Unimplemented(fmt::format("group {} ({}): {}", group.id, GroupKindName(group.kind), kernel.status().message()));
    source += EmitCppFunction(*kernel);
    names.push_back(kernel->name);
    std::vector<int> nodes;
    for (const KernelBuffer& b : kernel->buffers) nodes.push_back(b.node);
    loaded.buffer_nodes.push_back(std::move(nodes));
  }
  ASSIGN_OR_RETURN(loaded.library, jit.Compile(source));
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(KernelFunction * f, loaded.library->Function<KernelFunction>(name));
    loaded.functions.push_back(f);
  }
  return loaded;
}

// One buffer per node a kernel touches: graph inputs random, constants their value,
// the rest zero. All written once here, so timed runs take no page faults.
class NodeBuffers {
 public:
  explicit NodeBuffers(const Graph& graph) : graph_(graph) {
    for (size_t i = 0; i < graph.inputs().size(); ++i) {
      const Node& p = graph.node(graph.inputs()[i]);
      tensors_[p.id] = Tensor::Random(p.dtype, p.shape, 1000 + i);
    }
  }
  void* Address(int node) {
    auto it = tensors_.find(node);
    if (it == tensors_.end()) {
      const Node& n = graph_.node(node);
      Tensor t = n.op == OpCode::kConstant ? *n.attrs.value : Tensor(n.dtype, n.shape);
      it = tensors_.emplace(node, std::move(t)).first;
    }
    return it->second.data();
  }

 private:
  const Graph& graph_;
  std::map<int, Tensor> tensors_;
};

double MedianMs(LoadedPlan& plan, NodeBuffers& memory, int repeats) {
  std::vector<std::vector<void*>> arguments;
  for (const std::vector<int>& nodes : plan.buffer_nodes) {
    arguments.emplace_back();
    for (int node : nodes) arguments.back().push_back(memory.Address(node));
  }
  auto run_all = [&] {
    for (size_t k = 0; k < plan.functions.size(); ++k) plan.functions[k](arguments[k].data());
  };
  for (int i = 0; i < 3; ++i) run_all();
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    auto start = std::chrono::steady_clock::now();
    run_all();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

// memcpy of 256 MiB (beyond any LLC), read + write bytes per second, median of 5: the
// same reference `tilefuse bench` reports against.
double CopyGBps() {
  size_t bytes = size_t{256} << 20;
  std::vector<char> from(bytes, 1), to(bytes, 0);
  std::vector<double> rates;
  for (int i = 0; i < 5; ++i) {
    auto start = std::chrono::steady_clock::now();
    std::memcpy(to.data(), from.data(), bytes);
    rates.push_back(2.0 * bytes / std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 1e9);
  }
  volatile char sink = to[bytes / 2];
  (void)sink;
  std::nth_element(rates.begin(), rates.begin() + 2, rates.end());
  return rates[2];
}

StatusOr<nlohmann::json> BenchModel(const std::string& path, int repeats, double copy_gbps, HostJit& jit) {
  ASSIGN_OR_RETURN(ImportedModel model, ImportOnnx(path));
  ASSIGN_OR_RETURN(Graph graph, RunGraphPasses(std::move(model.graph), PassOptions{}));
  double bytes = 0;
  for (int id : graph.inputs()) bytes += NumElements(graph.node(id).shape) * DTypeSize(graph.node(id).dtype);
  for (const Graph::Output& o : graph.outputs()) bytes += NumElements(graph.node(o.node).shape) * DTypeSize(graph.node(o.node).dtype);
  nlohmann::json j = {{"model", path}, {"bytes", bytes}, {"copy_gbps", copy_gbps}};
  NodeBuffers memory(graph);
  for (bool fuse : {true, false}) {
    ASSIGN_OR_RETURN(LoadedPlan plan, CompilePlan(graph, fuse, jit));
    double ms = MedianMs(plan, memory, repeats);
    j[fuse ? "fused" : "unfused"] = {{"ms", ms}, {"kernels", plan.functions.size()}, {"gbps", bytes / (ms * 1e-3) / 1e9}};
  }
  j["speedup"] = j["unfused"]["ms"].get<double>() / j["fused"]["ms"].get<double>();
  j["fused_pct_of_copy"] = 100 * j["fused"]["gbps"].get<double>() / copy_gbps;
  return j;
}

int Main(int argc, char** argv) {
  std::vector<std::string> models;
  int repeats = 20;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--json")) {
      json = true;
    } else {
      models.push_back(argv[i]);
    }
  }
  if (models.empty()) {
    fmt::print(stderr, "usage: {} MODEL... [--repeats N] [--json]\n", argv[0]);
    return 2;
  }
  StatusOr<HostJit> jit = HostJit::Create();
  if (!jit.ok()) {
    fmt::print(stderr, "{}\n", jit.status().ToString());
    return 2;
  }
  double copy_gbps = CopyGBps();
  if (!json) fmt::print("kernels alone, median of {}; host copy bandwidth {:.1f} GB/s\n", repeats, copy_gbps);
  for (const std::string& path : models) {
    StatusOr<nlohmann::json> j = BenchModel(path, repeats, copy_gbps, *jit);
    if (!j.ok()) {
      if (json) fmt::print("{}\n", nlohmann::json{{"model", path}, {"skipped", j.status().message()}}.dump());
      else fmt::print("{}: skipped: {}\n", path, j.status().message());
      continue;
    }
    if (json) {
      fmt::print("{}\n", j->dump());
    } else {
      fmt::print("{}: fused {:.2f} ms ({} kernel, {:.1f} GB/s, {:.0f}% copy), unfused {:.2f} ms ({} kernels), speedup {:.2f}x\n",
                 path, (*j)["fused"]["ms"].get<double>(), (*j)["fused"]["kernels"].get<int>(),
                 (*j)["fused"]["gbps"].get<double>(), (*j)["fused_pct_of_copy"].get<double>(),
                 (*j)["unfused"]["ms"].get<double>(), (*j)["unfused"]["kernels"].get<int>(), (*j)["speedup"].get<double>());
    }
  }
  return 0;
}

}  // namespace
}  // namespace tilefuse

int main(int argc, char** argv) { return tilefuse::Main(argc, argv); }
