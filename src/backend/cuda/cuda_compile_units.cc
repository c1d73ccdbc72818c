#include "backend/cuda/cuda_compile_units.h"

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cstdlib>
#include <fmt/format.h>
#include <map>
#include <mutex>
#include <thread>

#include "support/check.h"
#include "support/content_hash.h"
#include "support/parallel_for.h"

namespace tilefuse {

namespace {

bool IsIdentifierChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// `text` with every whole identifier `from` replaced by `to` (tf_group1_x stays when
// replacing tf_group1); with `prefixed`, also the identifiers `from` begins followed by '_'
// (tf_group1_x becomes to_x).
std::string ReplaceIdentifier(std::string text, const std::string& from, const std::string& to, bool prefixed = false) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
    const size_t end = at + from.size();
    const bool longer = end < text.size() && IsIdentifierChar(text[end]) && !(prefixed && text[end] == '_');
    if ((at > 0 && IsIdentifierChar(text[at - 1])) || longer) {
      at = end;
      continue;
    }
    text.replace(at, from.size(), to);
    at += to.size();
  }
  return text;
}

// `function` with the kernel's name and the names it prefixes (its own tables and helpers:
// "tf_group2_attention_query_block_order") given `to` in its place. Two layers' identical
// kernels differ in nothing else, so they share a unit.
std::string RenameKernel(const std::string& function, const std::string& name, const std::string& to) {
  return ReplaceIdentifier(function, name, to, /*prefixed=*/true);
}

// What the kernel is, from its name ("g2_tf_group7_gemm_prologue1_variant3" ->
// "gemm_prologue"): the unit's entry keeps it, so profiles still say what runs.
std::string KindOf(const std::string& name) {
  size_t at = name.find("tf_group");
  if (at == std::string::npos) return "kernel";
  at += 8;
  while (at < name.size() && std::isdigit(static_cast<unsigned char>(name[at]))) ++at;
  std::string kind = at < name.size() ? name.substr(at + 1) : "";
  if (size_t v = kind.rfind("_variant"); v != std::string::npos) kind.resize(v);
  while (!kind.empty() && (std::isdigit(static_cast<unsigned char>(kind.back())) || kind.back() == '_')) kind.pop_back();
  return kind.empty() ? "kernel" : kind;
}

std::string DescribeKernels(const CudaCompileUnit& unit) {
  std::string out = unit.kernels.front();
  if (unit.kernels.size() > 1) out += fmt::format(" (and {} identical kernels)", unit.kernels.size() - 1);
  return out;
}

}  // namespace

std::vector<CudaCompileUnit> SplitIntoCompileUnits(const std::vector<CudaKernelSource>& kernels) {
  std::vector<CudaCompileUnit> units;
  std::map<std::string, size_t> unit_of_entry;
  std::map<std::string, std::string> entry_of_kernel;
  for (const CudaKernelSource& k : kernels) {
    // The entry is a function of what the kernel computes: its body with its own name left
    // out, hashed (64 bits), and its kind for people reading a profile.
    std::string body = RenameKernel(k.function, k.name, "TF_KERNEL_NAME");
    std::string entry = fmt::format("tf_{}_{}", KindOf(k.name), HashBytes(body).ToHex().substr(0, 16));
    auto [named, fresh_name] = entry_of_kernel.emplace(k.name, entry);
    TF_CHECK_MSG(named->second == entry, ("two different kernels named " + k.name).c_str());
    if (!fresh_name) continue;  // the same kernel listed twice
    auto [found, fresh_entry] = unit_of_entry.emplace(entry, units.size());
    if (fresh_entry) {
      CudaKernelSource renamed = k;
      renamed.name = entry;
      renamed.function = RenameKernel(k.function, k.name, entry);
      units.push_back({entry, CudaTranslationUnit({renamed}), {}});
    }
    units[found->second].kernels.push_back(k.name);
  }
  return units;
}

std::string CudaCubins::PtxasLog() const {
  std::string log;
  for (size_t u = 0; u < units.size() && u < cubins.size(); ++u)
    for (const std::string& kernel : units[u].kernels) {
      std::string part = ReplaceIdentifier(cubins[u].ptxas_log, units[u].entry, kernel);
      log += part;
      if (!part.empty() && part.back() != '\n') log += '\n';
    }
  return log;
}

int64_t CudaCubins::bytes() const {
  int64_t total = 0;
  for (const CubinResult& c : cubins) total += static_cast<int64_t>(c.cubin.size());
  return total;
}

