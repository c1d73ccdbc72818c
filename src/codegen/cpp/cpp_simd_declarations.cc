#include "codegen/cpp/cpp_simd_declarations.h"

namespace tilefuse {

namespace {

// Guarded because a translation unit holds many kernels. libmvec has x86-64 variants of
// exp/log/sin/cos since glibc 2.22 and of tanh/erf since 2.35; elsewhere the loops stay
// scalar calls. pow is left out: GCC 12 crashes (internal compiler error in cddce)
// vectorising pow(x, 0.5f) through its SIMD clone in a `parallel for simd` loop; the
// emitter multiplies out the common small integer powers instead.
constexpr const char kDeclarations[] = R"TFRAW(
#ifndef TF_SIMD_DECLARATIONS
#define TF_SIMD_DECLARATIONS
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 22)
#define TF_SIMD_MATH __attribute__((simd("notinbranch")))
extern "C" {
float expf(float) noexcept TF_SIMD_MATH;  double exp(double) noexcept TF_SIMD_MATH;
float logf(float) noexcept TF_SIMD_MATH;  double log(double) noexcept TF_SIMD_MATH;
float sinf(float) noexcept TF_SIMD_MATH;  double sin(double) noexcept TF_SIMD_MATH;
float cosf(float) noexcept TF_SIMD_MATH;  double cos(double) noexcept TF_SIMD_MATH;
#if __GLIBC_PREREQ(2, 35)
float tanhf(float) noexcept TF_SIMD_MATH;  double tanh(double) noexcept TF_SIMD_MATH;
float erff(float) noexcept TF_SIMD_MATH;  double erf(double) noexcept TF_SIMD_MATH;
#endif
}
#endif
#endif
#endif
)TFRAW";

}  // namespace

const std::string& CppSimdDeclarations() {
  static const std::string text = kDeclarations;
  return text;
}

}  // namespace tilefuse
