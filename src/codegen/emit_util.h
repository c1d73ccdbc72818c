// Text helpers both emitters (C++ and CUDA) print Kernels with: type names per dtype,
// literals, and the substitution of argument names into ops.def scalar expressions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "codegen/kernel.h"
#include "tilefuse/dtype.h"

namespace tilefuse {

// The element type a buffer of dtype `d` is stored as (half types as 16-bit patterns).
const char* StorageType(DType d);
// The type values of dtype `d` are computed in: f64 in double, integers in int64_t,
// everything else (f32, f16, bf16, bool as 0/1) in float.
const char* ComputeType(DType d);
// `v` as a literal of `d`'s compute type (NaN and infinities spelled out).
std::string Literal(double v, DType d);
// The identity reduction `r` starts its accumulator from (ir/reduction_traits.h), in its
// compute type: an integer max or min starts from the int64_t extreme, not an infinity.
std::string ReductionIdentity(const KernelReduction& r);
// The C++ entry point's buffer parameters unpacked from `void* const* buffers`, one
// `T* __restrict__ b<i>` line per buffer (const for inputs), with its node and (with `sizes`)
// its element count: not where the kernel's sizes are the model's symbols, whose text must not
// hold the binding's values.
std::string CppBufferDeclarations(const std::vector<KernelBuffer>& buffers, bool sizes = true);
// Replaces the identifiers a, b, c of an ops.def expression by `args`.
std::string SubstituteArgs(std::string_view expr, const std::vector<std::string>& args);

}  // namespace tilefuse
