// A Kernel's scalar program printed as CUDA, for the templates that drive their own loops
// (the GEMM epilogue, attention's logits) and the loop emitter alike: the cheaper forms of
// some ops, and the SSA lines one element needs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "codegen/kernel.h"

namespace tilefuse {

// A cheaper form of op value `v` (arguments named `args`) with the same meaning at its
// precision on the GPU, or "" for none: tanh, exp, sigmoid and division by the hardware
// approximations (2^-11 relative for tanh; exp2 of a scaled argument, approximate quotients)
// where the value is a half type or `rounded_to_half` (RoundedToHalfValues), whose rounding
// is coarser than that; comparisons as C++ comparisons. The target-neutral forms (powers,
// row-invariant divisors) are rewrites of the Kernel (codegen/kernel_rewrites.h).
// An f32 division by a constant (`divisor`, when the divisor is one) of moderate size prints as
// tf_div_by_constant: the same correctly rounded quotient without IEEE division's subroutine.
std::string CudaFastForm(const ScalarValue& v, const std::vector<std::string>& args, bool rounded_to_half = false,
                         const ScalarValue* divisor = nullptr);

// Per value of `k`: whether it is an f32 (or wider) op value that reaches nothing but a cast
// to f16, bf16 or an 8-bit float, through arithmetic that keeps its relative error
// (KeepsRelativeError), so its f32 form may be as approximate as a half value's. (A GELU
// quantized to e4m3 in an FP8 product's epilogue, with expf and IEEE division: GPT-2's MLP
// product at 8x512 took 64 µs, 34.5 with its output bf16; H200, 2026-12-04.) Values stored, reduced, indexed by or
// in `read_by_caller` (a template's own reads, attention's logits) are read as they are. A
// SwiGLU epilogue computes silu on the f32 upcast of a bf16 product and casts it back:
// expf's and IEEE division's slow paths there bought precision the cast drops.
std::vector<bool> RoundedToHalfValues(const Kernel& k, const std::vector<int>& read_by_caller = {});

// The lines `const T v<i> = ...;` computing `roots` for one element, in SSA order: loads
// read b<buffer>[index] with loop variables named `vars`, except the values in `given`,
// which are already available under the expression named there (a template's
// accumulator). Each line starts with `indent`. The program is printed with the powers
// rewritten (RewriteForEmission); the values it adds for that are named t<id>, the others
// keep the names v<id> of `k`'s ids, which the caller reads.
std::string CudaElementProgram(const Kernel& k, const std::vector<int>& roots, const std::map<int, std::string>& given,
                               const std::vector<std::string>& vars, const std::string& indent);

// The tile library's element type for `dtype` (codegen/cuda/device/tile_mma.cuh): tf::Bf16,
// tf::F16, else tf::F32.
const char* TileElementType(DType dtype);

}  // namespace tilefuse
