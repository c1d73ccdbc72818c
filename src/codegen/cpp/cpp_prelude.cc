#include "codegen/cpp/cpp_prelude.h"

#include "codegen/scalar_library_text.h"

namespace tilefuse {

namespace {

constexpr const char kHelpers[] = R"TFRAW(
#include <cstdint>
#include <cstring>
#include <limits>
using namespace tilefuse::scalar;
using std::int64_t;

static inline int64_t tf_clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

static inline float tf_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0) { float f = (float)mant * (1.0f / 16777216.0f); return sign ? -f : f; }
  if (exp == 31) bits = sign | 0x7f800000u | (mant << 13);
  else bits = sign | ((exp + 112u) << 23) | (mant << 13);
  float f; std::memcpy(&f, &bits, 4); return f;
}
static inline uint16_t tf_float_to_half(float value) {
  uint32_t x; std::memcpy(&x, &value, 4);
  uint32_t sign = (x >> 16) & 0x8000u, abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (abs < 0x38800000u) {
    float f; std::memcpy(&f, &abs, 4);
    return (uint16_t)(sign | (uint32_t)__builtin_nearbyintf(f * 16777216.0f));
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
}
static inline float tf_bf16_to_float(uint16_t h) { uint32_t bits = (uint32_t)h << 16; float f; std::memcpy(&f, &bits, 4); return f; }
static inline uint16_t tf_float_to_bf16(float value) {
  uint32_t x; std::memcpy(&x, &value, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

// 8-bit floats (ONNX's FLOAT8E4M3FN: m = 3, bias 7; FLOAT8E5M2: m = 2, bias 15, IEEE), as
// src/ir/dtype.cc converts them: round to nearest even at the value's binade (the subnormal
// spacing below the smallest normal), an overflow (an infinity too)
// saturated to the largest value, as ONNX's Cast does by default; casts that do not saturate
// are not lowered, and stores of these types come from casts.
static inline float tf_pow2(int e) { uint32_t bits = (uint32_t)(e + 127) << 23; float f; std::memcpy(&f, &bits, 4); return f; }
static inline float tf_f8_to_float(uint8_t b, int m, int bias, bool ieee) {
  const int field = (b & 0x7f) >> m, mant = b & ((1 << m) - 1), top = (1 << (7 - m)) - 1;
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  if (ieee && field == top) return mant == 0 ? sign * std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  if (!ieee && (b & 0x7f) == 0x7f) return std::numeric_limits<float>::quiet_NaN();
  if (field == 0) return sign * (float)mant * tf_pow2(1 - bias - m);
  return sign * (float)((1 << m) + mant) * tf_pow2(field - bias - m);
}
static inline uint8_t tf_float_to_f8(float v, int m, int bias, float largest, uint8_t largest_bits) {
  uint32_t x; std::memcpy(&x, &v, 4);
  const uint8_t sign = (uint8_t)((x >> 24) & 0x80u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return 0x7f;
  if (abs == 0x7f800000u) return (uint8_t)(sign | largest_bits);  // a saturating cast's infinity
  float a; std::memcpy(&a, &abs, 4);
  const int min_e = 1 - bias, e = (int)(abs >> 23) - 127;
  const float quantum = tf_pow2((e < min_e ? min_e : e) - m);
  const float r = __builtin_rintf(a / quantum) * quantum;
  if (r > largest) return (uint8_t)(sign | largest_bits);
  if (r == 0.0f) return sign;
  uint32_t rb; std::memcpy(&rb, &r, 4);
  const int e2 = (int)(rb >> 23) - 127;
  if (e2 < min_e) return (uint8_t)(sign | (int)(r / tf_pow2(min_e - m)));
  return (uint8_t)(sign | (e2 + bias) << m | ((int)(r / tf_pow2(e2 - m)) - (1 << m)));
}
static inline float tf_f8e4m3_to_float(uint8_t b) { return tf_f8_to_float(b, 3, 7, false); }
static inline float tf_f8e5m2_to_float(uint8_t b) { return tf_f8_to_float(b, 2, 15, true); }
static inline uint8_t tf_float_to_f8e4m3(float v) { return tf_float_to_f8(v, 3, 7, 448.0f, 0x7e); }
static inline uint8_t tf_float_to_f8e5m2(float v) { return tf_float_to_f8(v, 2, 15, 57344.0f, 0x7b); }
// The FNUZ forms: bias one higher, every pattern a value but 0x80 (their NaN, the others' -0).
static inline float tf_f8fnuz_to_float(uint8_t b, int m, int bias) {
  if (b == 0x80) return std::numeric_limits<float>::quiet_NaN();
  const int field = (b & 0x7f) >> m, mant = b & ((1 << m) - 1);
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  if (field == 0) return sign * (float)mant * tf_pow2(1 - bias - m);
  return sign * (float)((1 << m) + mant) * tf_pow2(field - bias - m);
}
static inline uint8_t tf_float_to_f8fnuz(float v, int m, int bias, float largest) {
  if (v != v) return 0x80;
  const uint8_t b = tf_float_to_f8(v, m, bias, largest, 0x7f);
  return b == 0x80 ? 0 : b;  // one zero
}
static inline float tf_f8e4m3fnuz_to_float(uint8_t b) { return tf_f8fnuz_to_float(b, 3, 8); }
static inline float tf_f8e5m2fnuz_to_float(uint8_t b) { return tf_f8fnuz_to_float(b, 2, 16); }
static inline uint8_t tf_float_to_f8e4m3fnuz(float v) { return tf_float_to_f8fnuz(v, 3, 8, 240.0f); }
static inline uint8_t tf_float_to_f8e5m2fnuz(float v) { return tf_float_to_f8fnuz(v, 2, 16, 57344.0f); }

static inline double tf_load_f64(const double* p, int64_t i) { return p[i]; }
static inline float tf_load_f32(const float* p, int64_t i) { return p[i]; }
static inline float tf_load_f16(const uint16_t* p, int64_t i) { return tf_half_to_float(p[i]); }
static inline float tf_load_bf16(const uint16_t* p, int64_t i) { return tf_bf16_to_float(p[i]); }
static inline int64_t tf_load_i64(const int64_t* p, int64_t i) { return p[i]; }
static inline int64_t tf_load_i32(const int32_t* p, int64_t i) { return p[i]; }
static inline int64_t tf_load_i8(const int8_t* p, int64_t i) { return p[i]; }
static inline int64_t tf_load_u8(const uint8_t* p, int64_t i) { return p[i]; }
static inline float tf_load_bool(const uint8_t* p, int64_t i) { return p[i] ? 1.0f : 0.0f; }
static inline float tf_load_f8e4m3(const uint8_t* p, int64_t i) { return tf_f8e4m3_to_float(p[i]); }
static inline float tf_load_f8e5m2(const uint8_t* p, int64_t i) { return tf_f8e5m2_to_float(p[i]); }
static inline float tf_load_f8e4m3fnuz(const uint8_t* p, int64_t i) { return tf_f8e4m3fnuz_to_float(p[i]); }
static inline float tf_load_f8e5m2fnuz(const uint8_t* p, int64_t i) { return tf_f8e5m2fnuz_to_float(p[i]); }

// Casts compute the value the target dtype holds, in that dtype's compute type.
template <typename T> static inline int64_t tf_to_int(T v) { return v != v ? 0 : (int64_t)v; }
template <typename T> static inline double tf_cast_f64(T v) { return (double)v; }
template <typename T> static inline float tf_cast_f32(T v) { return (float)v; }
template <typename T> static inline float tf_cast_f16(T v) { return tf_half_to_float(tf_float_to_half((float)v)); }
template <typename T> static inline float tf_cast_bf16(T v) { return tf_bf16_to_float(tf_float_to_bf16((float)v)); }
template <typename T> static inline int64_t tf_cast_i64(T v) { return tf_to_int(v); }
template <typename T> static inline int64_t tf_cast_i32(T v) { return (int32_t)tf_to_int(v); }
template <typename T> static inline int64_t tf_cast_i8(T v) { return (int8_t)tf_to_int(v); }
template <typename T> static inline int64_t tf_cast_u8(T v) { return (uint8_t)tf_to_int(v); }
template <typename T> static inline float tf_cast_bool(T v) { return v != T(0) ? 1.0f : 0.0f; }
template <typename T> static inline float tf_cast_f8e4m3(T v) { return tf_f8e4m3_to_float(tf_float_to_f8e4m3((float)v)); }
template <typename T> static inline float tf_cast_f8e5m2(T v) { return tf_f8e5m2_to_float(tf_float_to_f8e5m2((float)v)); }
template <typename T> static inline float tf_cast_f8e4m3fnuz(T v) { return tf_f8e4m3fnuz_to_float(tf_float_to_f8e4m3fnuz((float)v)); }
template <typename T> static inline float tf_cast_f8e5m2fnuz(T v) { return tf_f8e5m2fnuz_to_float(tf_float_to_f8e5m2fnuz((float)v)); }

template <typename T> static inline void tf_store_f64(double* p, int64_t i, T v) { p[i] = (double)v; }
template <typename T> static inline void tf_store_f32(float* p, int64_t i, T v) { p[i] = (float)v; }
template <typename T> static inline void tf_store_f16(uint16_t* p, int64_t i, T v) { p[i] = tf_float_to_half((float)v); }
template <typename T> static inline void tf_store_bf16(uint16_t* p, int64_t i, T v) { p[i] = tf_float_to_bf16((float)v); }
template <typename T> static inline void tf_store_i64(int64_t* p, int64_t i, T v) { p[i] = tf_cast_i64(v); }
template <typename T> static inline void tf_store_i32(int32_t* p, int64_t i, T v) { p[i] = (int32_t)tf_cast_i32(v); }
template <typename T> static inline void tf_store_i8(int8_t* p, int64_t i, T v) { p[i] = (int8_t)tf_cast_i8(v); }
template <typename T> static inline void tf_store_u8(uint8_t* p, int64_t i, T v) { p[i] = (uint8_t)tf_cast_u8(v); }
template <typename T> static inline void tf_store_bool(uint8_t* p, int64_t i, T v) { p[i] = v != T(0) ? 1 : 0; }
template <typename T> static inline void tf_store_f8e4m3(uint8_t* p, int64_t i, T v) { p[i] = tf_float_to_f8e4m3((float)v); }
template <typename T> static inline void tf_store_f8e5m2(uint8_t* p, int64_t i, T v) { p[i] = tf_float_to_f8e5m2((float)v); }
template <typename T> static inline void tf_store_f8e4m3fnuz(uint8_t* p, int64_t i, T v) { p[i] = tf_float_to_f8e4m3fnuz((float)v); }
template <typename T> static inline void tf_store_f8e5m2fnuz(uint8_t* p, int64_t i, T v) { p[i] = tf_float_to_f8e5m2fnuz((float)v); }

// exp for float compute (f32 and the half types), inlined so the vectoriser sees plain
// arithmetic: libmvec's _ZGVdN8v_expf is a call that (1) costs more than this whole body
// (0.75 vs 0.54 ns per element on the development machine's Zen 3) and (2) keeps GCC from
// if-converting a loop that also holds a select or a NaN-propagating max, so such a loop
// stayed scalar. x = n ln2 + r with |r| <= ln2/2 (Cody-Waite, ln2 in two parts); exp(r)
// by a degree-5 polynomial fitted for relative error (9e-8); the result is 2 p(r) 2^(n-1),
// with n read from the low mantissa bits of the rounding shifter (n - 1 keeps 2^n
// representable up to x = ln(FLT_MAX)). Measured against double exp over every 97th
// float: at most 2.02 ulp. x > ln(FLT_MAX) gives inf (also +inf, whose reduction is NaN);
// NaN stays NaN. Results below 2^-125 (x < -86.99) are 0, as the GPU's exp flushes below
// 2^-126: scaling by two factors to reach the subnormals cost GELU, which is bound by
// this function, 16% (7.85 -> 9.3 ms for 16M elements on 2 cores).
static inline float tf_exp_f32(float x) {
  const float shifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float t = __builtin_fmaf(x, 1.44269504088896341f, shifter);
  const float n = t - shifter;
  float r = __builtin_fmaf(n, -0.693145751953125f, x);
  r = __builtin_fmaf(n, -1.428606765330187045e-06f, r);
  float p = __builtin_fmaf(0x1.0fa80ep-7f, r, 0x1.573a4ap-5f);
  p = __builtin_fmaf(p, r, 0x1.555a6ap-3f);
  p = __builtin_fmaf(p, r, 0x1.fffdc6p-2f);
  p = __builtin_fmaf(p, r, 0x1.fffff6p-1f);
  p = __builtin_fmaf(p, r, 1.0f);
  uint32_t bits; std::memcpy(&bits, &t, 4);
  bits = (bits << 23) + (126u << 23);  // 2^(n-1): the shift drops the shifter's own bits
  float scale; std::memcpy(&scale, &bits, 4);
  const float result = (p + p) * scale;
  return x > 88.72284f ? std::numeric_limits<float>::infinity() : (x < -86.99f ? 0.0f : result);
}
static inline float tf_sigmoid_f32(float x) { return 1.0f / (1.0f + tf_exp_f32(-x)); }

// Philox4x32-10, exactly as src/support/philox.cc: one 10-round block gives the four
// consecutive elements 4c .. 4c+3 of a seeded stream. Written without branches or an
// indexed array (the key bump closes each round, the output word is picked by ?:) so an
// `omp simd` loop vectorises it: the same bits.
static inline void tf_philox_block(uint64_t seed, uint64_t counter, uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3) {
  c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c0 = n0; c1 = (uint32_t)p1; c2 = n2; c3 = (uint32_t)p0;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
}
static inline float tf_philox_word_to_float(uint32_t word) { return (float)(word >> 8) * (1.0f / 16777216.0f); }
// Element `index` alone: a whole block for one of its four words.
static inline float tf_philox_uniform(uint64_t seed, uint64_t index) {
  uint32_t c0, c1, c2, c3;
  tf_philox_block(seed, index / 4, c0, c1, c2, c3);
  uint32_t lane = (uint32_t)(index & 3);
  return tf_philox_word_to_float(lane == 0 ? c0 : lane == 1 ? c1 : lane == 2 ? c2 : c3);
}
// Elements 4 * counter .. 4 * counter + 3 into out[0..3]: a quarter of the rounds per
// element (a row kernel fills its row's random values this way before its first pass).
static inline void tf_philox_uniform4(uint64_t seed, uint64_t counter, float* out) {
  uint32_t c0, c1, c2, c3;
  tf_philox_block(seed, counter, c0, c1, c2, c3);
  out[0] = tf_philox_word_to_float(c0);
  out[1] = tf_philox_word_to_float(c1);
  out[2] = tf_philox_word_to_float(c2);
  out[3] = tf_philox_word_to_float(c3);
}
)TFRAW";

}  // namespace

const std::string& CppPrelude() {
  static const std::string prelude = std::string("// tilefuse generated kernel\n") + kScalarLibraryText + kHelpers;
  return prelude;
}

}  // namespace tilefuse
