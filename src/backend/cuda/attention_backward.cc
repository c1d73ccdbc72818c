#include "backend/cuda/attention_backward.h"

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

std::string AttentionBackwardSource(const AttentionBackwardProblem& p) {
  const char* element = p.dtype == DType::kF16 ? "tf::F16" : "tf::Bf16";
  std::string out = fmt::format(R"(
struct Config {{
  using Element = {};
  enum : int {{ kD = {}, kBM = 64, kBN = 128, kStages = 2, kNQ = {}, kNK = {}, kHeads = {}, kGroup = {}, kHeadsTogether = {},
               kCausal = {}, kProducerRegisters = 24, kConsumerRegisters = 240 }};
  static constexpr __device__ float Scale() {{ return {:a}f; }}
}};
extern "C" __global__ void __launch_bounds__(256) attention_bwd_prepare(const unsigned short* __restrict__ out,
    const unsigned short* __restrict__ dout, const float* __restrict__ lse, float* __restrict__ lse2, float* __restrict__ delta,
    float* __restrict__ dq_accumulator) {{
  tf::AttentionBwdPrepare<Config>(out, dout, lse, lse2, delta, dq_accumulator);
}}
extern "C" __global__ void __launch_bounds__(384, 1) attention_bwd(const __grid_constant__ tf::TensorMap map_q,
    const __grid_constant__ tf::TensorMap map_k, const __grid_constant__ tf::TensorMap map_v,
    const __grid_constant__ tf::TensorMap map_do, const float* __restrict__ lse2, const float* __restrict__ delta,
    float* __restrict__ dq_accumulator, unsigned short* __restrict__ dk, unsigned short* __restrict__ dv) {{
  tf::AttentionBwdSm90<Config>(map_q, map_k, map_v, map_do, lse2, delta, dq_accumulator, dk, dv);
}}
extern "C" __global__ void __launch_bounds__(256) attention_bwd_finish(const float* __restrict__ dq_accumulator,
    unsigned short* __restrict__ dq) {{
  tf::AttentionBwdFinish<Config>(dq_accumulator, dq);
}}
)",
                                element, p.d, p.nq, p.nk, p.heads, p.group, p.heads_together, p.causal ? 1 : 0,
                                static_cast<float>(p.scale));
  CudaKernelSource source;
  source.function = out;
  source.includes = {"attention_bwd_sm90.cuh"};
  return CudaTranslationUnit({source});
}

Status RunAttentionBackward(const CudaDevice& gpu, NvrtcCompiler& nvrtc, const AttentionBackwardProblem& p,
                            const AttentionBackwardPointers& pointers, CUstream stream) {
  RETURN_IF_ERROR(CheckAttentionBackward(p));
  ASSIGN_OR_RETURN(LoadedKernels k, Load(gpu, nvrtc, AttentionBackwardSource(p)));
  // The launches' buffers by number: 0 q, 1 k, 2 v, 3 out, 4 dout, 5 lse, 6 lse2, 7 delta,
  // 8 the dQ accumulator, 9 dq, 10 dk, 11 dv.
  const int64_t padded_rows = static_cast<int64_t>(p.heads) * p.QueryBlocks() * 64;
  const std::vector<CUdeviceptr> address = {pointers.q,    pointers.k,  pointers.v,  pointers.out,
                                            pointers.dout, pointers.lse, pointers.scratch,
                                            pointers.scratch + static_cast<CUdeviceptr>(4 * padded_rows),
                                            pointers.scratch + static_cast<CUdeviceptr>(8 * padded_rows),
                                            pointers.dq,   pointers.dk,  pointers.dv};
  for (CUdeviceptr a : address)
    if (a % 16 != 0) return InvalidArgument("attention backward template: a device pointer not 16-byte aligned");
  auto buffer = [](int node) { return LaunchArg{LaunchArg::Kind::kBuffer, node, {}, 0}; };
  auto map = [](TensorMapArg m) { return LaunchArg{LaunchArg::Kind::kTensorMap, m.node, m, 0}; };
  const int kv_heads = p.heads / p.group;
  const int64_t blocks = static_cast<int64_t>(p.QueryBlocks()) * p.heads;
  LaunchSpec prepare;
  prepare.grid = {blocks, 1, 1};
  prepare.block = {256, 1, 1};
  for (int node : {3, 4, 5, 6, 7, 8}) prepare.args.push_back(buffer(node));
  LaunchSpec main;
  main.grid = {static_cast<int64_t>(p.KeyBlocks()) * kv_heads, 1, 1};
  main.block = {384, 1, 1};
  main.dynamic_shared_bytes = SharedBytes(p);
  main.args = {map(OperandMap(0, p, p.heads, p.nq, 64)), map(OperandMap(1, p, kv_heads, p.nk, 128)),
               map(OperandMap(2, p, kv_heads, p.nk, 128)), map(OperandMap(4, p, p.heads, p.nq, 64))};
  for (int node : {6, 7, 8, 10, 11}) main.args.push_back(buffer(node));
  LaunchSpec finish;
  finish.grid = {blocks, 1, 1};
  finish.block = {256, 1, 1};
  for (int node : {8, 9}) finish.args.push_back(buffer(node));
  RETURN_IF_ERROR(PrepareFunction(gpu, k.main, main, "attention_bwd"));
  RETURN_IF_ERROR(LaunchKernel(gpu, k.prepare, prepare, address, 0, stream, "attention_bwd_prepare"));
  RETURN_IF_ERROR(LaunchKernel(gpu, k.main, main, address, 0, stream, "attention_bwd"));
  return LaunchKernel(gpu, k.finish, finish, address, 0, stream, "attention_bwd_finish");
}

}  // namespace tilefuse
