#include "backend/cuda/cublaslt_matmul.h"

#include <cuda.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/check.h"
#include "testing/tensor_compare.h"
#include "tilefuse/tensor.h"

namespace tilefuse {
namespace {

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Sets an environment variable for one scope and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(LtMatmulLoaderTest, MissingLibraryNamesWhatItTried) {
  ScopedEnv env("TILEFUSE_CUBLASLT", "/nonexistent/libcublasLt.so.13");
  StatusOr<std::unique_ptr<LtMatmul>> lt = LtMatmul::Create({});
  ASSERT_FALSE(lt.ok());
  const std::string message = lt.status().ToString();
  EXPECT_EQ(lt.status().code(), StatusCode::kNotFound) << message;
  EXPECT_TRUE(Contains(message, "cuBLASLt not found")) << message;
  EXPECT_TRUE(Contains(message, "/nonexistent/libcublasLt.so.13")) << message;
  EXPECT_TRUE(Contains(message, "TILEFUSE_CUBLASLT")) << message;
}

TEST(LtMatmulLoaderTest, LibraryWithoutCublasLtSymbolsIsRejected) {
  ScopedEnv env("TILEFUSE_CUBLASLT", "libm.so.6");  // loads, but is not cuBLASLt
  StatusOr<std::unique_ptr<LtMatmul>> lt = LtMatmul::Create({});
  ASSERT_FALSE(lt.ok());
  EXPECT_TRUE(Contains(lt.status().message(), "cublasLtCreate")) << lt.status().ToString();
}

TEST(LtMatmulProblemTest, DescriptionNamesShapeAndEpilogue) {
  LtMatmulProblem problem{.dtype = DType::kBF16, .batch = 4, .m = 64, .n = 32, .k = 128, .trans_b = true,
                          .batch_stride_a = 0, .batch_stride_b = 4096, .batch_stride_d = 2048,
                          .epilogue = LtEpilogue::kBiasRelu};
  EXPECT_EQ(DescribeLtMatmulProblem(problem),
            "bf16 batch 4 [64x128]·[32x128]ᵀ strides a=0 b=4096 d=2048 epilogue bias_relu");
  LtMatmulProblem tf32{.dtype = DType::kF32, .m = 8, .n = 8, .k = 8, .tf32 = true};
  EXPECT_EQ(DescribeLtMatmulProblem(tf32), "f32 (tf32) batch 1 [8x8]·[8x8] strides a=0 b=0 d=0 epilogue none");
}

// Device buffers through the driver API, resolved with dlsym here so that this test
// depends on nothing but libcuda. Frees what it allocated.
class TestGpu {
 public:
  // nullptr and `why_not` when there is no driver or no device.
  static std::unique_ptr<TestGpu> Open(std::string& why_not) {
    void* libcuda = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!libcuda) return why_not = "no libcuda.so.1 (no NVIDIA driver)", nullptr;
    auto gpu = std::unique_ptr<TestGpu>(new TestGpu());
    bool resolved = gpu->Resolve(libcuda, "cuInit", gpu->init_) && gpu->Resolve(libcuda, "cuDeviceGetCount", gpu->count_) &&
                    gpu->Resolve(libcuda, "cuDeviceGet", gpu->get_) &&
                    gpu->Resolve(libcuda, "cuDevicePrimaryCtxRetain", gpu->retain_) &&
                    gpu->Resolve(libcuda, "cuCtxSetCurrent", gpu->set_current_) &&
                    gpu->Resolve(libcuda, "cuMemAlloc_v2", gpu->alloc_) && gpu->Resolve(libcuda, "cuMemFree_v2", gpu->free_) &&
                    gpu->Resolve(libcuda, "cuMemcpyHtoD_v2", gpu->to_device_) &&
                    gpu->Resolve(libcuda, "cuMemcpyDtoH_v2", gpu->to_host_) &&
                    gpu->Resolve(libcuda, "cuCtxSynchronize", gpu->synchronize_);
    if (!resolved) return why_not = "libcuda.so.1 lacks a driver API entry point", nullptr;
    int devices = 0;
    if (gpu->init_(0) != CUDA_SUCCESS || gpu->count_(&devices) != CUDA_SUCCESS || devices == 0) {
      return why_not = "cuInit failed or no CUDA device", nullptr;
    }
    CUdevice device = 0;
    CUcontext context = nullptr;
    if (gpu->get_(&device, 0) != CUDA_SUCCESS || gpu->retain_(&context, device) != CUDA_SUCCESS ||
        gpu->set_current_(context) != CUDA_SUCCESS) {
      return why_not = "cannot make device 0's primary context current", nullptr;
    }
    return gpu;
  }

