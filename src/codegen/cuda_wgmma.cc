#include "codegen/cuda_wgmma.h"

#include <fmt/format.h>

#include "support/check.h"

namespace tilefuse {

std::string WgmmaFunction(const std::string& name, int n, DType dtype, bool b_mn_major) {
  TF_CHECK(n % 8 == 0 && n >= 8 && n <= 256);
  TF_CHECK(dtype == DType::kBF16 || dtype == DType::kF16);
  const int registers = n / 2;
  std::string list, outputs;
  for (int i = 0; i < registers; ++i) {
    list += fmt::format("{}%{}", i ? ", " : "", i);
    outputs += fmt::format("{}\"+f\"(d[{}])", i ? ", " : "", i);
  }
  const char* type = dtype == DType::kBF16 ? "bf16" : "f16";
  // Operands after the accumulators: descriptor A, descriptor B, the accumulate flag
  // (as a predicate), then scale A, scale B, transpose A, transpose B as immediates.
  return fmt::format(
      "static __device__ __forceinline__ void {0}(float (&d)[{1}], unsigned long long desc_a, unsigned long long desc_b, int accumulate) {{\n"
      "  asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{2}, 0;\\n\"\n"
      "      \"wgmma.mma_async.sync.aligned.m64n{3}k16.f32.{4}.{4} {{{5}}}, %{6}, %{7}, p, 1, 1, 0, {8};\\n}}\\n\"\n"
      "      : {9}\n"
      "      : \"l\"(desc_a), \"l\"(desc_b), \"r\"(accumulate));\n"
      "}}\n",
      name, registers, registers + 2, n, type, list, registers, registers + 1, b_mn_major ? 1 : 0, outputs);
}

}  // namespace tilefuse
