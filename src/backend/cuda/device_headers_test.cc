// The device headers (tilefuse_device.cuh, tilefuse_tiles.cuh) keep to namespace tf: code
// outside it sees CUDA's and the C library's names as they are, and a kernel may include
// the toolkit's half-type headers beside ours. Needs NVRTC, not a GPU.
#include <gtest/gtest.h>

#include <filesystem>

#include "backend/cuda/nvrtc_compiler.h"
#include "codegen/cuda/cuda_emitter.h"

namespace tilefuse {
namespace {

std::string TestCacheDir() { return (std::filesystem::temp_directory_path() / "tilefuse_test_cache").string(); }

// `kernels` in namespace tf after our headers, as generated code is (CudaTranslationUnit),
// with `before` ahead of the headers and `after` at global scope behind them.
std::string Source(const std::string& before, const std::string& kernels, const std::string& after) {
  CudaKernelSource k;
  k.function = kernels;
  return before + CudaTranslationUnit({k}) + after;
}

// Global scope keeps CUDA's overloads (exp of a float is expf, fmod of doubles is the
// library's) and may declare the fixed-width names as the host's LP64 <cstdint> does,
// which a global `typedef long long int64_t` of ours would reject.
TEST(NvrtcDeviceHeadersTest, GlobalNamespaceKeepsCudasNames) {
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestCacheDir());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available, device headers not compiled: " << nvrtc.status().ToString();
  const std::string global = R"(
typedef long int64_t;
typedef unsigned long uint64_t;
__device__ int64_t floor_mod(int64_t a, int64_t b) { return a - b * (a / b); }
extern "C" __global__ void global_scope(float* f, double* d, int64_t* i) {
  f[0] = exp(f[1]) + fabs(f[2]);
  d[0] = fmod(d[1], d[2]);
  i[0] = floor_mod(i[1], i[2]);
}
)";
  const std::string in_tf = R"(
extern "C" __global__ void in_tf(const uint16_t* h, float* f, int64_t* i) {
  f[0] = exp(tf_cvt_bf16(h[0])) + float(INFINITY);
  i[0] = floor_mod(i[1], i[2]) + fmod(i[1], i[2]);
}
)";
  auto cubin = nvrtc->Compile(Source("", in_tf, global), "sm_90a");
  ASSERT_TRUE(cubin.ok()) << cubin.status().ToString();
}

// <cuda_bf16.h> and <cuda_fp16.h> (from the toolkit's include path) beside our headers:
// __nv_bfloat16 and __half in a kernel that also uses tf's helpers, and tf's fixed-width
// types the very types of libcu++'s.
TEST(NvrtcDeviceHeadersTest, ToolkitHalfTypesCompileBesideOurHeaders) {
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestCacheDir());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available, device headers not compiled: " << nvrtc.status().ToString();
  if (nvrtc->toolkit_include().empty()) GTEST_SKIP() << "NVRTC was found without the toolkit's headers; <cuda_bf16.h> not tried";
  const std::string includes = "#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n#include <cuda/std/cstdint>\n";
  const std::string kernels = R"(
static_assert(sizeof(__nv_bfloat16) == sizeof(uint16_t), "bf16 travels as 16 bits");
__device__ cuda::std::int64_t* const same_int64 = static_cast<int64_t*>(nullptr);
__device__ cuda::std::uint16_t* const same_uint16 = static_cast<uint16_t*>(nullptr);
extern "C" __global__ void half_types(const __nv_bfloat16* a, const __half* b, __nv_bfloat16* out, uint16_t* bits) {
  const __nv_bfloat16 x = a[threadIdx.x];
  const float y = exp(__bfloat162float(x)) + __half2float(b[threadIdx.x]);
  out[threadIdx.x] = __hmul(x, __float2bfloat16_rn(y));
  bits[threadIdx.x] = tf_pack_bf16(tf_cvt_bf16(__bfloat16_as_ushort(x)) * y);
}
)";
  auto cubin = nvrtc->Compile(Source(includes, kernels, ""), "sm_90a");
  ASSERT_TRUE(cubin.ok()) << cubin.status().ToString();
}

// The max of packed half-type pairs: max.NaN.bf16x2 / f16x2 from sm_80 on, the halves unpacked
// and packed again before it; both forms compile.
TEST(NvrtcDeviceHeadersTest, PairMaxCompilesWithAndWithoutThePairedInstruction) {
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestCacheDir());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available, device headers not compiled: " << nvrtc.status().ToString();
  const std::string kernels = R"(
extern "C" __global__ void pair_max(const uint32_t* in, uint32_t* out) {
  out[0] = tf_max_pairs_bf16(tf_lowest_pair_bf16, in[0]);
  out[1] = tf_max_pairs_f16(tf_lowest_pair_f16, in[1]);
}
)";
  for (const char* arch : {"sm_90a", "sm_75"}) {
    auto cubin = nvrtc->Compile(Source("", kernels, ""), arch);
    EXPECT_TRUE(cubin.ok()) << arch << ": " << cubin.status().ToString();
  }
}

}  // namespace
}  // namespace tilefuse
