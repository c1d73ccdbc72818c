#include "backend/cuda/staged_copies.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "backend/cuda/cuda_compile_units.h"
#include "backend/cuda/cuda_modules.h"
#include "backend/cuda/nvrtc_compiler.h"

namespace tilefuse {
namespace {

constexpr int kThreads = 256;

// The kernel's parameter: the table by value (128 × 24 + 8 bytes, under the 4 KB every
// architecture takes).
struct CopyTable {
  struct Entry {
    uint64_t from, to, bytes;
  } copy[kStagedCopiesPerLaunch];
  int count;
};

struct LoadedKernel {
  CudaModules modules;
  CUfunction function = nullptr;
};

StatusOr<CUfunction> CopyKernel(const CudaDevice& device, const std::string& cache_dir) {
  static std::mutex mutex;
  static std::map<const CudaDevice*, LoadedKernel>* loaded = new std::map<const CudaDevice*, LoadedKernel>();  // for the process
  std::lock_guard<std::mutex> lock(mutex);
  auto found = loaded->find(&device);
  if (found != loaded->end()) return found->second.function;
  ASSIGN_OR_RETURN(NvrtcCompiler nvrtc, NvrtcCompiler::Create(cache_dir));
  CudaCubins cubins;
  CudaCompileUnit unit;
  unit.entry = "tf_staged_copies";
  unit.source = StagedCopiesSource();
  unit.kernels = {"tf_staged_copies"};
  ASSIGN_OR_RETURN(CubinResult cubin, nvrtc.Compile(unit.source, device.arch()));
  cubins.units.push_back(std::move(unit));
  cubins.cubins.push_back(std::move(cubin));
  RETURN_IF_ERROR(device.MakeCurrent());
  LoadedKernel kernel;
  ASSIGN_OR_RETURN(kernel.modules, CudaModules::Load(device, cubins));
  ASSIGN_OR_RETURN(kernel.function, kernel.modules.Function("tf_staged_copies"));
  return loaded->emplace(&device, std::move(kernel)).first->second.function;
}

}  // namespace

const std::string& StagedCopiesSource() {
  static const std::string source = fmt::format(R"(// Copies between device buffers, each a grid row (blockIdx.y); 16 bytes a thread and step.
struct TfCopyTable {{
  struct Entry {{ unsigned long long from, to, bytes; }} copy[{0}];
  int count;
}};

extern "C" __global__ void __launch_bounds__({1}) tf_staged_copies(const TfCopyTable table) {{
  if (blockIdx.y >= table.count) return;
  const TfCopyTable::Entry e = table.copy[blockIdx.y];
  const unsigned long long stride = 1ull * gridDim.x * blockDim.x, first = 1ull * blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned long long vectors = e.bytes / 16;
  const uint4* from = reinterpret_cast<const uint4*>(e.from);
  uint4* to = reinterpret_cast<uint4*>(e.to);
  for (unsigned long long i = first; i < vectors; i += stride) to[i] = from[i];
  for (unsigned long long i = vectors * 16 + first; i < e.bytes; i += stride)  // the tail under 16 bytes
    reinterpret_cast<unsigned char*>(e.to)[i] = reinterpret_cast<const unsigned char*>(e.from)[i];
}}
)",
                                                kStagedCopiesPerLaunch, kThreads);
  return source;
}

Status LaunchStagedCopies(const CudaDevice& device, const std::string& cache_dir, const std::vector<StagedCopy>& copies,
                          CUstream stream) {
  // The copies of one launch run side by side: where one's source is another's destination
  // (a caller's pointers aliasing each other), they go one by one in their order instead.
  std::vector<std::pair<CUdeviceptr, size_t>> sources;  // (address, copy)
  for (size_t i = 0; i < copies.size(); ++i) sources.emplace_back(copies[i].from, i);
  std::sort(sources.begin(), sources.end());
  bool chained = false;
  for (size_t i = 0; i < copies.size() && !chained; ++i) {
    auto it = std::lower_bound(sources.begin(), sources.end(), std::make_pair(copies[i].to, size_t{0}));
    for (; it != sources.end() && it->first == copies[i].to; ++it) chained = chained || it->second != i;
  }
  // An address off the kernel's 16-byte vectors (none RunOnDevice makes today) is the copy
  // engine's, one call each.
  std::vector<StagedCopy> vectors;
  for (const StagedCopy& c : copies) {
    if (!chained && c.from % 16 == 0 && c.to % 16 == 0) {
      vectors.push_back(c);
      continue;
    }
    RETURN_IF_ERROR(device.Check(device.api().cuMemcpyDtoDAsync(c.to, c.from, static_cast<size_t>(c.bytes), stream), "copying on the device"));
  }
  if (vectors.empty()) return Status::Ok();
  ASSIGN_OR_RETURN(CUfunction function, CopyKernel(device, cache_dir));
  for (size_t begin = 0; begin < vectors.size(); begin += kStagedCopiesPerLaunch) {
    CopyTable table{};
    table.count = static_cast<int>(std::min(kStagedCopiesPerLaunch, vectors.size() - begin));
    int64_t largest = 0;
    for (int i = 0; i < table.count; ++i) {
      const StagedCopy& c = vectors[begin + i];
      table.copy[i] = {c.from, c.to, static_cast<uint64_t>(c.bytes)};
      largest = std::max(largest, c.bytes);
    }
    // Enough blocks that the largest copy takes ~4 vectors a thread, at most two waves of
    // 132 SMs: most of these copies are a few bytes to a few hundred KB.
    const int64_t blocks = std::clamp<int64_t>((largest + 16 * kThreads * 4 - 1) / (16 * kThreads * 4), 1, 264);
    void* params[] = {&table};
    const CUresult launched = device.api().cuLaunchKernel(function, static_cast<unsigned>(blocks), table.count, 1, kThreads, 1, 1, 0,
                                                          stream, params, nullptr);
    if (launched != CUDA_SUCCESS)  // (the message formatted only then: this runs twice a decode step)
      return device.Check(launched, fmt::format("cuLaunchKernel tf_staged_copies ({} copies)", table.count));
  }
  return Status::Ok();
}

}  // namespace tilefuse
