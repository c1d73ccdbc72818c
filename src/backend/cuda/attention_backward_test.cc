// The attention backward template (codegen/cuda/device/attention_bwd_sm90.cuh): its three
// kernels compiled through NVRTC for sm_90a for each head dim and mask (CI: no GPU needed;
// ptxas's registers and spills reported), run on a GPU on odd shapes against an f64 host
// reference of dQ, dK and dV with the outputs poisoned, and (a disabled test the GPU script
// runs) timed at B4 H16 N4096 for the comparison with SDPA's backward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <random>

#include "backend/cuda/device_test_util.h"
#include "backend/cuda/kernel_launch.h"
#include "backend/cuda/nvrtc_compiler.h"
#include "codegen/cuda/cuda_emitter.h"
#include "tilefuse/dtype.h"

namespace tilefuse {
namespace {

struct Problem {
  int heads, nq, nk, d;
  bool causal;
  int group = 1;  // query heads per key/value head
  int heads_together = 1;  // Config::kHeadsTogether
  std::string Label() const {
    return fmt::format("{}h {}x{} d{}{}{}{}", heads, nq, nk, d, causal ? " causal" : "", group > 1 ? fmt::format(" group {}", group) : "",
                       heads_together != 1 ? fmt::format(" {} heads together", heads_together) : "");
  }
  int KvHeads() const { return heads / group; }
  double Scale() const { return 1.0 / std::sqrt(static_cast<double>(d)); }
  int MBlocks() const { return (nq + 63) / 64; }
  int KeyBlocks() const { return (nk + 127) / 128; }
};

// The three kernels on one problem's Config.
std::string Source(const Problem& p) {
  std::string out = fmt::format(R"(
struct Config {{
  using Element = tf::Bf16;
  enum : int {{ kD = {}, kBM = 64, kBN = 128, kStages = 2, kNQ = {}, kNK = {}, kHeads = {}, kGroup = {}, kHeadsTogether = {}, kCausal = {},
               kProducerRegisters = 24, kConsumerRegisters = 240 }};
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
                                p.d, p.nq, p.nk, p.heads, p.group, p.heads_together, p.causal ? 1 : 0, static_cast<float>(p.Scale()));
  CudaKernelSource source;
  source.function = out;
  source.includes = {"attention_bwd_sm90.cuh"};
  return CudaTranslationUnit({source});
}

std::string TestCacheDir() { return (std::filesystem::temp_directory_path() / "tilefuse_test_cache").string(); }

// As AttentionBwdSharedMemory lays it out, with the slack that aligns its start: K and V, the Q
// and dO rings (2 stages), two dSᵀ tiles, the consumers' dQ buffers, the statistics, barriers.
int SharedBytes(const Problem& p) {
  return 1024 + 2 * 128 * p.d * 2 + 2 * 2 * 64 * p.d * 2 + 2 * 128 * 64 * 2 + 2 * 64 * 64 * 4 + 2 * 2 * 64 * 4 + (1 + 4 * 2) * 8;
}

const Problem kCompiled[] = {{2, 256, 256, 64, false}, {2, 256, 256, 64, true}, {2, 256, 256, 128, false}, {2, 256, 256, 128, true},
                             {4, 256, 256, 128, true, 4}};

TEST(AttentionBackwardTest, KernelsCompileForSm90aWithoutSpills) {
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestCacheDir());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available, the attention backward not compiled: " << nvrtc.status().ToString();
  for (const Problem& p : kCompiled) {
    StatusOr<CubinResult> cubin = nvrtc->Compile(Source(p), "sm_90a");
    ASSERT_TRUE(cubin.ok()) << p.Label() << ": " << cubin.status().ToString();
    for (const PtxasKernelInfo& k : ParsePtxasLog(cubin->ptxas_log)) {
      if (k.name.find("attention_bwd") == std::string::npos) continue;
      std::printf("%s: %s: %d registers, %lld bytes spilled\n", p.Label().c_str(), k.name.c_str(), k.registers,
                  static_cast<long long>(k.spill_store_bytes));
      EXPECT_EQ(k.spill_store_bytes, 0) << p.Label() << " " << k.line;
    }
  }
}

// ---- the host reference, in f64 from the same bf16 inputs ----
struct Tensors {
  std::vector<uint16_t> q, k, v, out, dout;  // bf16 bits, [heads][rows][d] (k, v: key/value heads)
  std::vector<float> lse;                     // [heads][nq]
  std::vector<double> dq, dk, dv;             // the reference gradients
};

double Bf(uint16_t bits) { return static_cast<double>(BF16BitsToFloat(bits)); }

Tensors MakeProblem(const Problem& p, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto draw = [&](int heads, int rows) {
    std::vector<uint16_t> x(static_cast<size_t>(heads) * rows * p.d);
    for (uint16_t& v : x) v = FloatToBF16Bits(normal(rng));
    return x;
  };
  Tensors t;
  t.q = draw(p.heads, p.nq);
  t.k = draw(p.KvHeads(), p.nk);
  t.v = draw(p.KvHeads(), p.nk);
  t.dout = draw(p.heads, p.nq);
  t.out.resize(t.dout.size());
  t.lse.resize(static_cast<size_t>(p.heads) * p.nq);
  t.dq.assign(t.q.size(), 0.0);
  t.dk.assign(t.k.size(), 0.0);
  t.dv.assign(t.v.size(), 0.0);
  const double scale = p.Scale();
  std::vector<double> prob(p.nk), dprob(p.nk);
  for (int h = 0; h < p.heads; ++h) {
    const size_t qh = static_cast<size_t>(h) * p.nq * p.d, kh = static_cast<size_t>(h / p.group) * p.nk * p.d;
    for (int i = 0; i < p.nq; ++i) {
      double peak = -INFINITY;
      for (int j = 0; j < p.nk; ++j) {
        double s = 0;
        for (int c = 0; c < p.d; ++c) s += Bf(t.q[qh + i * p.d + c]) * Bf(t.k[kh + j * p.d + c]);
        prob[j] = p.causal && j > i ? -INFINITY : s * scale;
        peak = std::max(peak, prob[j]);
      }
      double total = 0;
      for (int j = 0; j < p.nk; ++j) total += std::exp(prob[j] - peak);
      const double lse = std::log(total) + peak;
      t.lse[static_cast<size_t>(h) * p.nq + i] = static_cast<float>(lse);
      for (int j = 0; j < p.nk; ++j) prob[j] = std::exp(prob[j] - lse);
      // O in bf16, as the forward writes it; D from it, as the kernels compute D.
      double delta = 0;
      for (int c = 0; c < p.d; ++c) {
        double o = 0;
        for (int j = 0; j < p.nk; ++j) o += prob[j] * Bf(t.v[kh + j * p.d + c]);
        t.out[qh + i * p.d + c] = FloatToBF16Bits(static_cast<float>(o));
        delta += Bf(t.out[qh + i * p.d + c]) * Bf(t.dout[qh + i * p.d + c]);
      }
      for (int j = 0; j < p.nk; ++j) {
        double dp = 0;
        for (int c = 0; c < p.d; ++c) dp += Bf(t.dout[qh + i * p.d + c]) * Bf(t.v[kh + j * p.d + c]);
        dprob[j] = prob[j] * (dp - delta);  // dS
      }
      for (int j = 0; j < p.nk; ++j)
        for (int c = 0; c < p.d; ++c) {
          t.dv[kh + j * p.d + c] += prob[j] * Bf(t.dout[qh + i * p.d + c]);
          t.dk[kh + j * p.d + c] += scale * dprob[j] * Bf(t.q[qh + i * p.d + c]);
          t.dq[qh + i * p.d + c] += scale * dprob[j] * Bf(t.k[kh + j * p.d + c]);
        }
    }
  }
  return t;
}

// ---- running the kernels ----
struct Kernels {
  const CudaDevice& gpu;
  CUmodule module = nullptr;
  CUfunction prepare = nullptr, main = nullptr, finish = nullptr;
  ~Kernels() {
    if (module) gpu.api().cuModuleUnload(module);
  }
};

TensorMapArg Map(int node, const Problem& p, int heads, int rows, int box_rows) {
  TensorMapArg map;
  map.node = node;
  map.dtype = DType::kBF16;
  map.rank = 3;
  map.dims = {p.d, rows, heads, 1, 1};
  map.strides_bytes = {static_cast<int64_t>(p.d) * 2, static_cast<int64_t>(rows) * p.d * 2, 0, 0};
  map.box = {64, box_rows, 1, 1, 1};
  return map;
}

// Buffers: 0 q, 1 k, 2 v, 3 out, 4 dout, 5 lse, 6 lse2, 7 delta, 8 dq accumulator, 9 dq, 10 dk, 11 dv.
Status Launch(const Problem& p, Kernels& run, const std::vector<CUdeviceptr>& buffers) {
  const CudaDevice& gpu = run.gpu;
  auto buffer = [](int node) { return LaunchArg{LaunchArg::Kind::kBuffer, node, {}, 0}; };
  auto map = [](TensorMapArg m) { return LaunchArg{LaunchArg::Kind::kTensorMap, m.node, m, 0}; };
  const int64_t blocks = static_cast<int64_t>(p.MBlocks()) * p.heads;
  LaunchSpec prepare;
  prepare.grid = {blocks, 1, 1};
  prepare.block = {256, 1, 1};
  for (int node : {3, 4, 5, 6, 7, 8}) prepare.args.push_back(buffer(node));
  LaunchSpec main;
  main.grid = {static_cast<int64_t>(p.KeyBlocks()) * p.KvHeads(), 1, 1};
  main.block = {384, 1, 1};
  main.dynamic_shared_bytes = SharedBytes(p);
  main.args = {map(Map(0, p, p.heads, p.nq, 64)), map(Map(1, p, p.KvHeads(), p.nk, 128)), map(Map(2, p, p.KvHeads(), p.nk, 128)),
               map(Map(4, p, p.heads, p.nq, 64))};
  for (int node : {6, 7, 8, 10, 11}) main.args.push_back(buffer(node));
  LaunchSpec finish;
  finish.grid = {blocks, 1, 1};
  finish.block = {256, 1, 1};
  for (int node : {8, 9}) finish.args.push_back(buffer(node));
  RETURN_IF_ERROR(PrepareFunction(gpu, run.main, main, "attention_bwd"));
  RETURN_IF_ERROR(LaunchKernel(gpu, run.prepare, prepare, buffers, 0, gpu.stream(), "attention_bwd_prepare"));
  RETURN_IF_ERROR(LaunchKernel(gpu, run.main, main, buffers, 0, gpu.stream(), "attention_bwd"));
  return LaunchKernel(gpu, run.finish, finish, buffers, 0, gpu.stream(), "attention_bwd_finish");
}

Status Load(NvrtcCompiler& nvrtc, const Problem& p, Kernels& run) {
  ASSIGN_OR_RETURN(CubinResult cubin, nvrtc.Compile(Source(p), "sm_90a"));
  RETURN_IF_ERROR(LoadFunction(run.gpu, cubin, "attention_bwd_prepare", run.module, run.prepare));
  RETURN_IF_ERROR(run.gpu.Check(run.gpu.api().cuModuleGetFunction(&run.main, run.module, "attention_bwd"), "attention_bwd"));
  return run.gpu.Check(run.gpu.api().cuModuleGetFunction(&run.finish, run.module, "attention_bwd_finish"), "attention_bwd_finish");
}

// Device buffers for a problem: the inputs copied in, the outputs poisoned (bf16 NaN).
Status Allocate(const CudaDevice& gpu, const Problem& p, const Tensors* t, DeviceBuffers& buffers) {
  const size_t q_bytes = static_cast<size_t>(p.heads) * p.nq * p.d * 2, k_bytes = static_cast<size_t>(p.KvHeads()) * p.nk * p.d * 2;
  const size_t pad = static_cast<size_t>(p.heads) * p.MBlocks() * 64;
  const size_t sizes[] = {q_bytes,   k_bytes,        k_bytes,          q_bytes,          q_bytes, static_cast<size_t>(p.heads) * p.nq * 4,
                          pad * 4,   pad * 4,        pad * p.d * 4,    q_bytes,          k_bytes, k_bytes};
  buffers.pointers.assign(12, 0);
  for (int i = 0; i < 12; ++i) RETURN_IF_ERROR(gpu.Check(gpu.api().cuMemAlloc(&buffers.pointers[i], sizes[i]), "cuMemAlloc"));
  if (t != nullptr) {
    const void* host[] = {t->q.data(), t->k.data(), t->v.data(), t->out.data(), t->dout.data(), t->lse.data()};
    for (int i = 0; i < 6; ++i)
      RETURN_IF_ERROR(gpu.Check(gpu.api().cuMemcpyHtoD(buffers.pointers[i], host[i], sizes[i]), "cuMemcpyHtoD"));
  } else {
    for (int i = 0; i < 6; ++i) RETURN_IF_ERROR(gpu.Check(gpu.api().cuMemsetD8Async(buffers.pointers[i], 0x3c, sizes[i], gpu.stream()), "memset"));
  }
  for (int i = 6; i < 12; ++i)
    RETURN_IF_ERROR(gpu.Check(gpu.api().cuMemsetD8Async(buffers.pointers[i], 0xff, sizes[i], gpu.stream()), "cuMemsetD8Async"));
  return Status::Ok();
}

// Largest error over the largest reference value; NaN or an unwritten (NaN-poisoned) element fails.
double RelativeError(const std::vector<uint16_t>& got, const std::vector<double>& want) {
  double worst = 0, peak = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = Bf(got[i]);
    if (!std::isfinite(g)) return INFINITY;
    worst = std::max(worst, std::abs(g - want[i]));
    peak = std::max(peak, std::abs(want[i]));
  }
  return worst / peak;
}

const Problem kChecked[] = {{3, 200, 200, 64, false},   {3, 200, 200, 64, true},      {3, 200, 200, 128, false},
                            {3, 200, 200, 128, true},   {2, 130, 300, 128, false},    {2, 300, 130, 64, true},
                            {6, 200, 200, 64, true, 3}, {4, 150, 260, 128, false, 2},   {5, 200, 400, 64, true, 1, 2}};

TEST(AttentionBackwardTest, GradientsMatchTheReferenceOnOddShapes) {
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestCacheDir());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available: " << nvrtc.status().ToString();
  StatusOr<CudaDevice*> device = CudaDevice::Get();
  if (!device.ok()) GTEST_SKIP() << "no GPU: " << device.status().ToString() << "; the attention backward not run";
  const CudaDevice& gpu = **device;
  ASSERT_TRUE(gpu.MakeCurrent().ok());
  for (const Problem& p : kChecked) {
    SCOPED_TRACE(p.Label());
    const Tensors t = MakeProblem(p, 7 + p.d + p.nq);
    Kernels run{gpu};
    Status loaded = Load(*nvrtc, p, run);
    ASSERT_TRUE(loaded.ok()) << loaded.ToString();
    DeviceBuffers buffers{&gpu, {}};
    Status ready = Allocate(gpu, p, &t, buffers);
    ASSERT_TRUE(ready.ok()) << ready.ToString();
    Status launched = Launch(p, run, buffers.pointers);
    ASSERT_TRUE(launched.ok()) << launched.ToString();
    ASSERT_TRUE(gpu.Check(gpu.api().cuStreamSynchronize(gpu.stream()), "attention backward").ok());
    std::vector<uint16_t> dq(t.q.size()), dk(t.k.size()), dv(t.v.size());
    ASSERT_EQ(gpu.api().cuMemcpyDtoH(dq.data(), buffers.pointers[9], dq.size() * 2), CUDA_SUCCESS);
    ASSERT_EQ(gpu.api().cuMemcpyDtoH(dk.data(), buffers.pointers[10], dk.size() * 2), CUDA_SUCCESS);
    ASSERT_EQ(gpu.api().cuMemcpyDtoH(dv.data(), buffers.pointers[11], dv.size() * 2), CUDA_SUCCESS);
    // P and dS are rounded to bf16 for the products (as FlashAttention's): about 1% of the
    // gradients' scale; a wrong element, mask or block is of the scale's order.
    const double errors[] = {RelativeError(dq, t.dq), RelativeError(dk, t.dk), RelativeError(dv, t.dv)};
    std::printf("%s: dQ %.4f, dK %.4f, dV %.4f of their scale\n", p.Label().c_str(), errors[0], errors[1], errors[2]);
    EXPECT_LT(errors[0], 0.03) << "dQ";
    EXPECT_LT(errors[1], 0.03) << "dK";
    EXPECT_LT(errors[2], 0.03) << "dV";
  }
}

// B4 H16 N4096, as issue 46 measures SDPA's backward, and the training steps' B8 H12 N512
// (bench/attention_backward_peers.py times PyTorch's at the same sizes). FLOPs: 2.5 × the forward's 4·N²·d per head (five products
// of N²·d against the forward's two), halved when causal, as FlashAttention counts them.
TEST(AttentionBackwardTest, DISABLED_Speed) {
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestCacheDir());
  ASSERT_TRUE(nvrtc.ok()) << nvrtc.status().ToString();
  StatusOr<CudaDevice*> device = CudaDevice::Get();
  if (!device.ok()) GTEST_SKIP() << "no GPU: " << device.status().ToString();
  const CudaDevice& gpu = **device;
  const CudaDriverApi& api = gpu.api();
  ASSERT_TRUE(gpu.MakeCurrent().ok());
  for (const Problem& p : {Problem{64, 4096, 4096, 64, false}, Problem{64, 4096, 4096, 64, true}, Problem{64, 4096, 4096, 128, false},
                           Problem{64, 4096, 4096, 128, true}, Problem{64, 4096, 4096, 128, true, 1, 8},
                           Problem{64, 4096, 4096, 128, true, 1, 0}, Problem{64, 4096, 4096, 64, true, 1, 8},
                           Problem{64, 4096, 4096, 128, true, 4},
                           // The training steps' own sizes (bench/torch_training.py, 8x512): GPT-2
                           // small's 12 heads, the LLaMA-style model's 12 over 4 KV heads, d64, causal.
                           Problem{96, 512, 512, 64, true}, Problem{96, 512, 512, 64, true, 3}, Problem{96, 512, 512, 64, true, 1, 8}}) {
    Kernels run{gpu};
    Status loaded = Load(*nvrtc, p, run);
    ASSERT_TRUE(loaded.ok()) << loaded.ToString();
    DeviceBuffers buffers{&gpu, {}};
    Status ready = Allocate(gpu, p, nullptr, buffers);
    ASSERT_TRUE(ready.ok()) << ready.ToString();
    CUevent start, stop;
    ASSERT_EQ(api.cuEventCreate(&start, 0), CUDA_SUCCESS);
    ASSERT_EQ(api.cuEventCreate(&stop, 0), CUDA_SUCCESS);
    std::vector<float> times;
    for (int i = 0; i < 13; ++i) {
      api.cuEventRecord(start, gpu.stream());
      Status launched = Launch(p, run, buffers.pointers);
      ASSERT_TRUE(launched.ok()) << launched.ToString();
      api.cuEventRecord(stop, gpu.stream());
      ASSERT_EQ(api.cuEventSynchronize(stop), CUDA_SUCCESS);
      float ms = 0;
      api.cuEventElapsedTime(&ms, start, stop);
      if (i >= 3) times.push_back(ms);
    }
    api.cuEventDestroy(start);
    api.cuEventDestroy(stop);
    std::sort(times.begin(), times.end());
    const double ms = times[times.size() / 2];
    const double flops = 2.5 * 4.0 * p.heads * static_cast<double>(p.nq) * p.nk * p.d * (p.causal ? 0.5 : 1.0);
    const int per_batch = p.heads == 96 ? 12 : 16;  // B8 H12 or B4 H16
    std::printf("attention backward B%d H%d N%d d%d %s%s%s: %.3f ms, %.0f TF/s\n", p.heads / per_batch, per_batch, p.nq, p.d,
                p.causal ? "causal" : "full", p.group > 1 ? fmt::format(" GQA {} KV heads", per_batch / p.group).c_str() : "",
                p.heads_together != 1 ? fmt::format(", {} heads together", p.heads_together).c_str() : "", ms, flops / ms / 1e9);
  }
}

}  // namespace
}  // namespace tilefuse
