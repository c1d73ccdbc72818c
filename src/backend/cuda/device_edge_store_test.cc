// The GEMM template's store of a tile's row edges where rows are not 16-byte aligned
// (GemmEdgeColumns, GemmStoreEdge in gemm_sm90_epilogue.cuh): for every lead (0..7 elements to
// the row's next 16-byte boundary), every count of the tile's valid columns up to 200 and both
// edges, one thread writes its edge into a poisoned row placed at that lead; the host checks
// that exactly the edge's columns were written, with their values (the columns between the
// edges being whole 16-byte units on the row's grid). Compiling needs NVRTC only (CI);
// running needs a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fmt/format.h>

#include "backend/cuda/device_test_util.h"

namespace tilefuse {
namespace {

constexpr int kMaxValid = 200;
constexpr int kRowElements = 224;  // a multiple of 8: every row starts on a 16-byte boundary
constexpr int kCases = 8 * kMaxValid * 2;
constexpr uint16_t kPoison = 0xFFFF;

// Case i: edge i % 2 (1: the tail), lead i / 2 % 8, valid i / 16 + 1. Its row's element 8 +
// (8 - lead) % 8 is the tile's column 0, so that column `lead` is the first on a 16-byte
// boundary. Column x is written as 1000 + x.
constexpr char kKernel[] = R"(
#include "gemm_sm90.cuh"
extern "C" __global__ void __launch_bounds__(256) edges(unsigned short* __restrict__ rows, long long n) {
  for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const bool tail = i % 2;
    const int lead = i / 2 % 8, valid = i / 16 + 1;
    unsigned short* out = rows + i * 224 + 8 + (8 - lead) % 8;
    int col = 0, count = 0;
    tf::GemmEdgeColumns(lead, valid, tail, col, count);
    tf::GemmStoreEdge(out, col, count, [](int x) { return (unsigned short)(1000 + x); });
  }
}
)";

TEST(DeviceEdgeStoreTest, KernelCompilesForSm90a) {
  const CompiledTestKernel compiled = CompileTestKernelForSm90a(kKernel);
  if (!compiled.skip.empty()) GTEST_SKIP() << compiled.skip << "; the edge-store kernel not compiled";
  ASSERT_TRUE(compiled.status.ok()) << compiled.status.ToString();
}

TEST(DeviceEdgeStoreTest, EdgesWriteExactlyTheirColumns) {
  LoadedTestKernel kernel;
  LoadTestKernel(kKernel, "edges", kernel);
  if (!kernel.skip.empty()) GTEST_SKIP() << kernel.skip << "; the tile edges' stores not run";
  ASSERT_TRUE(kernel.status.ok()) << kernel.status.ToString();
  const CudaDevice& gpu = *kernel.gpu;
  const CudaDriverApi& api = gpu.api();
  std::vector<uint16_t> rows(static_cast<size_t>(kCases) * kRowElements, kPoison);
  DeviceBuffers buffers{&gpu, {0}};
  ASSERT_EQ(api.cuMemAlloc(&buffers.pointers[0], rows.size() * 2), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemcpyHtoD(buffers.pointers[0], rows.data(), rows.size() * 2), CUDA_SUCCESS);
  Status ran = LaunchOverElements(gpu, kernel.function, buffers.pointers, kCases, 32, "edges");
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  ASSERT_EQ(api.cuMemcpyDtoH(rows.data(), buffers.pointers[0], rows.size() * 2), CUDA_SUCCESS);
  int wrong = 0;
  for (int lead = 0; lead < 8; ++lead)
    for (int valid = 1; valid <= kMaxValid; ++valid) {
      // The columns in whole units of the row's 16-byte grid, [lead + 8j, lead + 8j + 8) inside
      // [0, valid); the head is what precedes them (or the whole row where there are none), the
      // tail what follows.
      const int units = valid > lead ? (valid - lead) / 8 : 0;
      const int head_end = std::min(lead, valid), tail_begin = units > 0 ? lead + 8 * units : head_end;
      for (int tail = 0; tail < 2; ++tail) {
        const int i = (valid - 1) * 16 + lead * 2 + tail;
        const uint16_t* row = rows.data() + static_cast<size_t>(i) * kRowElements;
        const int column0 = 8 + (8 - lead) % 8;
        const int begin = tail ? tail_begin : 0, end = tail ? valid : head_end;
        for (int e = 0; e < kRowElements; ++e) {
          const int x = e - column0;
          const uint16_t expected = x >= begin && x < end ? static_cast<uint16_t>(1000 + x) : kPoison;
          if (row[e] != expected && wrong++ < 10)
            ADD_FAILURE() << fmt::format("lead {}, valid {}, {}: column {} holds {:#x} where {:#x} was expected", lead, valid,
                                         tail ? "tail" : "head", x, row[e], expected);
        }
      }
    }
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace tilefuse
