// Element types. Half types (f16, bf16) are stored as 16-bit patterns and computed in
// f32 by generated kernels; the reference interpreter computes in f64 and rounds every
// stored value to the declared dtype (RoundToDType), so its outputs match that dtype.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tilefuse {

enum class DType : uint8_t { kF64, kF32, kF16, kBF16, kI64, kI32, kI8, kU8, kBool };

inline constexpr DType kAllDTypes[] = {DType::kF64, DType::kF32, DType::kF16,
                                       DType::kBF16, DType::kI64, DType::kI32,
                                       DType::kI8,  DType::kU8,  DType::kBool};

std::string_view DTypeName(DType dtype);                   // "f32", "bf16", ...
std::optional<DType> ParseDType(std::string_view name);     // inverse of DTypeName
int DTypeSize(DType dtype);                                 // bytes per element
bool IsFloat(DType dtype);
bool IsInteger(DType dtype);  // signed or unsigned integers, not bool

// Rounds an f64 value to what `dtype` can hold: f32/f16/bf16 round to nearest even,
// integers truncate toward zero and wrap like a C cast of an in-range value, bool is
// (v != 0). NaN stays NaN for float types.
double RoundToDType(double value, DType dtype);

// IEEE half and bfloat16 conversions (round to nearest even).
uint16_t FloatToHalfBits(float value);
float HalfBitsToFloat(uint16_t bits);
uint16_t FloatToBF16Bits(float value);
float BF16BitsToFloat(uint16_t bits);

}  // namespace tilefuse
