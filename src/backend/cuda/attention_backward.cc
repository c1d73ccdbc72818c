#include "backend/cuda/attention_backward.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include <fmt/format.h>

#include "backend/cuda/kernel_launch.h"
#include "codegen/cuda/cuda_emitter.h"

namespace tilefuse {

namespace {

struct LoadedKernels {
  CUfunction prepare = nullptr, main = nullptr, finish = nullptr;
};

// Loaded once per process, device and program; the modules stay for the process's life.
std::mutex loaded_mutex;
std::map<std::pair<const CudaDevice*, std::string>, LoadedKernels> loaded;

StatusOr<LoadedKernels> Load(const CudaDevice& gpu, NvrtcCompiler& nvrtc, const std::string& source) {
  std::lock_guard<std::mutex> lock(loaded_mutex);
  auto found = loaded.find({&gpu, source});
  if (found != loaded.end()) return found->second;
  ASSIGN_OR_RETURN(CubinResult cubin, nvrtc.Compile(source, "sm_90a"));
  CUmodule module = nullptr;
  RETURN_IF_ERROR(gpu.Check(gpu.api().cuModuleLoadData(&module, cubin.cubin.data()), "cuModuleLoadData (attention backward)"));
  LoadedKernels k;
  const std::pair<CUfunction*, const char*> names[] = {
      {&k.prepare, "attention_bwd_prepare"}, {&k.main, "attention_bwd"}, {&k.finish, "attention_bwd_finish"}};
  for (const auto& [function, name] : names)
    RETURN_IF_ERROR(gpu.Check(gpu.api().cuModuleGetFunction(function, module, name), std::string("cuModuleGetFunction ") + name));
  loaded.emplace(std::make_pair(&gpu, source), k);
  return k;
}

// A [heads][rows][d] operand's TMA map: boxes of 64 of d by `box_rows` rows (what the main
// kernel's tiles are made of).
TensorMapArg OperandMap(int node, const AttentionBackwardProblem& p, int heads, int rows, int box_rows) {
  TensorMapArg map;
  map.node = node;
  map.dtype = p.dtype;
  map.rank = 3;
  map.dims = {p.d, rows, heads, 1, 1};
  map.strides_bytes = {static_cast<int64_t>(p.d) * 2, static_cast<int64_t>(rows) * p.d * 2, 0, 0};
  map.box = {64, box_rows, 1, 1, 1};
  return map;
}

// As AttentionBwdSharedMemory lays it out, with the slack that aligns its start: K and V, the Q
// and dO rings (2 stages), two dSᵀ tiles, the consumers' dQ buffers, the statistics, barriers.
int64_t SharedBytes(const AttentionBackwardProblem& p) {
  return 1024 + 2 * 128 * p.d * 2 + 2 * 2 * 64 * p.d * 2 + 2 * 128 * 64 * 2 + 2 * 64 * 64 * 4 + 2 * 2 * 64 * 4 + (1 + 4 * 2) * 8;
}

}  // namespace

std::string AttentionBackwardProblem::Label() const {
  return fmt::format("{} heads{}, {} queries x {} keys, d {}{}", heads, group > 1 ? fmt::format(" ({} per key/value head)", group) : "",
                     nq, nk, d, causal ? ", causal" : "");
}

Status CheckAttentionBackward(const AttentionBackwardProblem& p) {
  if (p.dtype != DType::kBF16 && p.dtype != DType::kF16)
    return InvalidArgument(fmt::format("attention backward template: {} operands (bf16 or f16 only)", DTypeName(p.dtype)));
  if (p.d != 64 && p.d != 128) return InvalidArgument(fmt::format("attention backward template: head dim {} (64 or 128 only)", p.d));
  if (p.heads < 1 || p.group < 1 || p.heads % p.group != 0 || p.nq < 1 || p.nk < 1)
    return InvalidArgument("attention backward template: " + p.Label());
  if (p.heads_together < 0) return InvalidArgument("attention backward template: negative heads_together");
  return Status::Ok();
}

int64_t AttentionBackwardScratchBytes(const AttentionBackwardProblem& p) {
  const int64_t padded_rows = static_cast<int64_t>(p.heads) * p.QueryBlocks() * 64;
  return 4 * (2 * padded_rows + padded_rows * p.d);
}

namespace {

// The skeleton's compile-time configuration, a local class of each kernel (so a kernel's text
// is all a compile unit needs).
std::string ConfigStruct(const AttentionBackwardProblem& p) {
  return fmt::format(R"(  struct Config {{
    using Element = {};
    enum : int {{ kD = {}, kBM = 64, kBN = 128, kStages = 2, kNQ = {}, kNK = {}, kHeads = {}, kGroup = {}, kHeadsTogether = {},
                 kCausal = {}, kProducerRegisters = 24, kConsumerRegisters = 240 }};
    static constexpr __device__ float Scale() {{ return {:a}f; }}
  }};
)",
                     p.dtype == DType::kF16 ? "tf::F16" : "tf::Bf16", p.d, p.nq, p.nk, p.heads, p.group, p.heads_together,
                     p.causal ? 1 : 0, static_cast<float>(p.scale));
}

}  // namespace

