#include "backend/cuda/nvrtc_compiler.h"

#include <chrono>
#include <dlfcn.h>
#include <filesystem>
#include <fmt/format.h>
#include <mutex>
#include <nvrtc.h>
#include <regex>
#include <sstream>
#include <unistd.h>

#include "codegen/cuda/device_headers.h"
#include "backend/cuda/shared_library.h"
#include "support/file_util.h"

namespace tilefuse {

namespace {

// The NVRTC entry points tilefuse uses, resolved once per process.
struct NvrtcApi {
#define TF_NVRTC_FUNCTIONS(X)                                                                          \
  X(nvrtcVersion) X(nvrtcCreateProgram) X(nvrtcDestroyProgram) X(nvrtcCompileProgram) X(nvrtcGetCUBINSize) \
  X(nvrtcGetCUBIN) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetErrorString)
#define TF_DECLARE(name) decltype(&::name) name = nullptr;
  TF_NVRTC_FUNCTIONS(TF_DECLARE)
#undef TF_DECLARE
};

StatusOr<const NvrtcApi*> LoadNvrtc() {
  static std::once_flag once;
  static NvrtcApi api;
  static Status status;
  std::call_once(once, [] {
    std::vector<std::string> candidates;
    for (const char* file : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"})
      for (const std::string& c : CudaLibraryCandidates(file)) candidates.push_back(c);
    StatusOr<void*> handle = OpenFirstLibrary("NVRTC", "TILEFUSE_NVRTC", candidates);
    if (!handle.ok()) {
      status = handle.status();
      return;
    }
#define TF_RESOLVE(name)                                                          \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(*handle, #name));          \
  if (!api.name) {                                                                \
    status = NotFound("NVRTC was loaded but lacks " #name "; it is too old");      \
    return;                                                                       \
  }
    TF_NVRTC_FUNCTIONS(TF_RESOLVE)
#undef TF_RESOLVE
  });
  if (!status.ok()) return status;
  return &api;
}

std::string ProgramLog(const NvrtcApi& api, nvrtcProgram program) {
  size_t size = 0;
  if (api.nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  api.nvrtcGetProgramLog(program, log.data());
  log.resize(size - 1);
  return log;
}

// The include folder of the toolkit the loaded NVRTC belongs to (the one beside its lib
// folder: a CUDA install or the cu13 Python wheel), if it has the half-type headers; "" if
// not. NVRTC 13.0 has no headers built in, so a kernel including <cuda_bf16.h> needs it.
std::string ToolkitIncludeFolder(const NvrtcApi& api) {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(api.nvrtcVersion), &info) || !info.dli_fname) return "";
  std::filesystem::path include = std::filesystem::path(info.dli_fname).parent_path().parent_path() / "include";
  std::error_code error;
  return std::filesystem::exists(include / "cuda_bf16.h", error) ? include.string() : "";
}

// Keeps a failing source for the user to read; returns its path (empty if not written).
// Named by the process and the cache key: units failing at once keep a file each.
std::string KeepFailedSource(const std::string& source, const std::string& key) {
  std::string path = fmt::format("/tmp/tilefuse-nvrtc-failure-{}-{}.cu", getpid(), key.substr(0, 12));
  return WriteFileAtomically(path, source).ok() ? path : "";
}

}  // namespace

std::vector<PtxasKernelInfo> ParsePtxasLog(const std::string& log) {
  std::vector<PtxasKernelInfo> out;
  std::istringstream lines(log);
  std::string line;
  static const std::regex function(R"(Compiling entry function '([^']+)')");
  static const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_search(line, m, function)) {
      out.push_back({});
      out.back().name = m[1];
      continue;
    }
    if (out.empty()) continue;
    PtxasKernelInfo& k = out.back();
    if (std::regex_search(line, m, frame)) {
      k.stack_frame_bytes = std::stoll(m[1]);
      k.spill_store_bytes = std::stoll(m[2]);
      k.spill_load_bytes = std::stoll(m[3]);
    }
    if (std::regex_search(line, m, used)) k.registers = std::stoi(m[1]);
    if (std::regex_search(line, m, smem)) k.shared_bytes = std::stoll(m[1]);
    if (line.find("ptxas info") != std::string::npos) {
      std::string text = line.substr(line.find(':') + 1);
      k.line += (k.line.empty() ? "" : ";") + text;
    }
  }
  return out;
}

StatusOr<NvrtcCompiler> NvrtcCompiler::Create(std::string cache_dir) {
  ASSIGN_OR_RETURN(const NvrtcApi* api, LoadNvrtc());
  int major = 0, minor = 0;
  api->nvrtcVersion(&major, &minor);
  ASSIGN_OR_RETURN(KernelCache cache, KernelCache::Open(std::move(cache_dir)));
  return NvrtcCompiler(std::move(cache), major, minor, ToolkitIncludeFolder(*api));
}

std::string NvrtcCompiler::version() const { return fmt::format("{}.{}", major_, minor_); }