  ~TestGpu() {
    for (CUdeviceptr buffer : buffers_) free_(buffer);
  }

  uint64_t Allocate(size_t bytes) {
    CUdeviceptr buffer = 0;
    TF_CHECK(alloc_(&buffer, bytes) == CUDA_SUCCESS);
    buffers_.push_back(buffer);
    return buffer;
  }
  // `offset_bytes` past a fresh allocation, to test operands that are less than 256-byte aligned.
  uint64_t Upload(const Tensor& tensor, size_t offset_bytes = 0) {
    uint64_t buffer = Allocate(tensor.num_bytes() + offset_bytes) + offset_bytes;
    TF_CHECK(to_device_(buffer, tensor.data(), tensor.num_bytes()) == CUDA_SUCCESS);
    return buffer;
  }
  void Download(uint64_t buffer, Tensor& tensor) {
    TF_CHECK(synchronize_() == CUDA_SUCCESS);
    TF_CHECK(to_host_(tensor.data(), buffer, tensor.num_bytes()) == CUDA_SUCCESS);
  }

 private:
  TestGpu() = default;
  template <typename Function>
  static bool Resolve(void* library, const char* name, Function& function) {
    function = reinterpret_cast<Function>(::dlsym(library, name));
    return function != nullptr;
  }

  CUresult (*init_)(unsigned) = nullptr;
  CUresult (*count_)(int*) = nullptr;
  CUresult (*get_)(CUdevice*, int) = nullptr;
  CUresult (*retain_)(CUcontext*, CUdevice) = nullptr;
  CUresult (*set_current_)(CUcontext) = nullptr;
  CUresult (*alloc_)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*free_)(CUdeviceptr) = nullptr;
  CUresult (*to_device_)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*to_host_)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*synchronize_)() = nullptr;
  std::vector<CUdeviceptr> buffers_;
};

double GeluTanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
double GeluErf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

// One product on random inputs. broadcast_a / broadcast_b store one matrix for every
// batch entry (batch stride 0).
struct GpuCase {
  const char* name;
  DType dtype;
  int64_t batch, m, n, k;
  bool trans_a = false, trans_b = false;
  bool broadcast_a = false, broadcast_b = false;
  LtEpilogue epilogue = LtEpilogue::kNone;
  bool misaligned = false;  // every operand one element past a 256-byte boundary
};

struct GpuInputs {
  LtMatmulProblem problem;
  Tensor a, b, bias;
  size_t offset_bytes = 0;
};

GpuInputs MakeInputs(const GpuCase& c, uint64_t seed) {
  GpuInputs in;
  in.problem = LtMatmulProblem{.dtype = c.dtype, .batch = c.batch, .m = c.m, .n = c.n, .k = c.k,
                               .trans_a = c.trans_a, .trans_b = c.trans_b,
                               .batch_stride_a = c.broadcast_a ? 0 : c.m * c.k,
                               .batch_stride_b = c.broadcast_b ? 0 : c.k * c.n,
                               .batch_stride_d = c.m * c.n, .epilogue = c.epilogue};
  Shape a_shape = c.trans_a ? Shape{c.k, c.m} : Shape{c.m, c.k};
  Shape b_shape = c.trans_b ? Shape{c.n, c.k} : Shape{c.k, c.n};
  a_shape.insert(a_shape.begin(), c.broadcast_a ? 1 : c.batch);
  b_shape.insert(b_shape.begin(), c.broadcast_b ? 1 : c.batch);
  in.a = Tensor::Random(c.dtype, a_shape, seed);
  in.b = Tensor::Random(c.dtype, b_shape, seed + 1);
  in.bias = Tensor::Random(c.dtype, {c.n}, seed + 2);
  in.offset_bytes = c.misaligned ? DTypeSize(c.dtype) : 0;
  return in;
}

