// One element of raw row-major memory of a dtype, read or written as f64: what
// Tensor::GetDouble and SetDouble do, for bytes a Tensor does not own (arena values the
// BLAS product converts in place of copying them into a Tensor first).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tilefuse/dtype.h"

namespace tilefuse {

double LoadElementAsDouble(DType dtype, const std::byte* data, int64_t index);
// Rounds `value` to `dtype` (RoundToDType) and stores it.
void StoreElementFromDouble(DType dtype, std::byte* data, int64_t index, double value);

}  // namespace tilefuse
