// MatMul of the reference interpreter: [..., M, K] x [..., K, N] with numpy-broadcast
// batch dims, accumulated in f64. The i-k-j loop order streams rows of B and C so the
// inner loop is contiguous and vectorizes (512³ takes well under a second).
#include "reference/interpreter_kernels.h"
#include "support/check.h"

namespace tilefuse::interpreter {

namespace {

// Offsets (in matrices) of an operand's matrix for every batch index of the output.
std::vector<int64_t> BatchOffsets(const Operand& operand, const Shape& out_batch) {
  Shape batch(operand.shape->begin(), operand.shape->end() - 2);
  std::vector<int64_t> offsets(NumElements(out_batch));
  ForEachStrided(out_batch, BroadcastStrides(batch, out_batch), 0,
                 [&](int64_t flat, int64_t offset) { offsets[flat] = offset; });
  return offsets;
}

// Multiply-adds from which a product's rows are computed in parallel (OpenMP): below, the
// threads cost more than they save.
constexpr int64_t kParallelWork = int64_t{1} << 22;

// c[M, N] = a[M, K] · b[K, N], all row-major. With an `accumulate` dtype other than
// f64, each step c += a·b is rounded to it (a fused multiply-add loop in that dtype).
// Large products run their rows on several threads: each row is still one thread's sum in
// the same order, so the result does not depend on the thread count, and the GPU script's
// checks of full-size GEMMs (4096³: about 30 s on one thread) take a fraction of the time.
void MultiplyMatrices(const double* a, const double* b, double* c, int64_t m, int64_t k, int64_t n, DType accumulate) {
#pragma omp parallel for schedule(static) if (m * k * n >= kParallelWork)
  for (int64_t i = 0; i < m; ++i) {
    double* c_row = c + i * n;
    std::fill(c_row, c_row + n, 0.0);
    for (int64_t p = 0; p < k; ++p) {
      const double a_ip = a[i * k + p];
      const double* b_row = b + p * n;
      if (accumulate == DType::kF64) {
        for (int64_t j = 0; j < n; ++j) c_row[j] += a_ip * b_row[j];
      } else {
        for (int64_t j = 0; j < n; ++j) c_row[j] = RoundToDType(c_row[j] + a_ip * b_row[j], accumulate);
      }
    }
  }
}

}  // namespace

Status ComputeMatMul(const Node& node, const std::vector<Operand>& in, Values& out, bool accumulate_in_dtype) {
  const Operand& a = in[0];
  const Operand& b = in[1];
  TF_CHECK(a.rank() >= 2 && b.rank() >= 2 && node.rank() >= 2);
  int64_t m = a.dim(a.rank() - 2), k = a.dim(a.rank() - 1), n = b.dim(b.rank() - 1);
  Shape out_batch(node.shape.begin(), node.shape.end() - 2);
  std::vector<int64_t> a_offsets = BatchOffsets(a, out_batch);
  std::vector<int64_t> b_offsets = BatchOffsets(b, out_batch);
  for (size_t batch = 0; batch < a_offsets.size(); ++batch) {
    MultiplyMatrices(a.data() + a_offsets[batch] * m * k, b.data() + b_offsets[batch] * k * n,
                     out.data() + batch * m * n, m, k, n, accumulate_in_dtype ? node.dtype : DType::kF64);
  }
  return Status::Ok();
}

}  // namespace tilefuse::interpreter