// The product in f64 from the (already rounded) inputs, the epilogue applied, then
// rounded once to the dtype.
Tensor Reference(const GpuInputs& in, double (*gelu)(double)) {
  const LtMatmulProblem& p = in.problem;
  Tensor d(p.dtype, {p.batch, p.m, p.n});
  for (int64_t batch = 0; batch < p.batch; ++batch) {
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < p.k; ++l) {
          double a = in.a.GetDouble(batch * p.batch_stride_a + (p.trans_a ? l * p.m + i : i * p.k + l));
          double b = in.b.GetDouble(batch * p.batch_stride_b + (p.trans_b ? j * p.k + l : l * p.n + j));
          sum += a * b;
        }
        if (LtEpilogueHasBias(p.epilogue)) sum += in.bias.GetDouble(j);
        if (p.epilogue == LtEpilogue::kRelu || p.epilogue == LtEpilogue::kBiasRelu) sum = std::max(sum, 0.0);
        if (p.epilogue == LtEpilogue::kGelu || p.epilogue == LtEpilogue::kBiasGelu) sum = gelu(sum);
        d.SetDouble((batch * p.m + i) * p.n + j, sum);
      }
    }
  }
  return d;
}

// f32 must be exact f32 (TF32 would miss by ~1e-3); half types round their output once.
Tolerance GpuTolerance(DType dtype) {
  if (dtype == DType::kF32) return {.rtol = 1e-5, .atol = 1e-5};
  if (dtype == DType::kF16) return {.rtol = 2e-3, .atol = 1e-3};
  return {.rtol = 1e-2, .atol = 2e-3};
}

class LtMatmulGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why_not;
    gpu_ = TestGpu::Open(why_not);
    if (!gpu_) GTEST_SKIP() << "no GPU: " << why_not << "; cuBLASLt matmul tests skipped";
    StatusOr<std::unique_ptr<LtMatmul>> lt = LtMatmul::Create();
    ASSERT_TRUE(lt.ok()) << lt.status().ToString();
    lt_ = std::move(lt).value();
    workspace_ = gpu_->Allocate(kWorkspaceBytes);
  }

  // Runs the case on the GPU into a poisoned D; returns D.
  Tensor RunOnGpu(const GpuInputs& in) {
    const LtMatmulProblem& p = in.problem;
    Tensor d(p.dtype, {p.batch, p.m, p.n});
    d.Poison();
    const size_t offset = in.offset_bytes;
    uint64_t d_buffer = gpu_->Upload(d, offset);
    Status status = lt_->Run(p, gpu_->Upload(in.a, offset), gpu_->Upload(in.b, offset), d_buffer,
                             gpu_->Upload(in.bias, offset), workspace_, kWorkspaceBytes, nullptr);
    EXPECT_TRUE(status.ok()) << status.ToString();
    gpu_->Download(d_buffer, d);
    return d;
  }

  static constexpr size_t kWorkspaceBytes = 32 << 20;
  std::unique_ptr<TestGpu> gpu_;
  std::unique_ptr<LtMatmul> lt_;
  uint64_t workspace_ = 0;
};

