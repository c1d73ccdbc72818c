#include "backend/cpu/blas_matmul.h"

#include <cblas.h>
#if TILEFUSE_CPU_GEMM_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "codegen/gemm_split.h"
#include "ir/element_access.h"
#include "support/check.h"

namespace tilefuse {

namespace {

// The one place the f32 library is chosen (CMake's TILEFUSE_CPU_GEMM): oneDNN's sgemm was
// 1.2-2.3x OpenBLAS 0.3.21's on our shapes (docs/design-notes.md); OpenBLAS is the fallback
// and keeps f64, which oneDNN does not offer.
void Sgemm(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
#if TILEFUSE_CPU_GEMM_DNNL
  // Fails only on invalid arguments (a negative size or a leading dimension below N or K).
  TF_CHECK_MSG(dnnl_sgemm('N', 'N', m, n, k, 1.0f, a, k, b, n, 0.0f, c, n) == dnnl_success, "dnnl_sgemm failed");
#else
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
#endif
}

template <typename T>
void Gemm(int64_t m, int64_t n, int64_t k, const T* a, const T* b, T* c) {
  if constexpr (std::is_same_v<T, double>)
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a, k, b, n, 0.0, c, n);
  else
    Sgemm(m, n, k, a, b, c);
}

// Every batch entry of the product, operands already in T.
template <typename T>
void BatchedMatmul(const Shape& out, const Shape& a_shape, const T* a, const Shape& b_shape, const T* b, T* c) {
  int64_t m = out[out.size() - 2], n = out.back(), k = a_shape.back();
  int64_t batches = NumElements(out) / std::max<int64_t>(1, m * n);
  for (int64_t batch = 0; batch < batches; ++batch) {
    const T* ma = a + MatmulBatchOffset(out, a_shape, batch) * m * k;
    const T* mb = b + MatmulBatchOffset(out, b_shape, batch) * k * n;
    if (k == 0) std::memset(c + batch * m * n, 0, sizeof(T) * m * n);
    else Gemm<T>(m, n, k, ma, mb, c + batch * m * n);
  }
}

std::vector<double> Widened(DType dtype, const void* data, int64_t count) {
  std::vector<double> wide(count);
  for (int64_t i = 0; i < count; ++i) wide[i] = LoadElementAsDouble(dtype, static_cast<const std::byte*>(data), i);
  return wide;
}

}  // namespace

void BlasMatmul(const Graph& graph, const Node& matmul, const void* a, const void* b, void* out) {
  const Shape &a_shape = graph.node(matmul.inputs[0]).shape, &b_shape = graph.node(matmul.inputs[1]).shape;
  if (matmul.dtype == DType::kF64)
    return BatchedMatmul(matmul.shape, a_shape, static_cast<const double*>(a), b_shape, static_cast<const double*>(b),
                         static_cast<double*>(out));
  if (matmul.dtype == DType::kF32)
    return BatchedMatmul(matmul.shape, a_shape, static_cast<const float*>(a), b_shape, static_cast<const float*>(b),
                         static_cast<float*>(out));
  // Half and integer types: no BLAS routine takes them; computed in f64, rounded on store.
  std::vector<double> wide_a = Widened(matmul.dtype, a, NumElements(a_shape));
  std::vector<double> wide_b = Widened(matmul.dtype, b, NumElements(b_shape));
  std::vector<double> wide(NumElements(matmul.shape));
  BatchedMatmul(matmul.shape, a_shape, wide_a.data(), b_shape, wide_b.data(), wide.data());
  for (size_t i = 0; i < wide.size(); ++i) StoreElementFromDouble(matmul.dtype, static_cast<std::byte*>(out), i, wide[i]);
}

}  // namespace tilefuse
