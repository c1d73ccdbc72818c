// Permutation arithmetic for passes/sink_transposes: a value x held as another value v
// with x = transpose(v, perm) (v's layout), and how the views and reductions reading x read
// v instead.
#pragma once

#include <optional>
#include <vector>

#include "tilefuse/tensor.h"

namespace tilefuse::layout {

using Perm = std::vector<int64_t>;

bool IsIdentity(const Perm& perm);
// transpose(transpose(a, first), then) = transpose(a, Compose(first, then)).
Perm Compose(const Perm& first, const Perm& then);
Perm Inverse(const Perm& perm);
// The shape of transpose(v, perm) for v of shape `stored`.
Shape Permuted(const Shape& stored, const Perm& perm);
// Whether transpose(v, perm) moves only dims of size 1: the same elements in the same
// order, a reshape.
bool MovesOnlyUnitDims(const Shape& stored, const Perm& perm);

// x = transpose(v, perm) reduced over x's `axes` without keepdims is
// transpose(v reduced over perm[axes], AfterReduction(perm, axes)).
Perm AfterReduction(const Perm& perm, const std::vector<int64_t>& axes);

// reshape(transpose(v, perm), target) as transpose(reshape(v, stored), perm): possible
// when every run of x's dims the reshape merges or splits lies in v in order and
// contiguously (dims of size 1 aside). Nullopt otherwise, or for empty tensors.
struct ReshapedLayout {
  Shape stored;
  Perm perm;
};
std::optional<ReshapedLayout> ReshapeInLayout(const Shape& stored, const Perm& perm, const Shape& target);

}  // namespace tilefuse::layout
