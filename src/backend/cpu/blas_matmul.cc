#include "backend/cpu/blas_matmul.h"

#include "codegen/gemm_split.h"

#include <cblas.h>

#include <cstring>
#include <vector>

namespace tilefuse {

namespace {

template <typename T>
const T* AsType(const Tensor& t, std::vector<T>& storage, DType dtype) {
  if (t.dtype() == dtype) return reinterpret_cast<const T*>(t.data());
  storage.resize(t.num_elements());
  for (int64_t i = 0; i < t.num_elements(); ++i) storage[i] = static_cast<T>(t.GetDouble(i));
  return storage.data();
}

template <typename T>
void Gemm(int64_t m, int64_t n, int64_t k, const T* a, const T* b, T* c) {
  if constexpr (std::is_same_v<T, double>)
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a, k, b, n, 0.0, c, n);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
}

template <typename T>
void BatchedMatmul(const Node& mm, const Tensor& a, const Tensor& b, T* c) {
  DType compute = std::is_same_v<T, double> ? DType::kF64 : DType::kF32;
  std::vector<T> a_storage, b_storage;
  const T* pa = AsType<T>(a, a_storage, compute);
  const T* pb = AsType<T>(b, b_storage, compute);
  const Shape& out = mm.shape;
  int64_t m = out[out.size() - 2], n = out.back(), k = a.shape().back();
  int64_t batches = NumElements(out) / std::max<int64_t>(1, m * n);
  for (int64_t batch = 0; batch < batches; ++batch) {
    const T* ma = pa + MatmulBatchOffset(out, a.shape(), batch) * m * k;
    const T* mb = pb + MatmulBatchOffset(out, b.shape(), batch) * k * n;
    if (k == 0) std::memset(c + batch * m * n, 0, sizeof(T) * m * n);
    else Gemm<T>(m, n, k, ma, mb, c + batch * m * n);
  }
}

}  // namespace

void BlasMatmul(const Node& matmul, const Tensor& a, const Tensor& b, void* out) {
  if (matmul.dtype == DType::kF64) return BatchedMatmul<double>(matmul, a, b, static_cast<double*>(out));
  if (matmul.dtype == DType::kF32) return BatchedMatmul<float>(matmul, a, b, static_cast<float*>(out));
  // Half and integer types: compute in f32 (f64 for 64-bit integers), round on store.
  Tensor result(matmul.dtype, matmul.shape);
  std::vector<double> wide(result.num_elements());
  BatchedMatmul<double>(matmul, a, b, wide.data());
  for (int64_t i = 0; i < result.num_elements(); ++i) result.SetDouble(i, wide[i]);
  std::memcpy(out, result.data(), result.num_bytes());
}

}  // namespace tilefuse
