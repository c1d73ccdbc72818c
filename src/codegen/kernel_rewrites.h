// Target-neutral rewrites of a Kernel into cheaper forms with the same meaning at each
// value's precision, applied before an emitter prints it (both print the result):
//
//  - x^2 and x^3 (floats) as products: pow is a log and an exp, and on the CPU it has no
//    SIMD declaration, so it keeps the loop scalar (cpp_simd_declarations.cc). x*x*x
//    rounds twice, within 2 ulp of pow. Other exponents keep pow.
//  - a / b with `a` per element and `b` per row (softmax's sum, layer norm's deviation;
//    floats) as a * r, r = reciprocal(b) a per-row value of its own: one division per row
//    instead of one per element (a division costs ~10 multiplies). Two roundings instead of
//    one, within 1.5 ulp.
//  - optionally, a cast just before a store of the same dtype dropped (EmissionRewrites).
#pragma once

#include <vector>

#include "codegen/kernel.h"

namespace tilefuse {

struct EmissionRewrites {
  bool integer_powers = true;
  // The loop emitters (C++ and CUDA) take this one; a template's scalar program (GEMM
  // epilogue, attention logits) does not: its loops are the template's own, with no
  // per-row scope the reciprocal would be computed in.
  bool row_invariant_divisors = true;
  // A store of cast(x) to the stored dtype (half types and f32) stores x: the store's own
  // conversion rounds the same way, and a bf16 cast is about six integer instructions an
  // element on the GPU (dropout + residual + layer norm casting its f32 result to bf16).
  // The CUDA emitters take it: their stores convert as tf_cast_* does.
  bool stored_casts = false;
};

// `kernel` rewritten. Values the rewrite adds come right before their first user, so later
// ids shift: with `new_ids`, each value of `kernel` gets its id in the result.
Kernel RewriteForEmission(const Kernel& kernel, const EmissionRewrites& rewrites = {}, std::vector<int>* new_ids = nullptr);

}  // namespace tilefuse
