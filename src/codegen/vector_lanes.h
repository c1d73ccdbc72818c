// How a flat pointwise kernel's accesses behave across one vector of its elements: the
// analysis behind the CUDA pointwise template's lane form (codegen/cuda/cuda_emitter.cc).
//
// The flat template gives each thread `vector` consecutive elements i0 = base + j, base a
// multiple of `vector`, 0 <= j < vector. An index is
//   uniform     when it is the same for every j: a depthwise convolution's clamped window
//               row and column ((i0 / C / W) % H + dh, in NHWC), a per-image scale;
//   contiguous  when it is index(base) + j with index(base) a multiple of `vector`: one
//               aligned vector access, even through divisions and clamps, as long as they
//               only touch the uniform part (a tap of that convolution reads
//               ((n·H + clamp(h + dh))·W + clamp(w + dw))·C + c, c = i0 % C, contiguous
//               when `vector` divides C);
//   other       for anything else (a transposed read, a gather).
// The proof carries, for each subexpression e, its step s (e(base + j) = e(base) + s·j) and
// an alignment a (e(base) is a multiple of a for every base): a division or remainder by d
// keeps the form when s·vector divides both d and a, since e(base) mod d is then at most
// d − s·vector and the vector never crosses a multiple of d.
#pragma once

#include <cstdint>
#include <functional>

#include <vector>

#include "codegen/index_expr.h"
#include "codegen/kernel.h"

namespace tilefuse {

enum class LaneAccess { kUniform, kContiguous, kOther };

// `uniform_value(id)`: whether SSA value `id`, read by a gather index, is the same across the
// vector (false: the index is kOther). Loop variable 1 is not expected (flat kernels).
LaneAccess ClassifyLanes(const Index& index, int64_t vector, const std::function<bool(int)>& uniform_value);

// Per value of a flat pointwise kernel: the same for every element of a vector (constants,
// and indices, loads and ops of uniform things only).
std::vector<bool> UniformAcrossVector(const Kernel& kernel, int64_t vector);

// Whether the lane form pays for `kernel` at `vector`: some load is contiguous only through
// divisions, remainders or clamps (the flat template's affine test misses it and reads it
// element by element, each lane a sector apart), and nothing needs the flat form (random
// values, gathers or scattered stores through values that vary across the vector).
bool TakesLaneForm(const Kernel& kernel, int64_t vector);

}  // namespace tilefuse