int NvrtcThreads(size_t units) {
  int threads = 0;
  if (const char* env = std::getenv("TILEFUSE_NVRTC_THREADS"); env && *env) threads = std::atoi(env);
  if (threads <= 0) threads = std::min(32, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  return static_cast<int>(std::clamp<size_t>(units, 1, static_cast<size_t>(threads)));
}

std::vector<StatusOr<CubinResult>> CompileEachUnit(NvrtcCompiler& nvrtc, const std::vector<CudaCompileUnit>& units,
                                                   const std::string& arch) {
  std::vector<StatusOr<CubinResult>> results(units.size(), Internal("not compiled"));
  ParallelFor(static_cast<int64_t>(units.size()), NvrtcThreads(units.size()), [&](int64_t i) {
    StatusOr<CubinResult> cubin = nvrtc.Compile(units[i].source, arch);
    results[i] = cubin.ok() ? std::move(cubin) : StatusOr<CubinResult>(cubin.status().WithContext("kernel " + DescribeKernels(units[i])));
  });
  return results;
}

namespace {

// The units compiling in this process, by cache, architecture and source: joined while they last.
struct Compiling {
  std::mutex mutex;
  std::map<std::string, std::weak_ptr<const UnitCompile>> units;
};

Compiling& CompilingUnits() {
  static Compiling compiling;
  return compiling;
}

// At exit, before the libraries' own destructors run (NVRTC's among them): the compiles still
// running end first, and reach the cache. A model kept until the process ends (Python's
// torch.compile caches) would otherwise leave its thread inside NVRTC as the process tears down.
void WaitForBackgroundCompiles() {
  std::vector<std::shared_ptr<const UnitCompile>> running;
  {
    std::lock_guard<std::mutex> lock(CompilingUnits().mutex);
    for (const auto& [key, unit] : CompilingUnits().units)
      if (std::shared_ptr<const UnitCompile> u = unit.lock()) running.push_back(std::move(u));
  }
  for (const std::shared_ptr<const UnitCompile>& u : running) u->cubin.wait();
}

// exit() runs its handlers in the reverse order of registration, and NVRTC's library builds
// some of its statics (with their destructors) during its first compiles. The wait must run
// before those are destroyed under a compile still running, so it is registered again after
// every foreground compile that leaves background compiles running (a build may start them
// before its first compile).
void WaitForBackgroundCompilesAtExit() {
  bool running = false;
  {
    std::lock_guard<std::mutex> lock(CompilingUnits().mutex);
    for (const auto& [key, unit] : CompilingUnits().units)
      if (std::shared_ptr<const UnitCompile> u = unit.lock(); u && u->cubin.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
        running = true;
  }
  if (running) std::atexit(WaitForBackgroundCompiles);
}

}  // namespace

StatusOr<CudaCubins> CompileUnits(NvrtcCompiler& nvrtc, std::vector<CudaCompileUnit> units, const std::string& arch) {
  std::vector<StatusOr<CubinResult>> compiled = CompileEachUnit(nvrtc, units, arch);
  WaitForBackgroundCompilesAtExit();
  CudaCubins out;
  for (StatusOr<CubinResult>& c : compiled) {
    RETURN_IF_ERROR(c.status());
    out.compiles += c->from_cache ? 0 : 1;
    out.cubins.push_back(std::move(*c));
  }
  out.units = std::move(units);
  return out;
}

bool BackgroundCubins::Ready() const {
  return std::all_of(compiles.begin(), compiles.end(), [](const std::shared_ptr<const UnitCompile>& c) {
    return c->cubin.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  });
}

StatusOr<CudaCubins> BackgroundCubins::Get() const {
  CudaCubins out;
  for (size_t u = 0; u < units.size(); ++u) {
    const StatusOr<CubinResult>& cubin = compiles[u]->cubin.get();
    if (!cubin.ok()) return cubin.status().WithContext("kernel " + DescribeKernels(units[u]));
    out.compiles += cubin->from_cache ? 0 : 1;
    out.cubins.push_back(*cubin);
  }
  out.units = units;
  return out;
}


std::shared_ptr<const BackgroundCubins> CompileUnitsInBackground(const NvrtcCompiler& nvrtc, std::vector<CudaCompileUnit> units,
                                                                 const std::string& arch) {
  Compiling& compiling = CompilingUnits();
  [[maybe_unused]] static const bool waits_at_exit = std::atexit(WaitForBackgroundCompiles) == 0;
  auto background = std::make_shared<BackgroundCubins>();
  std::lock_guard<std::mutex> lock(compiling.mutex);
  std::erase_if(compiling.units, [](const auto& entry) { return entry.second.expired(); });
  for (const CudaCompileUnit& u : units) {
    background->kernels.insert(u.kernels.begin(), u.kernels.end());
    std::shared_ptr<const UnitCompile>& joined = background->compiles.emplace_back();
    std::weak_ptr<const UnitCompile>& entry = compiling.units[nvrtc.cache_directory() + '\n' + arch + '\n' + u.source];
    joined = entry.lock();
    if (joined) continue;
    auto compile = std::make_shared<UnitCompile>();
    // std::async's state: releasing its last future waits for the task.
    compile->cubin =
        std::async(std::launch::async, [nvrtc = NvrtcCompiler(nvrtc), source = u.source, arch]() mutable { return nvrtc.Compile(source, arch); })
            .share();
    joined = compile;
    entry = compile;
  }
  background->units = std::move(units);
  return background;
}

}  // namespace tilefuse
