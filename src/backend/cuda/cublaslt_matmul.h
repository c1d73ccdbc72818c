// LtMatmul: row-major (batched) matrix products on the GPU through cuBLASLt, with the
// bias/activation epilogues cuBLASLt fuses into the product.
//
//   StatusOr<std::unique_ptr<LtMatmul>> lt = LtMatmul::Create();
//   RETURN_IF_ERROR((*lt)->Run(problem, a, b, d, bias, workspace, workspace_bytes, stream));
//
// libcublasLt is loaded with dlopen at Create, so a binary without CUDA libraries still
// starts (and falls back to the CPU). Run needs the caller's CUDA context current on the
// calling thread; it only enqueues work on `stream`.
//
// Row-major through cuBLASLt's column-major convention: a row-major [m][n] matrix is the
// column-major n×m matrix Dᵀ, so Run asks cuBLASLt for Dᵀ = op(B)ᵀ·op(A)ᵀ, handing it B
// as its first operand and A as its second. Under that swap a cuBLASLt bias (one value per
// row of its D, broadcast over its columns) is one value per column n of our D, broadcast
// over our rows: exactly the Gemm/Linear bias.
//
// Epilogues, and the cuBLASLt epilogue each one is:
//   kNone     CUBLASLT_EPILOGUE_DEFAULT    D = A·B
//   kBias     CUBLASLT_EPILOGUE_BIAS       D = A·B + bias
//   kRelu     CUBLASLT_EPILOGUE_RELU       D = max(A·B, 0)
//   kBiasRelu CUBLASLT_EPILOGUE_RELU_BIAS  D = max(A·B + bias, 0)
//   kGelu     CUBLASLT_EPILOGUE_GELU       D = gelu_tanh(A·B)
//   kBiasGelu CUBLASLT_EPILOGUE_GELU_BIAS  D = gelu_tanh(A·B + bias)
// cuBLASLt's GELU is the tanh approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))),
// not ONNX Gelu's default erf form (they differ by up to ~5e-4 absolute): a caller may
// fuse an erf Gelu only where that error is acceptable. Bias and activation are applied
// in f32 before rounding to the output type. Deciding which graph epilogues map onto
// these is the caller's job.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tilefuse/dtype.h"
#include "tilefuse/status.h"

namespace tilefuse {

enum class LtEpilogue { kNone, kBias, kRelu, kBiasRelu, kGelu, kBiasGelu };

bool LtEpilogueHasBias(LtEpilogue epilogue);
const char* LtEpilogueName(LtEpilogue epilogue);  // "none", "bias_relu", ...

// D[b] = epilogue(op(A[b]) · op(B[b])) for b < batch, all matrices row-major and dense:
//   A is [m][k] ([k][m] when trans_a, op(A) = Aᵀ), B is [k][n] ([n][k] when trans_b),
//   D is [m][n]. Strides are in elements between consecutive batch matrices; 0 repeats
//   one matrix for every batch entry (a broadcast batch dim), which A and B may use.
// A, B, D and bias share `dtype`: f32, f16 or bf16. Products accumulate in f32; f32
// stays exact f32 unless `tf32` asks for TF32 tensor cores (--precision high: inputs
// rounded to 10 mantissa bits, errors of ~1e-3 relative) or the user sets
// NVIDIA_TF32_OVERRIDE=1, which cuBLASLt obeys and which we leave to the user.
struct LtMatmulProblem {
  DType dtype = DType::kF32;
  int64_t batch = 1;
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false;
  bool trans_b = false;
  int64_t batch_stride_a = 0;
  int64_t batch_stride_b = 0;
  int64_t batch_stride_d = 0;
  // Elements between consecutive stored rows of A and B (A's [m][k] or [k][m] rows, B's [k][n]
  // or [n][k]): a view of a wider value (attention's q, k and v inside their projection's
  // output); 0: dense, the row's length.
  int64_t lda = 0;
  int64_t ldb = 0;
  // Bias epilogues read a dense vector of n values, the same for every batch entry.
  LtEpilogue epilogue = LtEpilogue::kNone;
  bool tf32 = false;  // f32 only: CUBLAS_COMPUTE_32F_FAST_TF32

  auto operator<=>(const LtMatmulProblem&) const = default;  // a cache key
};

// "bf16 batch 4 [64x128]·[128x32]ᵀ strides a=0 b=4096 d=2048 epilogue bias_relu"
std::string DescribeLtMatmulProblem(const LtMatmulProblem& problem);

class LtMatmul {
 public:
  // Loads libcublasLt.so.13 and creates a cuBLASLt handle. Tries $TILEFUSE_CUBLASLT first,
  // then CudaLibraryCandidates (backend/cuda/shared_library.h: the loader's search path,
  // the toolkit, the NVIDIA Python wheels). NotFound, naming what it tried, when none loads.
  static StatusOr<std::unique_ptr<LtMatmul>> Create();
  // The same with an explicit candidate list after $TILEFUSE_CUBLASLT (tests, or a library
  // shipped beside the binary).
  static StatusOr<std::unique_ptr<LtMatmul>> Create(const std::vector<std::string>& candidates);

  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  // Enqueues the product on `stream` (a CUstream; null is the legacy default stream).
  // Pointers are device addresses; `bias` is read only by bias epilogues (else pass 0).
  // The algorithm is the cuBLASLt heuristic's first choice for this problem, pointer
  // alignments and workspace size; descriptors and algorithm are cached per such key,
  // so repeating a problem costs no heuristic query. Thread-safe (calls serialise).
  Status Run(const LtMatmulProblem& problem, uint64_t a, uint64_t b, uint64_t d, uint64_t bias,
             uint64_t workspace, size_t workspace_bytes, void* stream);

  std::string library_path() const;  // the candidate that loaded
  size_t cached_plans() const;       // distinct (problem, alignment, workspace) keys seen

 private:
  struct State;
  explicit LtMatmul(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tilefuse
