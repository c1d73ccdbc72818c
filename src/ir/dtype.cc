#include "tilefuse/dtype.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace tilefuse {

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF64: return "f64";
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI64: return "i64";
    case DType::kI32: return "i32";
    case DType::kI8: return "i8";
    case DType::kU8: return "u8";
    case DType::kBool: return "bool";
    case DType::kF8E4M3: return "f8e4m3";
    case DType::kF8E5M2: return "f8e5m2";
    case DType::kF8E4M3Fnuz: return "f8e4m3fnuz";
    case DType::kF8E5M2Fnuz: return "f8e5m2fnuz";
  }
  return "?";
}

std::optional<DType> ParseDType(std::string_view name) {
  for (DType d : kAllDTypes)
    if (DTypeName(d) == name) return d;
  return std::nullopt;
}

int DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF64: case DType::kI64: return 8;
    case DType::kF32: case DType::kI32: return 4;
    case DType::kF16: case DType::kBF16: return 2;
    case DType::kI8: case DType::kU8: case DType::kBool: case DType::kF8E4M3: case DType::kF8E5M2:
    case DType::kF8E4M3Fnuz: case DType::kF8E5M2Fnuz: return 1;
  }
  return 0;
}

bool IsFloat(DType d) {
  return d == DType::kF64 || d == DType::kF32 || d == DType::kF16 || d == DType::kBF16 || IsFloat8(d);
}
bool IsFloat8(DType d) { return d == DType::kF8E4M3 || d == DType::kF8E5M2 || IsFloat8Fnuz(d); }
bool IsFloat8Fnuz(DType d) { return d == DType::kF8E4M3Fnuz || d == DType::kF8E5M2Fnuz; }
bool IsHalf(DType d) { return d == DType::kF16 || d == DType::kBF16; }
bool IsInteger(DType d) {
  return d == DType::kI64 || d == DType::kI32 || d == DType::kI8 || d == DType::kU8;
}

uint16_t FloatToHalfBits(float value) {
  uint32_t x = std::bit_cast<uint32_t>(value);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal half or zero: scale into the integer grid
    float f = std::bit_cast<float>(abs) * 16777216.0f;  // * 2^24: units of the smallest subnormal
    uint32_t m = static_cast<uint32_t>(std::nearbyint(f));
    return static_cast<uint16_t>(sign | m);
  }
  // Normal: rebias exponent, round mantissa from 23 to 10 bits, ties to even.
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

