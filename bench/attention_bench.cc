// Attention on the CPU: the flash-attention kernel vs the paths it replaces.
//
//   build/tilefuse_bench_attention [--batch 2] [--heads 4] [--seq 512] [--head-dim 64] [--repeats 7]
//
// softmax(causal(q kᵀ / sqrt(d))) v with a [seq, seq] iota mask, f32. Three ways:
//   flash      the attention group as one generated kernel (codegen/attention_lower)
//   reference  its member ops one by one on the reference kernels (f64 interpreter),
//              what attention groups ran on before the template
//   unfused    attention fusion disabled: BLAS matmuls + generated softmax kernels
// Each is checked against the reference first, then timed: one warm-up, median of
// --repeats whole-graph runs (steady clock).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>

#include "reference/interpreter.h"
#include "driver/driver.h"
#include "passes/pipeline.h"
#include "backend/cpu/cpu_executable.h"
#include "testing/tensor_compare.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

struct Sizes {
  int64_t batch = 2, heads = 4, seq = 512, head_dim = 64;
  int repeats = 7;
};

Graph CausalAttention(const Sizes& s) {
  GraphBuilder b;
  Shape shape = {s.batch, s.heads, s.seq, s.head_dim};
  Value q = b.Parameter("q", DType::kF32, shape), k = b.Parameter("k", DType::kF32, shape),
        v = b.Parameter("v", DType::kF32, shape);
  Value scores = b.MulScalar(b.MatMul(q, b.Transpose(k, {0, 1, 3, 2})), 1 / std::sqrt(static_cast<double>(s.head_dim)));
  Value row = b.Iota({s.seq, s.seq}, 0, DType::kI64), column = b.Iota({s.seq, s.seq}, 1, DType::kI64);
  scores = b.Where(b.Binary(OpCode::kGreaterEqual, row, column), scores, b.Scalar(-1e9, DType::kF32));
  b.Output(b.MatMul(b.Softmax(scores, -1), v), "out");
  auto graph = b.Build();
  if (!graph.ok()) std::abort();
  auto passed = RunGraphPasses(std::move(graph).value(), PassOptions{});
  if (!passed.ok()) std::abort();
  return std::move(passed).value();
}

double MedianMs(int repeats, const std::function<void()>& run) {
  run();  // warm-up
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    auto start = std::chrono::steady_clock::now();
    run();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

double TimeCompiled(const Graph& graph, const std::vector<Tensor>& inputs, const std::vector<Tensor>& expected,
                    bool attention, const Sizes& s) {
  CpuCompileOptions options;
  options.cache_dir = (std::filesystem::temp_directory_path() / "tilefuse_bench_cache").string();
  if (!attention) options.disabled_kinds.insert(GroupKind::kAttention);
  auto compiled = CompileForCpu(graph, options);
  if (!compiled.ok()) {
    fmt::print(stderr, "compile: {}\n", compiled.status().ToString());
    std::exit(1);
  }
  for (const KernelInfo& k : (*compiled)->kernels())
    if (k.kind == GroupKind::kAttention && !k.generated) fmt::print("  note: {} not generated: {}\n", k.name, k.why_not);
  auto out = (*compiled)->Run(inputs);
  Comparison c = CompareNormwise((*out)[0], expected[0], {1e-4, 1e-5});
  if (!c.pass) {
    fmt::print(stderr, "{} does not match the reference: {}\n", attention ? "flash" : "unfused", c.reason);
    std::exit(1);
  }
  return MedianMs(s.repeats, [&] { (void)(*compiled)->Run(inputs); });
}

int Main(int argc, char** argv) {
  Sizes s;
  for (int i = 1; i + 1 < argc; i += 2) {
    int64_t value = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--batch")) s.batch = value;
    else if (!std::strcmp(argv[i], "--heads")) s.heads = value;
    else if (!std::strcmp(argv[i], "--seq")) s.seq = value;
    else if (!std::strcmp(argv[i], "--head-dim")) s.head_dim = value;
    else if (!std::strcmp(argv[i], "--repeats")) s.repeats = static_cast<int>(value);
  }
  Graph graph = CausalAttention(s);
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Node& p = graph.node(graph.inputs()[i]);
    inputs.push_back(Tensor::Random(p.dtype, p.shape, 11 + i));
  }
  auto expected = RunReference(graph, inputs);
  if (!expected.ok()) std::abort();
  fmt::print("causal attention f32 B{} H{} N{} D{}, median of {} runs\n", s.batch, s.heads, s.seq, s.head_dim, s.repeats);
  double flash = TimeCompiled(graph, inputs, *expected, true, s);
  double unfused = TimeCompiled(graph, inputs, *expected, false, s);
  double reference = MedianMs(std::max(1, s.repeats / 2), [&] { (void)RunReference(graph, inputs); });
  double flops = 4.0 * s.batch * s.heads * s.seq * s.seq * s.head_dim;
  fmt::print("  flash kernel      {:9.2f} ms  {:6.1f} GFLOP/s\n", flash, flops / flash / 1e6);
  fmt::print("  reference ops     {:9.2f} ms  ({:.1f}x the flash kernel)\n", reference, reference / flash);
  fmt::print("  BLAS + softmax    {:9.2f} ms  ({:.1f}x the flash kernel)\n", unfused, unfused / flash);
  return 0;
}

}  // namespace
}  // namespace tilefuse

int main(int argc, char** argv) { return tilefuse::Main(argc, argv); }
