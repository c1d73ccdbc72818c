#include "codegen/cuda_wgmma.h"

#include <fmt/format.h>

#include "support/check.h"

namespace tilefuse {

namespace {

// The n/2 f32 accumulator registers of an m64nN wgmma: their asm operand list and bindings.
struct Accumulators {
  Accumulators(int n, DType dtype) : registers(n / 2), type(dtype == DType::kBF16 ? "bf16" : "f16") {
    TF_CHECK(n % 8 == 0 && n >= 8 && n <= 256);
    TF_CHECK(dtype == DType::kBF16 || dtype == DType::kF16);
    for (int i = 0; i < registers; ++i) {
      list += fmt::format("{}%{}", i ? ", " : "", i);
      outputs += fmt::format("{}\"+f\"(d[{}])", i ? ", " : "", i);
    }
  }
  int registers;
  const char* type;
  std::string list, outputs;
};

}  // namespace

std::string WgmmaFunction(const std::string& name, int n, DType dtype, bool b_mn_major) {
  const Accumulators acc(n, dtype);
  const int registers = acc.registers;
  const std::string &list = acc.list, &outputs = acc.outputs;
  const char* type = acc.type;
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

std::string WgmmaRegisterAFunction(const std::string& name, int n, DType dtype, bool b_mn_major) {
  const Accumulators acc(n, dtype);
  const int registers = acc.registers;
  const std::string &list = acc.list, &outputs = acc.outputs;
  const char* type = acc.type;
  // After the accumulators: the four A registers, descriptor B, the accumulate flag, then
  // scale A, scale B and transpose B as immediates (a register A has no transpose).
  const int a = registers;
  return fmt::format(
      "static __device__ __forceinline__ void {0}(float (&d)[{1}], const unsigned (&a)[4], unsigned long long desc_b, int accumulate) {{\n"
      "  asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{2}, 0;\\n\"\n"
      "      \"wgmma.mma_async.sync.aligned.m64n{3}k16.f32.{4}.{4} {{{5}}}, {{%{6}, %{7}, %{8}, %{9}}}, %{10}, p, 1, 1, {11};\\n}}\\n\"\n"
      "      : {12}\n"
      "      : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(desc_b), \"r\"(accumulate));\n"
      "}}\n",
      name, registers, a + 5, n, type, list, a, a + 1, a + 2, a + 3, a + 4, b_mn_major ? 1 : 0, outputs);
}

}  // namespace tilefuse