float HalfBitsToFloat(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  if (exp == 0) {
    float f = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -f : f;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t FloatToBF16Bits(float value) {
  uint32_t x = std::bit_cast<uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float BF16BitsToFloat(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

namespace {

// The 8-bit formats: exponent bias, mantissa bits, largest finite value and its pattern.
// f8e4m3 spends the all-ones exponent on values (only S.1111.111 is NaN); f8e5m2 is IEEE.
// The FNUZ forms spend every pattern but 0x80 (their NaN, where the others have -0) on values.
struct Float8Format {
  int bias, mantissa_bits;
  double largest;
  uint8_t largest_bits, nan_bits;
  bool has_infinity;
  bool fnuz;
};

Float8Format FormatOf(DType d) {
  switch (d) {
    case DType::kF8E4M3: return {7, 3, 448.0, 0x7e, 0x7f, false, false};
    case DType::kF8E4M3Fnuz: return {8, 3, 240.0, 0x7f, 0x80, false, true};
    case DType::kF8E5M2Fnuz: return {16, 2, 57344.0, 0x7f, 0x80, false, true};
    default: return {15, 2, 57344.0, 0x7b, 0x7f, true, false};
  }
}

}  // namespace

uint8_t FloatToFloat8Bits(double v, DType dtype, bool saturate) {
  const Float8Format f = FormatOf(dtype);
  if (std::isnan(v)) return f.nan_bits;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  const uint8_t zero = f.fnuz ? 0x00 : sign;
  const double a = std::fabs(v);
  auto overflow = [&] { return static_cast<uint8_t>(saturate ? sign | f.largest_bits : f.has_infinity ? sign | 0x7c : f.nan_bits); };
  if (std::isinf(a)) return overflow();
  if (a == 0) return zero;
  // Round to the format's grid at a's binade (the subnormal spacing below the smallest
  // normal), ties to even: nearbyint in the default rounding mode.
  int exponent = 0;
  std::frexp(a, &exponent);  // a = m · 2^exponent, m in [0.5, 1)
  const int min_exponent = 1 - f.bias;  // of the smallest normal, 2^min_exponent
  const int binade = std::max(exponent - 1, min_exponent);
  const double quantum = std::ldexp(1.0, binade - f.mantissa_bits);
  const double r = std::nearbyint(a / quantum) * quantum;
  if (r > f.largest) return overflow();
  if (r == 0) return zero;
  std::frexp(r, &exponent);
  if (exponent - 1 < min_exponent)  // subnormal: exponent field 0
    return static_cast<uint8_t>(sign | static_cast<int>(r / std::ldexp(1.0, min_exponent - f.mantissa_bits)));
  const int field = exponent - 1 + f.bias;
  const int mantissa = static_cast<int>(r / std::ldexp(1.0, exponent - 1 - f.mantissa_bits)) - (1 << f.mantissa_bits);
  return static_cast<uint8_t>(sign | field << f.mantissa_bits | mantissa);
}

double Float8BitsToFloat(uint8_t bits, DType dtype) {
  const Float8Format f = FormatOf(dtype);
  const double sign = bits & 0x80 ? -1.0 : 1.0;
  const int field = (bits & 0x7f) >> f.mantissa_bits, mantissa = bits & ((1 << f.mantissa_bits) - 1);
  const int top = (1 << (7 - f.mantissa_bits)) - 1;  // the all-ones exponent field
  if (f.fnuz) {
    if (bits == f.nan_bits) return NAN;
  } else if (f.has_infinity && field == top) {
    return mantissa == 0 ? sign * INFINITY : NAN;
  } else if (!f.has_infinity && (bits & 0x7f) == 0x7f) {
    return NAN;
  }
  if (field == 0) return sign * std::ldexp(mantissa, 1 - f.bias - f.mantissa_bits);
  return sign * std::ldexp((1 << f.mantissa_bits) + mantissa, field - f.bias - f.mantissa_bits);
}

namespace {
// Integer conversion of an f64 that may be out of range or NaN: truncate toward zero,
// then wrap modulo 2^bits like the hardware conversions for in-range values do.
template <typename T>
double WrapInteger(double v) {
  if (std::isnan(v)) return 0;
  double t = std::trunc(v);
  if (t >= -9.2e18 && t <= 9.2e18) return static_cast<double>(static_cast<T>(static_cast<int64_t>(t)));
  return static_cast<double>(static_cast<T>(t < 0 ? INT64_MIN : INT64_MAX));
}
}  // namespace

double RoundToDType(double v, DType dtype) {
  switch (dtype) {
    case DType::kF64: return v;
    case DType::kF32: return static_cast<double>(static_cast<float>(v));
    case DType::kF16: return HalfBitsToFloat(FloatToHalfBits(static_cast<float>(v)));
    case DType::kBF16: return BF16BitsToFloat(FloatToBF16Bits(static_cast<float>(v)));
    case DType::kI64: return WrapInteger<int64_t>(v);
    case DType::kI32: return WrapInteger<int32_t>(v);
    case DType::kI8: return WrapInteger<int8_t>(v);
    case DType::kU8: return WrapInteger<uint8_t>(v);
    case DType::kBool: return v != 0 ? 1.0 : 0.0;
    case DType::kF8E4M3: case DType::kF8E5M2: case DType::kF8E4M3Fnuz: case DType::kF8E5M2Fnuz:
      return Float8BitsToFloat(FloatToFloat8Bits(v, dtype, /*saturate=*/!std::isinf(v)), dtype);
  }
  return v;
}

}  // namespace tilefuse
