// CpuExecutable::MeasureVariants: the CPU tuner's measurements (tune/cpu_tuner.h).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <fmt/format.h>

#include "codegen/cpp/cpp_emitter.h"
#include "codegen/cpp/cpp_prelude.h"
#include "backend/cpu/cpu_executable.h"
#include "backend/cpu/cpu_executable_state.h"
#include "support/check.h"
#include "support/cpu_info.h"

namespace tilefuse {

namespace {

using cpu_executable_internal::KernelFunction;
using cpu_executable_internal::GeneratedCall;
using Clock = std::chrono::steady_clock;

// Small kernels would need thousands of copies to exceed the cache; they are read from
// cache in a real run too (their producer just wrote them), so the rotation stops here.
constexpr int64_t kMaxRotations = 16;
constexpr size_t kMaxErrorLength = 600;

double Median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// The compiler's report is pages long: its first line (what failed, where the sources
// were kept) and its first error line.
std::string Shorten(const std::string& text) {
  std::string first = text.substr(0, text.find('\n'));
  size_t error = text.find("error:");
  if (error != std::string::npos) {
    size_t line_start = text.rfind('\n', error);
    line_start = line_start == std::string::npos ? 0 : line_start + 1;
    std::string line = text.substr(line_start, text.find('\n', error) - line_start);
    if (line != first) first += " " + line;
  }
  if (first.size() > kMaxErrorLength) first = first.substr(0, kMaxErrorLength) + "...";
  return first;
}

// Every variant compiled in one compiler run; when that run fails, each alone, so one
// bad variant costs only itself. `functions[i]` stays null for a variant that failed
// (its error in `errors[i]`).
Status CompileVariants(const std::string& cache_dir, const std::vector<std::string>& sources,
                       const std::vector<std::string>& symbols, std::vector<KernelFunction>& functions,
                       std::vector<std::string>& errors, std::vector<std::shared_ptr<const JitLibrary>>& libraries) {
  HostJitOptions options;
  if (!cache_dir.empty()) options.cache_dir = cache_dir;
  ASSIGN_OR_RETURN(HostJit jit, HostJit::Create(options));
  std::string together = CppPrelude();
  for (const std::string& source : sources) together += source;
  StatusOr<std::shared_ptr<const JitLibrary>> all = jit.Compile(together);
  for (size_t i = 0; i < sources.size(); ++i) {
    StatusOr<std::shared_ptr<const JitLibrary>> library = all.ok() ? all : jit.Compile(CppPrelude() + sources[i]);
    if (!library.ok()) {
      errors[i] = Shorten(library.status().message());
      continue;
    }
    ASSIGN_OR_RETURN(functions[i], (*library)->Function<void(void* const*)>(symbols[i]));
    libraries.push_back(*library);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<CppVariantTiming>> CpuExecutable::MeasureVariants(const std::string& name,
                                                                       const std::vector<CppKernelConfig>& configs, int warmup,
                                                                       int repeats) {
  State& s = *state_;
  const GeneratedCall* call = cpu_executable_internal::FindLoopKernel(s.steps, name);
  if (!call) return NotFound(fmt::format("no generated loop kernel named {}", name));
  TF_CHECK_MSG(!s.last_tensors.empty(), "MeasureVariants needs a Run first (its buffers hold the data)");
  repeats = std::max(1, repeats);
  std::vector<CppVariantTiming> timings(configs.size());
  std::vector<std::string> sources, symbols;
  for (size_t i = 0; i < configs.size(); ++i) {
    timings[i].config = configs[i];
    Kernel k = *call->loop_kernel;
    k.name = fmt::format("{}_variant{}", name, i);
    symbols.push_back(k.name);
    sources.push_back(EmitCppFunction(k, configs[i]));
  }
  std::vector<KernelFunction> functions(configs.size(), nullptr);
  std::vector<std::string> errors(configs.size());
  std::vector<std::shared_ptr<const JitLibrary>> libraries;  // loaded while timing
  RETURN_IF_ERROR(CompileVariants(s.cache_dir, sources, symbols, functions, errors, libraries));

  // Buffer tables: the run's own, then copies of the kernel's inputs until they exceed
  // the last-level cache, so each call reads its inputs from memory, as in a run.
  auto address = [&](int node) -> void* { return s.last_memory[node] ? s.last_memory[node] : s.last_tensors[node].data(); };
  auto bytes = [&](int node) { return NumElements(s.graph.node(node).shape) * DTypeSize(s.graph.node(node).dtype); };
  std::vector<int> inputs;
  int64_t input_bytes = 0;
  for (int node : call->buffer_nodes)
    if (std::find(call->outputs.begin(), call->outputs.end(), node) == call->outputs.end() &&
        std::find(inputs.begin(), inputs.end(), node) == inputs.end()) {
      inputs.push_back(node);
      input_bytes += bytes(node);
    }
  int64_t rotations = std::clamp<int64_t>(LastLevelCacheBytes() / std::max<int64_t>(1, input_bytes) + 1, 1, kMaxRotations);
  std::vector<std::vector<std::byte>> copies;
  std::vector<std::vector<void*>> tables(rotations);
  for (int64_t r = 0; r < rotations; ++r)
    for (int node : call->buffer_nodes) {
      void* original = address(node);
      if (r > 0 && std::find(inputs.begin(), inputs.end(), node) != inputs.end()) {
        const std::byte* from = static_cast<const std::byte*>(original);
        copies.emplace_back(from, from + bytes(node));
        original = copies.back().data();
      }
      tables[r].push_back(original);
    }
  // The symbols' values its sizes are printed over follow the buffers, as in a run.
  if (!call->symbols.empty())
    for (std::vector<void*>& table : tables) table.push_back(const_cast<int64_t*>(call->symbols.data()));

  auto time_variant = [&](size_t i, int n) {
    std::vector<double> us;
    for (int rep = 0; rep < warmup + n; ++rep) {
      auto begin = Clock::now();
      functions[i](tables[rep % rotations].data());
      auto end = Clock::now();
      if (rep >= warmup) us.push_back(std::chrono::duration<double, std::micro>(end - begin).count());
    }
    return Median(us);
  };
  for (size_t i = 0; i < configs.size(); ++i) {
    if (functions[i]) timings[i].time_us = time_variant(i, repeats);
    else timings[i].error = errors[i];
  }
  // A winner much faster than the default (the first configuration) is measured again,
  // with the default, before anyone believes it: another process may have shared the
  // cores during the default's turn.
  if (!timings.empty() && timings[0].time_us) {
    size_t best = 0;
    for (size_t i = 0; i < timings.size(); ++i)
      if (timings[i].time_us && *timings[i].time_us < *timings[best].time_us) best = i;
    if (best != 0 && *timings[best].time_us < 0.85 * *timings[0].time_us)
      for (size_t i : {size_t{0}, best}) timings[i].time_us = time_variant(i, 2 * repeats);
  }
  return timings;
}

}  // namespace tilefuse
