// The launch path's Hopper features together (LaunchSpec through kernel_launch.cc): a
// kernel taking a TMA descriptor as a __grid_constant__ parameter, launched in clusters of
// two CTAs with 100 KB of dynamic shared memory. Each CTA loads its 64 KB tile by TMA into
// the upper part of its shared memory (past 48 KB), then reads its peer's tile through
// distributed shared memory, and writes both:
//
//   x  [kTiles * kTileRows][kCols]           tile b = rows b*kTileRows ..
//   y  [2][kTiles * kTileRows][kCols]        y[0] tile b = x tile b      (its own, by TMA)
//                                            y[1] tile b = x tile b ^ 1  (its peer's, by DSMEM)
//
// Compiling the kernel needs NVRTC only (CI); launching it needs a Hopper GPU, and is
// skipped with a message without one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>

#include "backend/cuda/device_test_util.h"
#include "backend/cuda/kernel_launch.h"
#include "backend/cuda/nvrtc_compiler.h"
#include "codegen/cuda/cuda_emitter.h"

namespace tilefuse {
namespace {

constexpr int kCols = 64, kTileRows = 256, kTiles = 4;
constexpr int64_t kTileOffset = 32 * 1024, kSharedBytes = 100 * 1024;
constexpr int64_t kElements = int64_t{kTiles} * kTileRows * kCols;

// The cluster instructions are inline PTX: the tile library has no cluster helpers yet.
constexpr char kKernel[] = R"(
__device__ __forceinline__ unsigned ClusterRank() {
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}
// Every thread of the cluster; shared-memory writes before it are visible to all CTAs after.
__device__ __forceinline__ void ClusterSync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// The address of `p` in CTA `rank`'s shared memory, as ld.shared::cluster takes it.
__device__ __forceinline__ unsigned PeerAddress(const void* p, unsigned rank) {
  unsigned address;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(address) : "r"(tf::SharedAddress(p)), "r"(rank));
  return address;
}
__device__ __forceinline__ float LoadPeer(unsigned address) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(address) : "memory");
  return v;
}

extern "C" __global__ void __launch_bounds__(256, 1) tma_cluster_copy(const __grid_constant__ tf::TensorMap map_x, float* __restrict__ y) {
  extern __shared__ __align__(1024) unsigned char shared[];
  tf::Barrier& loaded = *reinterpret_cast<tf::Barrier*>(shared);
  float* tile = reinterpret_cast<float*>(shared + kTileOffset);
  if (threadIdx.x == 0) {
    loaded.Init(1);
    tf::FenceBarrierInit();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    loaded.ArriveExpectingBytes(kTileRows * kCols * sizeof(float));
    tf::TmaLoad3d(tile, map_x, 0, blockIdx.x * kTileRows, 0, loaded);
  }
  loaded.Wait(0);
  ClusterSync();  // both tiles have landed
  const unsigned peer_tile = PeerAddress(tile, ClusterRank() ^ 1);
  float* own_out = y + (long long)blockIdx.x * kTileRows * kCols;
  float* peer_out = own_out + (long long)kTiles * kTileRows * kCols;
  for (int i = threadIdx.x; i < kTileRows * kCols; i += blockDim.x) {
    own_out[i] = tile[i];
    peer_out[i] = LoadPeer(peer_tile + 4u * i);
  }
  ClusterSync();  // the peer's shared memory stays until both have read it
}
)";

std::string TestCacheDir() { return (std::filesystem::temp_directory_path() / "tilefuse_test_cache").string(); }

// The kernel as generated code is compiled: one translation unit over the device headers.
StatusOr<CubinResult> CompileKernel(NvrtcCompiler& nvrtc) {
  CudaKernelSource source;
  source.function = fmt::format("constexpr int kCols = {}, kTileRows = {}, kTiles = {};\nconstexpr int kTileOffset = {};\n{}", kCols,
                                kTileRows, kTiles, kTileOffset, kKernel);
  return nvrtc.Compile(CudaTranslationUnit({source}), "sm_90a");
}

LaunchSpec ClusterLaunch() {
  LaunchSpec spec;
  spec.grid = {kTiles, 1, 1};
  spec.block = {256, 1, 1};
  spec.cluster = {2, 1, 1};
  spec.dynamic_shared_bytes = kSharedBytes;
  LaunchArg x;
  x.kind = LaunchArg::Kind::kTensorMap;
  x.map.node = 0;
  x.map.dtype = DType::kF32;
  x.map.rank = 3;
  x.map.dims = {kCols, kTiles * kTileRows, 1, 1, 1};
  x.map.strides_bytes = {kCols * 4, kElements * 4, 0, 0};
  x.map.box = {kCols, kTileRows, 1, 1, 1};
  x.map.swizzle_128b = false;
  LaunchArg y;
  y.node = 1;
  spec.args = {x, y};
  return spec;
}