TEST_F(LtMatmulGpuTest, MatchesF64ProductWithEpilogues) {
  const GpuCase cases[] = {
      {"f32", DType::kF32, 1, 67, 45, 129},
      {"f32_transposed_bias", DType::kF32, 1, 33, 70, 64, true, true, false, false, LtEpilogue::kBias},
      {"bf16_bias_relu", DType::kBF16, 1, 128, 96, 256, false, false, false, false, LtEpilogue::kBiasRelu},
      {"f32_batched_broadcast_a_bias_relu", DType::kF32, 3, 40, 24, 56, false, false, true, false,
       LtEpilogue::kBiasRelu},
      {"bf16_batched_broadcast_b_trans_b", DType::kBF16, 4, 32, 48, 80, false, true, false, true, LtEpilogue::kRelu},
      {"f16_batched_trans_a_bias", DType::kF16, 2, 64, 40, 96, true, false, false, false, LtEpilogue::kBias},
      {"bf16_misaligned_bias_gelu", DType::kBF16, 2, 31, 17, 45, false, false, false, false, LtEpilogue::kBiasGelu,
       true},
      {"f32_misaligned_trans_a", DType::kF32, 1, 29, 33, 23, true, false, false, false, LtEpilogue::kNone, true},
  };
  uint64_t seed = 100;
  for (const GpuCase& c : cases) {
    SCOPED_TRACE(c.name);
    GpuInputs in = MakeInputs(c, seed += 10);
    Comparison result = CompareNormwise(RunOnGpu(in), Reference(in, GeluTanh), GpuTolerance(c.dtype));
    EXPECT_TRUE(result.pass) << DescribeLtMatmulProblem(in.problem) << ": " << result.reason
                             << " (max abs err " << result.max_abs_err << ")";
  }
  EXPECT_EQ(lt_->cached_plans(), std::size(cases));
  // A repeated problem reuses its plan and still computes the right thing.
  GpuInputs again = MakeInputs(cases[2], 7);
  EXPECT_TRUE(CompareNormwise(RunOnGpu(again), Reference(again, GeluTanh), GpuTolerance(DType::kBF16)).pass);
  EXPECT_EQ(lt_->cached_plans(), std::size(cases));
}

// The header promises the tanh approximation: the result matches it at f32 precision and
// misses erf GELU (inputs are O(1), where the two differ by up to ~5e-4).
TEST_F(LtMatmulGpuTest, GeluEpilogueIsTheTanhApproximation) {
  GpuInputs in = MakeInputs({"f32_bias_gelu", DType::kF32, 2, 64, 80, 16, false, false, false, false,
                             LtEpilogue::kBiasGelu}, 55);
  Tensor d = RunOnGpu(in);
  Comparison tanh_result = CompareNormwise(d, Reference(in, GeluTanh), GpuTolerance(DType::kF32));
  EXPECT_TRUE(tanh_result.pass) << tanh_result.reason << " (max abs err " << tanh_result.max_abs_err << ")";
  EXPECT_FALSE(CompareNormwise(d, Reference(in, GeluErf), GpuTolerance(DType::kF32)).pass);
}

// --precision high: TF32 tensor cores round the inputs to 10 mantissa bits. The result
// holds to f16's tolerance and misses exact f32's (K = 512 random products: TF32's
// rounding is ~1e-3 of the output's scale, exact f32's ~1e-6).
TEST_F(LtMatmulGpuTest, Tf32RoundsInputsLikeF16) {
  GpuInputs in = MakeInputs({"f32_tf32", DType::kF32, 1, 128, 128, 512}, 77);
  in.problem.tf32 = true;
  Tensor d = RunOnGpu(in);
  Comparison tf32 = CompareNormwise(d, Reference(in, GeluTanh), GpuTolerance(DType::kF16));
  EXPECT_TRUE(tf32.pass) << tf32.reason << " (max abs err " << tf32.max_abs_err << ")";
  EXPECT_FALSE(CompareNormwise(d, Reference(in, GeluTanh), {.rtol = 1e-6, .atol = 1e-6}).pass)
      << "exact f32: TF32 was not used";
}

