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

// block_scaled_matmul: each block of K summed apart, scaled by sa[row, block] · sb[block, col].
Status ComputeBlockScaledMatMul(const Node& node, const std::vector<Operand>& in, Values& out) {
  const Operand &a = in[0], &b = in[1], &sa = in[2], &sb = in[3];
  const int64_t k = a.dim(a.rank() - 1), n = b.dim(1), blocks = sb.dim(0), block = k / blocks;
  const int64_t rows = NumElements(*a.shape) / k;  // batch entries folded into rows (B is shared)
  std::vector<double> partial(n);
  for (int64_t i = 0; i < rows; ++i) {
    double* c_row = out.data() + i * n;
    std::fill(c_row, c_row + n, 0.0);
    for (int64_t kb = 0; kb < blocks; ++kb) {
      std::fill(partial.begin(), partial.end(), 0.0);
      for (int64_t p = kb * block; p < (kb + 1) * block; ++p) {
        const double a_ip = a.data()[i * k + p];
        const double* b_row = b.data() + p * n;
        for (int64_t j = 0; j < n; ++j) partial[j] += a_ip * b_row[j];
      }
      const double row_scale = sa.data()[i * blocks + kb];
      const double* column_scales = sb.data() + kb * n;
      for (int64_t j = 0; j < n; ++j) c_row[j] += row_scale * column_scales[j] * partial[j];
    }
  }
  TF_CHECK(node.dtype == DType::kF32);
  return Status::Ok();
}

Status ComputeMatMul(const Node& node, const std::vector<Operand>& in, Values& out, bool accumulate_in_dtype) {
  if (node.op == OpCode::kBlockScaledMatMul) return ComputeBlockScaledMatMul(node, in, out);
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