TEST(TmaClusterLaunchTest, KernelCompilesForSm90a) {
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestCacheDir());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available, the TMA cluster kernel not compiled: " << nvrtc.status().ToString();
  StatusOr<CubinResult> cubin = CompileKernel(*nvrtc);
  ASSERT_TRUE(cubin.ok()) << cubin.status().ToString();
  std::vector<PtxasKernelInfo> report = ParsePtxasLog(cubin->ptxas_log);
  if (cubin->from_cache && report.empty()) return;  // an older entry without its report
  ASSERT_EQ(report.size(), 1u) << cubin->ptxas_log;
  EXPECT_EQ(report[0].name, "tma_cluster_copy");
  EXPECT_EQ(report[0].spill_store_bytes, 0) << report[0].line;
}


// Every element of both halves of y as the header's diagram says; y starts as NaN (all
// bits set), so an element nobody wrote fails too.
TEST(TmaClusterLaunchTest, TileArrivesByTmaAndCrossesTheClusterThroughDistributedSharedMemory) {
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestCacheDir());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available: " << nvrtc.status().ToString();
  StatusOr<CudaDevice*> device = CudaDevice::Get();
  if (!device.ok()) GTEST_SKIP() << "no GPU: " << device.status().ToString() << "; the TMA + cluster + 100 KB launch not run";
  if ((*device)->compute_major() < 9) GTEST_SKIP() << (*device)->name() << " is not Hopper: no TMA or clusters";
  const CudaDevice& gpu = **device;
  const CudaDriverApi& api = gpu.api();
  ASSERT_TRUE(gpu.MakeCurrent().ok());
  StatusOr<CubinResult> cubin = CompileKernel(*nvrtc);
  ASSERT_TRUE(cubin.ok()) << cubin.status().ToString();
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  Status loaded = LoadFunction(gpu, *cubin, "tma_cluster_copy", module, function);
  ASSERT_TRUE(loaded.ok()) << loaded.ToString();

  std::vector<float> x(kElements);
  for (int64_t i = 0; i < kElements; ++i) x[i] = static_cast<float>(i) * 0.5f + 1.0f;
  DeviceBuffers buffers{&gpu, {0, 0}};
  ASSERT_EQ(api.cuMemAlloc(&buffers.pointers[0], kElements * 4), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemAlloc(&buffers.pointers[1], 2 * kElements * 4), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemcpyHtoD(buffers.pointers[0], x.data(), kElements * 4), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemsetD8Async(buffers.pointers[1], 0xFF, 2 * kElements * 4, gpu.stream()), CUDA_SUCCESS);

  const LaunchSpec spec = ClusterLaunch();
  Status prepared = PrepareFunction(gpu, function, spec, "tma_cluster_copy");
  ASSERT_TRUE(prepared.ok()) << prepared.ToString();
  Status launched = LaunchKernel(gpu, function, spec, buffers.pointers, 0, gpu.stream(), "tma_cluster_copy");
  ASSERT_TRUE(launched.ok()) << launched.ToString();
  ASSERT_TRUE(gpu.Check(api.cuStreamSynchronize(gpu.stream()), "tma_cluster_copy").ok());
  std::vector<float> y(2 * kElements);
  ASSERT_EQ(api.cuMemcpyDtoH(y.data(), buffers.pointers[1], y.size() * 4), CUDA_SUCCESS);
  api.cuModuleUnload(module);

  const int64_t tile_elements = int64_t{kTileRows} * kCols;
  int64_t wrong = 0;
  for (int64_t i = 0; i < kElements; ++i) {
    const int64_t peer = (((i / tile_elements) ^ 1) * tile_elements) + i % tile_elements;
    if (std::memcmp(&y[i], &x[i], 4) != 0 && wrong++ < 5) ADD_FAILURE() << "own tile, element " << i << ": " << y[i] << " != " << x[i];
    if (std::memcmp(&y[kElements + i], &x[peer], 4) != 0 && wrong++ < 5)
      ADD_FAILURE() << "peer tile, element " << i << ": " << y[kElements + i] << " != " << x[peer];
  }
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace tilefuse