std::vector<CudaKernelSource> AttentionBackwardKernels(const AttentionBackwardProblem& p, const AttentionBackwardValues& at,
                                                       const std::string& name) {
  const std::string config = ConfigStruct(p);
  auto value = [](int node) { return LaunchArg{LaunchArg::Kind::kBuffer, node, {}, 0}; };
  auto map = [](TensorMapArg m) { return LaunchArg{LaunchArg::Kind::kTensorMap, m.node, m, 0}; };
  const int64_t query_blocks = static_cast<int64_t>(p.QueryBlocks()) * p.heads;
  // The statistics (f32, a row each, padded to whole query blocks), then the dQ accumulator.
  const int64_t padded_rows = query_blocks * 64;
  auto scratch = [&](int64_t offset) { return LaunchArg{LaunchArg::Kind::kScratch, -1, {}, at.scratch_offset + offset}; };
  const LaunchArg lse2 = scratch(0), delta = scratch(4 * padded_rows), accumulator = scratch(8 * padded_rows);
  const int64_t scratch_bytes = at.scratch_offset + AttentionBackwardScratchBytes(p);
  const int kv_heads = p.heads / p.group;

  // A kernel: its __global__ function (its parameters, the local Config, the skeleton's call)
  // on a 1-D grid.
  auto kernel = [&](std::string kernel_name, const char* bounds, int threads, const char* parameters, const char* call, int64_t grid,
                    std::string strategy, std::vector<LaunchArg> args) {
    CudaKernelSource k;
    k.name = std::move(kernel_name);
    k.function = fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n{}  {}\n}}\n", bounds, k.name, parameters,
                             config, call);
    k.includes = {"attention_bwd_sm90.cuh"};
    k.threads = threads;
    k.work_blocks = grid;
    k.strategy = std::move(strategy);
    k.launch.grid = {grid, 1, 1};
    k.launch.block = {threads, 1, 1};
    k.launch.args = std::move(args);
    k.launch.scratch_bytes = scratch_bytes;
    return k;
  };
  std::vector<CudaKernelSource> kernels;
  kernels.push_back(kernel(name + "_prepare", "256", 256,
                           "const unsigned short* __restrict__ out, const unsigned short* __restrict__ dout, "
                           "const float* __restrict__ lse, float* __restrict__ lse2, float* __restrict__ delta, "
                           "float* __restrict__ dq_accumulator",
                           "tf::AttentionBwdPrepare<Config>(out, dout, lse, lse2, delta, dq_accumulator);", query_blocks,
                           "attention backward: D and the logsumexp in base 2 per query block, the dQ accumulator zeroed",
                           {value(at.out), value(at.dout), value(at.lse), lse2, delta, accumulator}));
  kernels.push_back(kernel(name, "384, 1", 384,
                           "const __grid_constant__ tf::TensorMap map_q, const __grid_constant__ tf::TensorMap map_k, "
                           "const __grid_constant__ tf::TensorMap map_v, const __grid_constant__ tf::TensorMap map_do, "
                           "const float* __restrict__ lse2, const float* __restrict__ delta, float* __restrict__ dq_accumulator, "
                           "unsigned short* __restrict__ dk, unsigned short* __restrict__ dv",
                           "tf::AttentionBwdSm90<Config>(map_q, map_k, map_v, map_do, lse2, delta, dq_accumulator, dk, dv);",
                           static_cast<int64_t>(p.KeyBlocks()) * kv_heads, fmt::format("attention backward template: {}", p.Label()),
                           {map(OperandMap(at.q, p, p.heads, p.nq, 64)), map(OperandMap(at.k, p, kv_heads, p.nk, 128)),
                            map(OperandMap(at.v, p, kv_heads, p.nk, 128)), map(OperandMap(at.dout, p, p.heads, p.nq, 64)), lse2, delta,
                            accumulator, value(at.dk), value(at.dv)}));
  kernels.back().launch.dynamic_shared_bytes = SharedBytes(p);
  kernels.push_back(kernel(name + "_finish", "256", 256,
                           "const float* __restrict__ dq_accumulator, unsigned short* __restrict__ dq",
                           "tf::AttentionBwdFinish<Config>(dq_accumulator, dq);", query_blocks,
                           "attention backward: dQ from its f32 accumulator", {accumulator, value(at.dq)}));
  return kernels;
}

std::string AttentionBackwardSource(const AttentionBackwardProblem& p) {
  return CudaTranslationUnit(AttentionBackwardKernels(p, AttentionBackwardValues{}, "attention_bwd"));
}

Status RunAttentionBackward(const CudaDevice& gpu, NvrtcCompiler& nvrtc, const AttentionBackwardProblem& p,
                            const AttentionBackwardPointers& pointers, CUstream stream) {
  RETURN_IF_ERROR(CheckAttentionBackward(p));
  const std::vector<CudaKernelSource> kernels = AttentionBackwardKernels(p, AttentionBackwardValues{}, "attention_bwd");
  ASSIGN_OR_RETURN(LoadedKernels k, Load(gpu, nvrtc, CudaTranslationUnit(kernels)));
  // The values by AttentionBackwardValues' default numbers.
  const std::vector<CUdeviceptr> address = {pointers.q,   pointers.k,  pointers.v,  pointers.out, pointers.dout,
                                            pointers.lse, pointers.dq, pointers.dk, pointers.dv};
  if (pointers.scratch % 16 != 0 || std::any_of(address.begin(), address.end(), [](CUdeviceptr a) { return a % 16 != 0; }))
    return InvalidArgument("attention backward template: a device pointer not 16-byte aligned");
  const CUfunction functions[] = {k.prepare, k.main, k.finish};
  RETURN_IF_ERROR(PrepareFunction(gpu, k.main, kernels[1].launch, kernels[1].name));
  for (size_t i = 0; i < kernels.size(); ++i)
    RETURN_IF_ERROR(LaunchKernel(gpu, functions[i], kernels[i].launch, address, pointers.scratch, stream, kernels[i].name));
  return Status::Ok();
}

}  // namespace tilefuse