std::vector<std::string> NvrtcCompiler::Options(const std::string& arch, const std::vector<std::string>& extra) const {
  std::vector<std::string> options = {"-std=c++17", "--gpu-architecture=" + arch, "--ptxas-options=-v",
                                      "-default-device",
                                      "-diag-suppress=177,550"};  // unused loop indices are normal in generated code
  if (!toolkit_include_.empty()) {
    // Only read when a kernel includes a toolkit header; libcu++ (<cuda/std/...>) sits
    // under cccl/ since CUDA 13.
    options.push_back("-I" + toolkit_include_);
    options.push_back("-I" + toolkit_include_ + "/cccl");
  }
  options.insert(options.end(), extra.begin(), extra.end());
  return options;
}

std::string NvrtcCompiler::CacheKey(const std::string& source, const std::string& arch, const std::vector<std::string>& options) const {
  const std::string nvrtc_version = version();  // the views below must not outlive it
  std::vector<std::string_view> key_parts = {source, arch, nvrtc_version};
  for (const DeviceHeader& header : kDeviceHeaders) key_parts.insert(key_parts.end(), {header.name, header.text});
  for (const std::string& o : options) key_parts.push_back(o);
  return KernelCache::Key(key_parts);
}

bool NvrtcCompiler::Cached(const std::string& source, const std::string& arch, const std::vector<std::string>& extra) {
  const std::string key = CacheKey(source, arch, Options(arch, extra));
  std::lock_guard<std::mutex> lock(shared_->cache_mutex);
  return shared_->cache.Lookup(key, ".cubin").has_value();
}

StatusOr<CubinResult> NvrtcCompiler::Compile(const std::string& source, const std::string& arch,
                                             const std::vector<std::string>& extra) {
  ASSIGN_OR_RETURN(const NvrtcApi* api, LoadNvrtc());
  const std::vector<std::string> options = Options(arch, extra);
  const std::string key = CacheKey(source, arch, options);
  if (std::optional<CubinResult> cached = Lookup(key)) {
    ++shared_->cache_hits;
    return *std::move(cached);
  }
  ++shared_->compiles;
  const auto start = std::chrono::steady_clock::now();
  CubinResult result;
  nvrtcProgram program = nullptr;
  std::vector<const char*> header_texts, header_names;
  for (const DeviceHeader& header : kDeviceHeaders) {
    header_texts.push_back(header.text);
    header_names.push_back(header.name);
  }
  nvrtcResult r = api->nvrtcCreateProgram(&program, source.c_str(), "tilefuse_kernels.cu", static_cast<int>(header_texts.size()),
                                          header_texts.data(), header_names.data());
  if (r != NVRTC_SUCCESS) return Internal(fmt::format("nvrtcCreateProgram: {}", api->nvrtcGetErrorString(r)));
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  r = api->nvrtcCompileProgram(program, static_cast<int>(argv.size()), argv.data());
  std::string log = ProgramLog(*api, program);
  if (r != NVRTC_SUCCESS) {
    api->nvrtcDestroyProgram(&program);
    std::string kept = KeepFailedSource(source, key);
    return Internal(fmt::format("NVRTC failed to compile the generated CUDA for {} ({}){}:\n{}", arch,
                                api->nvrtcGetErrorString(r), kept.empty() ? "" : "; source kept at " + kept, log));
  }
  size_t size = 0;
  r = api->nvrtcGetCUBINSize(program, &size);
  if (r == NVRTC_SUCCESS && size == 0) r = NVRTC_ERROR_INVALID_OPTION;  // a virtual arch gives PTX, no cubin
  if (r != NVRTC_SUCCESS) {
    api->nvrtcDestroyProgram(&program);
    return Internal(fmt::format("NVRTC produced no cubin for {} ({}); name a real architecture such as sm_90a", arch,
                                api->nvrtcGetErrorString(r)));
  }
  result.cubin.resize(size);
  api->nvrtcGetCUBIN(program, result.cubin.data());
  api->nvrtcDestroyProgram(&program);
  result.ptxas_log = log;
  result.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard<std::mutex> lock(shared_->cache_mutex);
  // The report first: a cubin found in the cache then always has its report beside it.
  RETURN_IF_ERROR(shared_->cache.Insert(key, ".ptxas", log).status());
  RETURN_IF_ERROR(shared_->cache.Insert(key, ".cubin", result.cubin).status());
  return result;
}

std::optional<CubinResult> NvrtcCompiler::Lookup(const std::string& key) {
  std::lock_guard<std::mutex> lock(shared_->cache_mutex);
  std::optional<std::string> path = shared_->cache.Lookup(key, ".cubin");
  if (!path) return std::nullopt;
  CubinResult result;
  result.from_cache = true;
  StatusOr<std::string> cubin = ReadWholeFile(*path);
  if (!cubin.ok()) return std::nullopt;  // removed since Lookup checked it: compile again
  result.cubin = std::move(cubin).value();
  if (std::optional<std::string> log = shared_->cache.Lookup(key, ".ptxas")) {
    StatusOr<std::string> text = ReadWholeFile(*log);
    if (text.ok()) result.ptxas_log = std::move(text).value();
  }
  return result;
}

}  // namespace tilefuse
