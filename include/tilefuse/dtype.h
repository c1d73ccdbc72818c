// Element types. Half types (f16, bf16) are stored as 16-bit patterns and computed in
// f32 by generated kernels; the reference interpreter computes in f64 and rounds every
// stored value to the declared dtype (RoundToDType), so its outputs match that dtype.
// The 8-bit floats are ONNX's FLOAT8E4M3FN (f8e4m3: 4 exponent bits, 3 mantissa bits, no
// infinity, largest 448) and FLOAT8E5M2 (f8e5m2: IEEE-like, largest 57344), stored as their
// bit patterns; and their FNUZ forms (FLOAT8E4M3FNUZ, FLOAT8E5M2FNUZ: exponent bias one
// higher, no infinity, no negative zero, the pattern 0x80 their only NaN; largest 240 and
// 57344), which tilefuse converts and computes with but no tensor core of the CUDA backend takes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tilefuse {

enum class DType : uint8_t { kF64, kF32, kF16, kBF16, kI64, kI32, kI8, kU8, kBool, kF8E4M3, kF8E5M2, kF8E4M3Fnuz, kF8E5M2Fnuz };

inline constexpr DType kAllDTypes[] = {DType::kF64, DType::kF32,  DType::kF16,     DType::kBF16,
                                       DType::kI64, DType::kI32,  DType::kI8,      DType::kU8,
                                       DType::kBool, DType::kF8E4M3, DType::kF8E5M2, DType::kF8E4M3Fnuz,
                                       DType::kF8E5M2Fnuz};

std::string_view DTypeName(DType dtype);                   // "f32", "bf16", ...
std::optional<DType> ParseDType(std::string_view name);     // inverse of DTypeName
int DTypeSize(DType dtype);                                 // bytes per element
bool IsFloat(DType dtype);   // the 8-bit floats too
bool IsFloat8(DType dtype);      // the four 8-bit floats
bool IsFloat8Fnuz(DType dtype);  // f8e4m3fnuz, f8e5m2fnuz
bool IsHalf(DType dtype);    // f16 or bf16: the 16-bit floats
bool IsInteger(DType dtype);  // signed or unsigned integers, not bool

// Rounds an f64 value to what `dtype` can hold: f32/f16/bf16 round to nearest even,
// integers truncate toward zero and wrap like a C cast of an in-range value, bool is
// (v != 0). NaN stays NaN for float types. The 8-bit floats round to nearest even and
// saturate a finite overflow to their largest value (ONNX's Cast default); an infinity
// stays one in f8e5m2 and is NaN in the others (a non-saturating cast's overflow, below).
double RoundToDType(double value, DType dtype);

// IEEE half and bfloat16 conversions (round to nearest even).
uint16_t FloatToHalfBits(float value);
float HalfBitsToFloat(uint16_t bits);
uint16_t FloatToBF16Bits(float value);
float BF16BitsToFloat(uint16_t bits);

// An 8-bit float's bit pattern for `value`, rounded to nearest even. Out of range (an
// infinity included), `saturate` gives the largest finite value of the value's sign;
// otherwise f8e5m2 gives its infinity and the others NaN. NaN gives NaN; a zero, or a value
// rounded to zero, keeps its sign except in the FNUZ types (which have one zero).
uint8_t FloatToFloat8Bits(double value, DType dtype, bool saturate);
double Float8BitsToFloat(uint8_t bits, DType dtype);

}  // namespace tilefuse