// Operands read as views of wider values (attention's heads inside their projection's output):
// rows lda / ldb elements apart, past the row's length, batch entries one head apart within a
// row; A and B transposed or not. The reference reads the same elements by the same rule.
TEST_F(LtMatmulGpuTest, ViewsWithLeadingDimensionsAndHeadStrides) {
  const int64_t batch = 3, m = 40, n = 24, k = 32;
  uint64_t seed = 500;
  for (bool trans_a : {false, true})
    for (bool trans_b : {false, true}) {
      SCOPED_TRACE(fmt::format("trans_a {} trans_b {}", trans_a, trans_b));
      const int64_t a_rows = trans_a ? k : m, a_len = trans_a ? m : k;  // A stored [m][k] or [k][m]
      const int64_t b_rows = trans_b ? n : k, b_len = trans_b ? k : n;  // B stored [k][n] or [n][k]
      const int64_t lda = batch * a_len + 8, ldb = batch * b_len + 4;  // the heads side by side, then more
      LtMatmulProblem p{.dtype = DType::kF32, .batch = batch, .m = m, .n = n, .k = k, .trans_a = trans_a, .trans_b = trans_b,
                        .batch_stride_a = a_len, .batch_stride_b = b_len, .batch_stride_d = m * n, .lda = lda, .ldb = ldb};
      Tensor a = Tensor::Random(DType::kF32, {a_rows, lda}, seed += 10), b = Tensor::Random(DType::kF32, {b_rows, ldb}, seed + 1);
      Tensor want(DType::kF32, {batch, m, n});
      for (int64_t e = 0; e < batch; ++e)
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double sum = 0;
            for (int64_t l = 0; l < k; ++l)
              sum += a.GetDouble(e * a_len + (trans_a ? l * lda + i : i * lda + l)) *
                     b.GetDouble(e * b_len + (trans_b ? j * ldb + l : l * ldb + j));
            want.SetDouble((e * m + i) * n + j, sum);
          }
      Tensor d(DType::kF32, {batch, m, n});
      d.Poison();
      const uint64_t d_buffer = gpu_->Upload(d, 0);
      const Status status = lt_->Run(p, gpu_->Upload(a, 0), gpu_->Upload(b, 0), d_buffer, 0, workspace_, kWorkspaceBytes, nullptr);
      ASSERT_TRUE(status.ok()) << status.ToString();
      gpu_->Download(d_buffer, d);
      const Comparison result = CompareNormwise(d, want, GpuTolerance(DType::kF32));
      EXPECT_TRUE(result.pass) << DescribeLtMatmulProblem(p) << ": " << result.reason;
    }
  // A leading dimension shorter than the stored row is refused.
  LtMatmulProblem short_rows{.dtype = DType::kF32, .m = 8, .n = 8, .k = 16, .batch_stride_d = 64, .lda = 8};
  const uint64_t buffer = gpu_->Allocate(4096);
  EXPECT_EQ(lt_->Run(short_rows, buffer, buffer, buffer, 0, workspace_, kWorkspaceBytes, nullptr).code(), StatusCode::kInvalidArgument);
}

TEST_F(LtMatmulGpuTest, BadProblemsAreInvalidArguments) {
  LtMatmulProblem problem{.dtype = DType::kF32, .batch = 2, .m = 8, .n = 8, .k = 8, .batch_stride_a = 64,
                          .batch_stride_b = 64, .batch_stride_d = 0, .epilogue = LtEpilogue::kNone};
  uint64_t buffer = gpu_->Allocate(1024);
  Status overlapping = lt_->Run(problem, buffer, buffer, buffer, 0, workspace_, kWorkspaceBytes, nullptr);
  EXPECT_EQ(overlapping.code(), StatusCode::kInvalidArgument) << overlapping.ToString();
  EXPECT_TRUE(Contains(overlapping.message(), "f32 batch 2 [8x8]·[8x8]")) << overlapping.ToString();
  problem.batch_stride_d = 64;
  problem.epilogue = LtEpilogue::kBias;
  Status no_bias = lt_->Run(problem, buffer, buffer, buffer, 0, workspace_, kWorkspaceBytes, nullptr);
  EXPECT_EQ(no_bias.code(), StatusCode::kInvalidArgument) << no_bias.ToString();
  problem.dtype = DType::kI32;
  EXPECT_EQ(lt_->Run(problem, buffer, buffer, buffer, buffer, 0, 0, nullptr).code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace tilefuse
