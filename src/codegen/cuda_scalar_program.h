// A Kernel's scalar program printed as CUDA, for the templates that drive their own loops
// (the GEMM epilogue) and the loop emitter alike: the cheaper forms of some ops, and the
// SSA lines one element needs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "codegen/kernel.h"

namespace tilefuse {

// A cheaper form of op value `v` (arguments named `args`) with the same meaning at its
// precision, or "" for none:
//  - x^2, x^3 by multiplication (powf is a log and an exp);
//  - tanh and exp by the hardware approximations (2^-11 relative; exp2 of a scaled
//    argument) where the value is a half type, whose rounding is coarser than that;
//  - with `invariant_divisor`, a division as a product with the divisor's reciprocal,
//    which the compiler hoists out of the loops the divisor does not vary in.
std::string CudaFastForm(const Kernel& k, const ScalarValue& v, const std::vector<std::string>& args, bool invariant_divisor);

// The lines `const T v<i> = ...;` computing `roots` for one element, in SSA order: loads
// read b<buffer>[index] with loop variables named `vars`, except the values in `given`,
// which are already available under the expression named there (a template's
// accumulator). Each line starts with `indent`.
std::string CudaElementProgram(const Kernel& k, const std::vector<int>& roots, const std::map<int, std::string>& given,
                               const std::vector<std::string>& vars, const std::string& indent);

}  // namespace tilefuse
