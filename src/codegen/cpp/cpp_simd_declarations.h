// Declarations that let the host compiler vectorise generated loops without
// -ffast-math, printed once per translation unit ahead of the kernels:
//
// - glibc's vector math library (libmvec) has SIMD versions of exp, log, tanh, erf, sin
//   and cos; math.h declares them only under -ffast-math. Declaring the scalar
//   functions `simd` lets GCC call them (e.g. _ZGVdN8v_expf, 8 floats per call on AVX2)
//   from vectorised loops; g++ links libm, whose linker script pulls libmvec in as
//   needed. They keep IEEE semantics for NaN and infinities (glibc documents at most 4 ulp
//   error, within the f32 tolerance the kernels are tested at).
#pragma once

#include <string>

namespace tilefuse {

const std::string& CppSimdDeclarations();

}  // namespace tilefuse
