// tilefuse device library: what every generated CUDA kernel includes (NVRTC gets it as an
// in-memory header, so kernels need no include path). It gives the scalar semantics of
// ops.def for float, double and int64 under the same names as src/ir/scalar_library.h,
// per-dtype loads, stores and casts (half types travel as 16-bit patterns and compute in
// float), 16-byte vector accesses, warp and block reductions, and Philox4x32-10 exactly as
// src/support/philox.cc.
//
// Everything is in namespace tf, where generated kernels live too: there the scalar
// functions (exp, fmod, ...) hide the CUDA math library's overloads of the same names, and
// outside it nothing of CUDA's or the C library's is redeclared, so a kernel may also
// include <cuda_bf16.h>, <cuda_fp16.h> or <cuda/std/cstdint> (NvrtcCompiler passes the
// toolkit's include path).
#pragma once

// math.h's macros, which the literals generated code prints name (emit_util.cc); defined
// only where no header has (<cuda/std/cmath> included after this one redefines them: a
// warning, and 0.7 s of compile time no kernel should pay).
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif

namespace tf {

// Programmatic dependent launch (sm_90 and later). A kernel launched with it
// (LaunchSpec::awaits_prior_grid) is placed on the GPU while the kernel ahead of it in the
// stream still runs, so the launch's latency and the ramp of its CTAs overlap that kernel's
// tail. It must not touch memory before this wait returns: the grids it depends on have then
// finished and their writes are visible. Every generated kernel calls it first. The
// kernel behind may be launched right away: it waits here in turn, and since this kernel's
// CTAs are all resident by the time every one of them has said so, the early launch takes
// no SM from this grid.
//
// TF_TRIGGER_BEFORE_WAIT (the unit's first line, TILEFUSE_TRIGGER_FIRST=1): the kernel behind is
// released before this one's wait, so its CTAs may be placed, and load their weights, while the
// grid ahead of this one still runs: two kernels' weights crossing during one kernel rather than
// one. As safe: the kernel behind waits for this grid to finish, which finishes only after its
// own wait, and it too is launched only once every CTA of this grid is resident.
#ifndef TF_TRIGGER_BEFORE_WAIT
#define TF_TRIGGER_BEFORE_WAIT 0
#endif
__device__ __forceinline__ void tf_await_prior_grid() {
#if __CUDA_ARCH__ >= 900
#if TF_TRIGGER_BEFORE_WAIT
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#else
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
#endif
}

// Asks for the line holding *p in this SM's L1 (a hint: no value, no fault). Issued where the
// grids a value depends on have finished, as a load would be.
__device__ __forceinline__ void PrefetchL1(const void* p) { asm volatile("prefetch.global.L1 [%0];" ::"l"(p)); }

// NVRTC 13.0 has no built-in <cstdint> (nor <cuda/std/cstdint> without the toolkit's
// include path, which a machine with NVRTC from a Python wheel may lack), so the
// fixed-width types generated code names are tf's own: the same types libcu++ gives them
// under NVRTC, so they agree with <cuda/std/cstdint> where a kernel includes it.
using int8_t = signed char;
using uint8_t = unsigned char;
using uint16_t = unsigned short;
using int32_t = int;
using uint32_t = unsigned int;
using int64_t = long long;
using uint64_t = unsigned long long;

#define TFD static __device__ __forceinline__

// ---- scalar semantics (float: fast hardware paths; double: the libdevice functions) ----
TFD float exp(float a) { return ::expf(a); }
// exp through the SFU's exp2: a few ulp off for large |a|, for values stored as half types.
TFD float tf_exp_fast(float a) { return exp2f(a * 1.4426950408889634f); }
TFD double exp(double a) { return ::exp(a); }
// exp(a) for a <= 0 (a value less its row's max: softmax, logsumexp, the online sum's
// rescale): 2^(a log2 e) by the SFU's approximation, two instructions where expf's accurate
// range reduction takes eight. For a <= 0 it is within about 2e-7 of exp(a), absolutely: the
// SFU's 2 ulp, and the product's rounding, |a| ulp of a result below 1/|a|. -inf gives 0,
// NaN NaN. Cross-entropy over a 128K vocabulary issued about 14 instructions an element
// with expf: all an H200's SMs can issue at its copy rate.
// The NVVM builtin, not inline asm: around an asm statement the compiler kept more values
// live (a 1024-thread softmax row held in 64 registers spilled 44 bytes).
TFD float tf_exp_nonpositive(float a) { return __nvvm_ex2_approx_ftz_f(a * 1.4426950408889634f); }
TFD double tf_exp_nonpositive(double a) { return ::exp(a); }
TFD float log(float a) { return ::logf(a); }
TFD double log(double a) { return ::log(a); }
TFD float sqrt(float a) { return ::sqrtf(a); }
TFD double sqrt(double a) { return ::sqrt(a); }
TFD float rsqrt(float a) { return ::rsqrtf(a); }
TFD double rsqrt(double a) { return ::rsqrt(a); }
TFD float tanh(float a) { return ::tanhf(a); }
TFD double tanh(double a) { return ::tanh(a); }
TFD float erf(float a) { return ::erff(a); }
TFD double erf(double a) { return ::erf(a); }
TFD float sin(float a) { return ::sinf(a); }
TFD double sin(double a) { return ::sin(a); }
TFD float cos(float a) { return ::cosf(a); }
TFD double cos(double a) { return ::cos(a); }
TFD float asin(float a) { return ::asinf(a); }
TFD double asin(double a) { return ::asin(a); }
TFD float acos(float a) { return ::acosf(a); }
TFD double acos(double a) { return ::acos(a); }
TFD float atan(float a) { return ::atanf(a); }
TFD double atan(double a) { return ::atan(a); }
TFD float atan2(float a, float b) { return ::atan2f(a, b); }
TFD double atan2(double a, double b) { return ::atan2(a, b); }
TFD float fabs(float a) { return ::fabsf(a); }
TFD double fabs(double a) { return ::fabs(a); }
TFD float floor(float a) { return ::floorf(a); }
TFD double floor(double a) { return ::floor(a); }
TFD float ceil(float a) { return ::ceilf(a); }
TFD double ceil(double a) { return ::ceil(a); }
TFD float pow(float a, float b) { return ::powf(a, b); }
TFD double pow(double a, double b) { return ::pow(a, b); }
TFD float fmod(float a, float b) { return ::fmodf(a, b); }
TFD double fmod(double a, double b) { return ::fmod(a, b); }
// Integers (and mixed types) go through double, as the host library does.
template <typename T> TFD double exp(T a) { return ::exp((double)a); }
template <typename T> TFD double log(T a) { return ::log((double)a); }
template <typename T> TFD double sqrt(T a) { return ::sqrt((double)a); }
template <typename T> TFD double tanh(T a) { return ::tanh((double)a); }
template <typename T> TFD double erf(T a) { return ::erf((double)a); }
template <typename T> TFD double sin(T a) { return ::sin((double)a); }
template <typename T> TFD double cos(T a) { return ::cos((double)a); }
template <typename T> TFD double asin(T a) { return ::asin((double)a); }
template <typename T> TFD double acos(T a) { return ::acos((double)a); }
template <typename T> TFD double atan(T a) { return ::atan((double)a); }
template <typename A, typename B> TFD double atan2(A a, B b) { return ::atan2((double)a, (double)b); }
template <typename T> TFD double fabs(T a) { return ::fabs((double)a); }
template <typename T> TFD double floor(T a) { return ::floor((double)a); }
template <typename T> TFD double ceil(T a) { return ::ceil((double)a); }
template <typename A, typename B> TFD double pow(A a, B b) { return ::pow((double)a, (double)b); }
template <typename A, typename B> TFD double fmod(A a, B b) { return ::fmod((double)a, (double)b); }
template <typename T> TFD double rsqrt(T a) { return ::rsqrt((double)a); }

// The SFU's tanh (sm_75+): about 2^-11 relative error, for values stored as half types.
TFD float tf_tanh_approx(float a) {
  float r;
  asm("tanh.approx.f32 %0, %1;" : "=f"(r) : "f"(a));
  return r;
}

TFD float recip(float a) { return 1.0f / a; }
TFD double recip(double a) { return 1.0 / a; }
template <typename T> TFD T recip(T a) { return T(1) / a; }
TFD float sigmoid(float a) { return 1.0f / (1.0f + exp(-a)); }
// For values rounded to half types (CudaFastForm): exp2 of the scaled argument and the
// approximate quotient, each within a few ulp of f32; 0 and 1 at the extremes.
TFD float tf_sigmoid_fast(float a) { return __fdividef(1.0f, 1.0f + tf_exp_fast(-a)); }
// 1 + erf(t) (= erfc(-t)), erf GELU's sum, for a value rounded to 16 bits: erfc(|t|) as
// 2^(Q(|t|) - t^2 log2 e), Q a degree-8 fit of log2(erfc(u) e^(u^2)) on [0, 6] (held at 6
// beyond: 1 + erf(t) is then below 2e-17), and 2 - erfc(|t|) for t >= 0. Within 1e-5 of
// 1 + erf(t), relatively, for |t| <= 6, where 1 + erff(t) loses digits to the sum once erf(t)
// nears -1 (x < -2 in the GELU). 15 instructions against erff's branch-free pair of
// polynomials (about 30): ViT-B's fc1 with its erf GELU epilogue took 78 µs where its bias
// alone took 53 (6304 x 768 -> 3072, H200, 2026-12-01).
TFD float tf_one_plus_erf_fast(float t) {
  const float a = fabsf(t), u = fminf(a, 6.0f);
  float q = 1.28024487e-06f;
  q = fmaf(q, u, -4.33604837e-05f);
  q = fmaf(q, u, 0.000654325006f);
  q = fmaf(q, u, -0.00586236594f);
  q = fmaf(q, u, 0.0352531783f);
  q = fmaf(q, u, -0.153966397f);
  q = fmaf(q, u, 0.52648598f);
  q = fmaf(q, u, -1.6282599f);
  q = fmaf(q, u, 9.41466351e-06f);
  const float e = __nvvm_ex2_approx_ftz_f(fmaf(a * -1.4426950408889634f, a, q));  // erfc(|t|)
  return t >= 0.0f ? 2.0f - e : e;
}
TFD double sigmoid(double a) { return 1.0 / (1.0 + ::exp(-a)); }
template <typename T> TFD T relu(T a) { return a < T(0) ? T(0) : a; }
template <typename T> TFD T is_nan(T a) { return a != a ? T(1) : T(0); }
TFD float is_inf(float a) { return ::isinf(a) ? 1.0f : 0.0f; }
TFD double is_inf(double a) { return ::isinf(a) ? 1.0 : 0.0; }
template <typename T> TFD T is_inf(T) { return T(0); }
template <typename T> TFD T max_nan(T a, T b) { return (a != a || a > b) ? a : b; }
template <typename T> TFD T min_nan(T a, T b) { return (a != a || a < b) ? a : b; }
// max.NaN and min.NaN (sm_80 on): one instruction where the comparisons and the select took
// three, a fifth of a max reduction's instructions an element.
#if __CUDA_ARCH__ >= 800
TFD float max_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
TFD float min_nan(float a, float b) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
#endif
template <typename T> TFD T floor_mod(T a, T b) {
  T r = fmod(a, b);
  return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? r + b : r;
}
TFD int64_t floor_mod(int64_t a, int64_t b) {
  int64_t r = b == 0 ? 0 : a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
TFD int64_t fmod(int64_t a, int64_t b) { return b == 0 ? 0 : a % b; }
template <typename T> TFD T logical_not(T a) { return a == T(0) ? T(1) : T(0); }
template <typename T> TFD T logical_and(T a, T b) { return (a != T(0) && b != T(0)) ? T(1) : T(0); }
template <typename T> TFD T logical_or(T a, T b) { return (a != T(0) || b != T(0)) ? T(1) : T(0); }
template <typename T> TFD T logical_xor(T a, T b) { return ((a != T(0)) != (b != T(0))) ? T(1) : T(0); }
template <typename T> TFD T compare_eq(T a, T b) { return a == b ? T(1) : T(0); }
template <typename T> TFD T compare_lt(T a, T b) { return a < b ? T(1) : T(0); }
template <typename T> TFD T compare_le(T a, T b) { return a <= b ? T(1) : T(0); }
template <typename T> TFD T compare_gt(T a, T b) { return a > b ? T(1) : T(0); }
template <typename T> TFD T compare_ge(T a, T b) { return a >= b ? T(1) : T(0); }
template <typename C, typename T> TFD T select(C c, T x, T y) { return c != C(0) ? x : y; }

TFD int64_t tf_clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

// ---- dtype conversions: round to nearest even, NaN kept, like the host prelude ----
TFD float tf_half_to_float(uint16_t h) {
  float f;
  asm("{ cvt.f32.f16 %0, %1; }" : "=f"(f) : "h"(h));
  return f;
}
TFD uint16_t tf_float_to_half(float f) {
  uint16_t h;
  asm("{ cvt.rn.f16.f32 %0, %1; }" : "=h"(h) : "f"(f));
  return h;
}
TFD float tf_bf16_to_float(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
// Round to nearest even, in integer arithmetic (a cvt.rn.bf16.f32 in inline asm, one
// instruction, put vectorised stores' arrays of halves on the stack: ptxas no longer
// merged them into 32-bit words). Pairs convert in one instruction: tf_pack2_bf16.
TFD uint16_t tf_float_to_bf16(float f) {
  uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

// 8-bit floats (ONNX's FLOAT8E4M3FN: m = 3, bias 7; FLOAT8E5M2: m = 2, bias 15, IEEE), as
// src/ir/dtype.cc converts them: round to nearest even at the value's binade (the subnormal
// spacing below the smallest normal), an overflow (an infinity too)
// saturated to the largest value, as ONNX's Cast does by default; casts that do not saturate
// are not lowered, and stores of these types come from casts.
TFD float tf_pow2(int e) { return __uint_as_float((uint32_t)(e + 127) << 23); }
TFD float tf_f8_to_float(uint8_t b, int m, int bias, bool ieee) {
  const int field = (b & 0x7f) >> m, mant = b & ((1 << m) - 1), top = (1 << (7 - m)) - 1;
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  if (ieee && field == top) return mant == 0 ? sign * INFINITY : NAN;
  if (!ieee && (b & 0x7f) == 0x7f) return NAN;
  if (field == 0) return sign * (float)mant * tf_pow2(1 - bias - m);
  return sign * (float)((1 << m) + mant) * tf_pow2(field - bias - m);
}
TFD uint8_t tf_float_to_f8(float v, int m, int bias, float largest, uint8_t largest_bits) {
  const uint32_t x = __float_as_uint(v);
  const uint8_t sign = (uint8_t)((x >> 24) & 0x80u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return 0x7f;
  if (abs == 0x7f800000u) return (uint8_t)(sign | largest_bits);  // a saturating cast's infinity
  const float a = __uint_as_float(abs);
  const int min_e = 1 - bias, e = (int)(abs >> 23) - 127;
  const float quantum = tf_pow2((e < min_e ? min_e : e) - m);
  const float r = rintf(a / quantum) * quantum;
  if (r > largest) return (uint8_t)(sign | largest_bits);
  if (r == 0.0f) return sign;
  const uint32_t rb = __float_as_uint(r);
  const int e2 = (int)(rb >> 23) - 127;
  if (e2 < min_e) return (uint8_t)(sign | (int)(r / tf_pow2(min_e - m)));
  return (uint8_t)(sign | (e2 + bias) << m | ((int)(r / tf_pow2(e2 - m)) - (1 << m)));
}
#if __CUDA_ARCH__ >= 890
// Ada and Hopper convert in hardware: round to nearest even, .satfinite as ONNX's saturating
// Cast (an infinity to the largest value, NaN to NaN). The software forms above divide twice
// a value; an FP8 GEMM's epilogue quantizing its output spent longer converting than the
// product took.
TFD uint8_t tf_float_to_f8e4m3(float v) {
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(v));
  return (uint8_t)r;
}
TFD uint8_t tf_float_to_f8e5m2(float v) {
  uint16_t r;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(v));
  return (uint8_t)r;
}
// (The byte converts into the low half of an f16 pair: every 8-bit float is exact in f16.)
TFD float tf_f8e4m3_to_float(uint8_t b) {
  uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"((uint16_t)b));
  return tf_half_to_float((uint16_t)h2);
}
TFD float tf_f8e5m2_to_float(uint8_t b) {
  uint32_t h2;
  asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(h2) : "h"((uint16_t)b));
  return tf_half_to_float((uint16_t)h2);
}
#else
TFD float tf_f8e4m3_to_float(uint8_t b) { return tf_f8_to_float(b, 3, 7, false); }
TFD float tf_f8e5m2_to_float(uint8_t b) { return tf_f8_to_float(b, 2, 15, true); }
TFD uint8_t tf_float_to_f8e4m3(float v) { return tf_float_to_f8(v, 3, 7, 448.0f, 0x7e); }
TFD uint8_t tf_float_to_f8e5m2(float v) { return tf_float_to_f8(v, 2, 15, 57344.0f, 0x7b); }
#endif
// The FNUZ forms (bias one higher, every pattern a value but 0x80, their NaN and the others'
// -0), in software: no GPU converts them.
TFD float tf_f8fnuz_to_float(uint8_t b, int m, int bias) {
  if (b == 0x80) return NAN;
  const int field = (b & 0x7f) >> m, mant = b & ((1 << m) - 1);
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  if (field == 0) return sign * (float)mant * tf_pow2(1 - bias - m);
  return sign * (float)((1 << m) + mant) * tf_pow2(field - bias - m);
}
TFD uint8_t tf_float_to_f8fnuz(float v, int m, int bias, float largest) {
  if (v != v) return 0x80;
  const uint8_t b = tf_float_to_f8(v, m, bias, largest, 0x7f);
  return b == 0x80 ? 0 : b;  // one zero
}
TFD float tf_f8e4m3fnuz_to_float(uint8_t b) { return tf_f8fnuz_to_float(b, 3, 8); }
TFD float tf_f8e5m2fnuz_to_float(uint8_t b) { return tf_f8fnuz_to_float(b, 2, 16); }
TFD uint8_t tf_float_to_f8e4m3fnuz(float v) { return tf_float_to_f8fnuz(v, 3, 8, 240.0f); }
TFD uint8_t tf_float_to_f8e5m2fnuz(float v) { return tf_float_to_f8fnuz(v, 2, 16, 57344.0f); }

// x / c correctly rounded, for a constant c (2^-24 <= |c| <= 2^24) and r = RN(1 / c): x · r
// corrected once by its remainder, which the FMA gives exactly (Markstein's theorem). IEEE's
// quotient where 2^-100 <= |x| <= 2^100, for zeros, infinities and NaN (checked against
// division over every third f32 of that range for quantization scales, 2026-12-04); within an
// ulp below and above it. IEEE division's subroutine, inlined at every element of a GEMM
// epilogue that quantizes (x / scale), made ptxas take 971 ms on a GPT-2 FP8 MLP product this
// form compiles in 186.
TFD float tf_div_by_constant(float x, float c, float r) {
  const float q = __fmul_rn(x, r), remainder = __fmaf_rn(-q, c, x);
  return remainder == 0.0f || remainder != remainder ? q : __fmaf_rn(remainder, r, q);
}

// From storage to compute type.
TFD double tf_cvt_f64(double v) { return v; }
TFD float tf_cvt_f32(float v) { return v; }
TFD float tf_cvt_f16(uint16_t v) { return tf_half_to_float(v); }
TFD float tf_cvt_bf16(uint16_t v) { return tf_bf16_to_float(v); }
TFD int64_t tf_cvt_i64(int64_t v) { return v; }
TFD int64_t tf_cvt_i32(int32_t v) { return v; }
TFD int64_t tf_cvt_i8(int8_t v) { return v; }
TFD int64_t tf_cvt_u8(uint8_t v) { return v; }
TFD float tf_cvt_bool(uint8_t v) { return v ? 1.0f : 0.0f; }
TFD float tf_cvt_f8e4m3(uint8_t v) { return tf_f8e4m3_to_float(v); }
TFD float tf_cvt_f8e5m2(uint8_t v) { return tf_f8e5m2_to_float(v); }
TFD float tf_cvt_f8e4m3fnuz(uint8_t v) { return tf_f8e4m3fnuz_to_float(v); }
TFD float tf_cvt_f8e5m2fnuz(uint8_t v) { return tf_f8e5m2fnuz_to_float(v); }

template <typename T> TFD int64_t tf_to_int(T v) { return v != v ? 0 : (int64_t)v; }
// Casts compute the value the target dtype holds, in that dtype's compute type.
template <typename T> TFD double tf_cast_f64(T v) { return (double)v; }
template <typename T> TFD float tf_cast_f32(T v) { return (float)v; }
template <typename T> TFD float tf_cast_f16(T v) { return tf_half_to_float(tf_float_to_half((float)v)); }
// A value rounded to bf16 and back: one cvt and a shift on sm_80 and later, not
// tf_float_to_bf16's integer rounding (ten instructions). A training graph's epilogues round
// to bf16 a dozen times an element (GPT-2's GELU backward: 3.7x the PTX, and its product ran
// 3x slower in the training step than the same product alone). The same rounding (to nearest
// even; a NaN stays a NaN, its payload aside).
template <typename T> TFD float tf_cast_bf16(T v) {
#if __CUDA_ARCH__ >= 800
  uint32_t r;
  asm("{ cvt.rn.bf16x2.f32 %0, %1, %2; }" : "=r"(r) : "f"(0.0f), "f"((float)v));
  return __uint_as_float(r << 16);
#else
  return tf_bf16_to_float(tf_float_to_bf16((float)v));
#endif
}
template <typename T> TFD int64_t tf_cast_i64(T v) { return tf_to_int(v); }
template <typename T> TFD int64_t tf_cast_i32(T v) { return (int32_t)tf_to_int(v); }
template <typename T> TFD int64_t tf_cast_i8(T v) { return (int8_t)tf_to_int(v); }
template <typename T> TFD int64_t tf_cast_u8(T v) { return (uint8_t)tf_to_int(v); }
template <typename T> TFD float tf_cast_bool(T v) { return v != T(0) ? 1.0f : 0.0f; }
template <typename T> TFD float tf_cast_f8e4m3(T v) { return tf_f8e4m3_to_float(tf_float_to_f8e4m3((float)v)); }
template <typename T> TFD float tf_cast_f8e5m2(T v) { return tf_f8e5m2_to_float(tf_float_to_f8e5m2((float)v)); }
template <typename T> TFD float tf_cast_f8e4m3fnuz(T v) { return tf_f8e4m3fnuz_to_float(tf_float_to_f8e4m3fnuz((float)v)); }
template <typename T> TFD float tf_cast_f8e5m2fnuz(T v) { return tf_f8e5m2fnuz_to_float(tf_float_to_f8e5m2fnuz((float)v)); }

// From compute to storage type.
template <typename T> TFD double tf_pack_f64(T v) { return (double)v; }
template <typename T> TFD float tf_pack_f32(T v) { return (float)v; }
template <typename T> TFD uint16_t tf_pack_f16(T v) { return tf_float_to_half((float)v); }
template <typename T> TFD uint16_t tf_pack_bf16(T v) { return tf_float_to_bf16((float)v); }
// Two values packed into one 32-bit word, `lo` in the low half (one conversion for both on
// sm_80 and later).
TFD uint32_t tf_pack2_f16(float lo, float hi) {
#if __CUDA_ARCH__ >= 800
  uint32_t r;
  asm("{ cvt.rn.f16x2.f32 %0, %1, %2; }" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return (uint32_t)tf_float_to_half(lo) | (uint32_t)tf_float_to_half(hi) << 16;
#endif
}
TFD uint32_t tf_pack2_bf16(float lo, float hi) {
#if __CUDA_ARCH__ >= 800
  uint32_t r;
  asm("{ cvt.rn.bf16x2.f32 %0, %1, %2; }" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return (uint32_t)tf_float_to_bf16(lo) | (uint32_t)tf_float_to_bf16(hi) << 16;
#endif
}
// The element-wise max of two words of packed pairs (NaN-propagating): a half-type row held as
// pairs takes its max without unpacking, exact in the element type, half the instructions.
// tf_lowest_pair_*: both halves -inf.
constexpr uint32_t tf_lowest_pair_bf16 = 0xFF80FF80u, tf_lowest_pair_f16 = 0xFC00FC00u;
template <bool kBf16> TFD uint32_t tf_max_pairs(uint32_t a, uint32_t b) {
#if __CUDA_ARCH__ >= 800
  uint32_t r;
  if constexpr (kBf16) asm("{ max.NaN.bf16x2 %0, %1, %2; }" : "=r"(r) : "r"(a), "r"(b));
  else asm("{ max.NaN.f16x2 %0, %1, %2; }" : "=r"(r) : "r"(a), "r"(b));
  return r;
#else
  auto element = [](uint32_t w, int at) { return kBf16 ? tf_cvt_bf16((uint16_t)(w >> at)) : tf_cvt_f16((uint16_t)(w >> at)); };
  const float lo = max_nan(element(a, 0), element(b, 0)), hi = max_nan(element(a, 16), element(b, 16));
  return kBf16 ? tf_pack2_bf16(lo, hi) : tf_pack2_f16(lo, hi);
#endif
}
TFD uint32_t tf_max_pairs_bf16(uint32_t a, uint32_t b) { return tf_max_pairs<true>(a, b); }
TFD uint32_t tf_max_pairs_f16(uint32_t a, uint32_t b) { return tf_max_pairs<false>(a, b); }
template <typename T> TFD int64_t tf_pack_i64(T v) { return tf_cast_i64(v); }
template <typename T> TFD int32_t tf_pack_i32(T v) { return (int32_t)tf_cast_i32(v); }
template <typename T> TFD int8_t tf_pack_i8(T v) { return (int8_t)tf_cast_i8(v); }
template <typename T> TFD uint8_t tf_pack_u8(T v) { return (uint8_t)tf_cast_u8(v); }
template <typename T> TFD uint8_t tf_pack_f8e4m3(T v) { return tf_float_to_f8e4m3((float)v); }
template <typename T> TFD uint8_t tf_pack_f8e5m2(T v) { return tf_float_to_f8e5m2((float)v); }
template <typename T> TFD uint8_t tf_pack_f8e4m3fnuz(T v) { return tf_float_to_f8e4m3fnuz((float)v); }
template <typename T> TFD uint8_t tf_pack_f8e5m2fnuz(T v) { return tf_float_to_f8e5m2fnuz((float)v); }
template <typename T> TFD uint8_t tf_pack_bool(T v) { return v != T(0) ? 1 : 0; }

// ---- vector accesses: N elements at p (16-byte aligned when N*sizeof(T) is a multiple of 16) ----
template <int N, typename T> TFD void tf_vload(const T* __restrict__ p, T (&out)[N]) {
  constexpr int kBytes = N * (int)sizeof(T);
  if constexpr (kBytes % 16 == 0) {
#pragma unroll
    for (int k = 0; k < kBytes / 16; ++k) reinterpret_cast<uint4*>(out)[k] = __ldg(reinterpret_cast<const uint4*>(p) + k);
  } else if constexpr (kBytes % 8 == 0) {
#pragma unroll
    for (int k = 0; k < kBytes / 8; ++k) reinterpret_cast<uint2*>(out)[k] = __ldg(reinterpret_cast<const uint2*>(p) + k);
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) out[k] = p[k];
  }
}
template <int N, typename T> TFD void tf_vstore(T* __restrict__ p, const T (&in)[N]) {
  constexpr int kBytes = N * (int)sizeof(T);
  if constexpr (kBytes % 16 == 0) {
#pragma unroll
    for (int k = 0; k < kBytes / 16; ++k) reinterpret_cast<uint4*>(p)[k] = reinterpret_cast<const uint4*>(in)[k];
  } else if constexpr (kBytes % 8 == 0) {
#pragma unroll
    for (int k = 0; k < kBytes / 8; ++k) reinterpret_cast<uint2*>(p)[k] = reinterpret_cast<const uint2*>(in)[k];
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) p[k] = in[k];
  }
}

// A shared-memory pointer as the 32-bit address PTX's shared-space instructions take.
TFD unsigned tf_shared_address(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// ---- a row's next chunks copied into shared memory while the current row computes ----
// 16 bytes from global memory into shared memory, asynchronously (sm_80+), bypassing L1.
TFD void tf_cp_async16(void* shared, const void* global) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(tf_shared_address(shared)), "l"(global) : "memory");
}
TFD void tf_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// This thread's copies committed so far have landed (other threads' are not waited for).
TFD void tf_cp_async_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }
// 16 bytes of shared memory into a register array.
template <int N, typename T> TFD void tf_sload16(const uint4* shared, T (&out)[N]) {
  static_assert(N * sizeof(T) == 16, "16 bytes");
  *reinterpret_cast<uint4*>(out) = *shared;
}

// ---- reductions across threads ----
struct tf_sum { template <typename T> TFD T combine(T a, T b) { return a + b; } };
struct tf_prod { template <typename T> TFD T combine(T a, T b) { return a * b; } };
struct tf_max { template <typename T> TFD T combine(T a, T b) { return max_nan(a, b); } };
struct tf_min { template <typename T> TFD T combine(T a, T b) { return min_nan(a, b); } };

// Combines v across the lanes of a warp that share lane % kStride (kStride a power of two up
// to 32: the column template's lanes of one column); every lane gets its column's result.
template <int kStride, typename Op, typename T> TFD T tf_warp_reduce_strided(T v) {
#pragma unroll
  for (int offset = 16; offset >= kStride; offset /= 2) v = Op::combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Combines v across the `kWidth` consecutive lanes of a warp; every lane gets the result.
template <int kWidth, typename Op, typename T> TFD T tf_warp_reduce(T v) {
#pragma unroll
  for (int offset = kWidth / 2; offset > 0; offset /= 2) v = Op::combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
// Combines v across a block of kThreads (a multiple of 32); every thread gets the result.
// `scratch` holds 32 values; the trailing barrier lets the next call reuse it.
template <int kThreads, typename Op, typename T> TFD T tf_block_reduce(T v, T* scratch) {
  v = tf_warp_reduce<32, Op>(v);
  constexpr int kWarps = kThreads / 32;
  if (kWarps == 1) return v;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  // Lanes 0..kWarps-1 of every warp combine the partials; lane 0 then holds the total
  // (the higher lane groups hold copies of partials, never read) and broadcasts it.
  T w = scratch[lane < kWarps ? lane : 0];
  w = tf_warp_reduce<(kWarps < 32 ? kWarps : 32), Op>(w);
  w = __shfl_sync(0xffffffffu, w, 0);
  __syncthreads();
  return w;
}

// ---- a row split over blocks (codegen/cuda/cuda_row_splits.h) ----
// A block's total in its 8-byte slot of scratch memory, any accumulator type up to 8 bytes,
// written and read through L2 (L1 is not coherent across blocks).
template <typename T> TFD void tf_store_partial(unsigned long long* slots, long long i, T v) {
  static_assert(sizeof(T) <= 8, "a partial takes one 8-byte slot");
  union { T value; unsigned long long bits; } slot{};  // (no memcpy under NVRTC's headers)
  slot.value = v;
  __stcg(slots + i, slot.bits);
}
template <typename T> TFD T tf_load_partial(const unsigned long long* slots, long long i) {
  union { unsigned long long bits; T value; } slot;
  slot.bits = __ldcg(slots + i);
  return slot.value;
}

// ---- a row shared by the CTAs of a thread-block cluster (sm_90) ----
TFD unsigned tf_cluster_rank() {
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}
// Every thread of every CTA of the cluster arrives; shared-memory writes before it are
// visible to the cluster's reads after it.
// In two halves, for work between them: this thread's arrival (its memory accesses before
// it complete first), and the wait for every thread of the cluster.
TFD void tf_cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
TFD void tf_cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
TFD void tf_cluster_sync() {
  tf_cluster_arrive();
  tf_cluster_wait();
}
// A cluster reduction by exchange: each CTA sends its block total by st.async into its own
// slot in every CTA of the cluster (itself included), where a barrier counts the bytes, and
// combines the slots once all have landed. No CTA reads another's shared memory, so none
// waits for the others before it stores and leaves, and no arrival needs a release: a
// barrier.cluster.arrive.release compiles to MEMBAR.ALL.GPU, which the pull form (totals
// read across the cluster between two cluster barriers) paid twice a CTA — a softmax over
// 65536 columns in clusters of 4 spent as many cycles stalled on it as on its loads
// (Nsight Compute, H200, 2026-11-28).
//
// Before any CTA sends: thread 0 initialises each exchange's barrier (tf_exchange_init),
// every thread then starts (tf_exchange_start), and waits for the whole cluster to have
// started (tf_cluster_wait) before its first exchange.
TFD void tf_exchange_init(unsigned long long* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(tf_shared_address(bar)) : "memory");
}
TFD void tf_exchange_start() {
  if (threadIdx.x == 0) asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
// Sends `words` (kWords 32-bit words) into slot tf_cluster_rank() of `slots` ([kCluster]
// [kWords]) in every CTA of the cluster, and waits until this CTA's slots are all filled.
template <int kCluster, int kWords> TFD void tf_exchange(const unsigned (&words)[kWords], unsigned* slots, unsigned long long* bar) {
  static_assert(kWords == 1 || kWords == 2 || kWords == 4, "st.async moves 1, 2 or 4 words");
  const unsigned bar_address = tf_shared_address(bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar_address), "r"(kCluster * kWords * 4) : "memory");
    const unsigned mine = tf_shared_address(slots + tf_cluster_rank() * kWords);
#pragma unroll
    for (unsigned rank = 0; rank < kCluster; ++rank) {
      unsigned slot, remote_bar;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(slot) : "r"(mine), "r"(rank));
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_bar) : "r"(bar_address), "r"(rank));
      if constexpr (kWords == 1)
        asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(slot), "r"(words[0]), "r"(remote_bar)
                     : "memory");
      else if constexpr (kWords == 2)
        asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];" ::"r"(slot), "r"(words[0]),
                     "r"(words[1]), "r"(remote_bar)
                     : "memory");
      else
        asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(slot),
                     "r"(words[0]), "r"(words[1]), "r"(words[2]), "r"(words[3]), "r"(remote_bar)
                     : "memory");
    }
  }
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "TF_EXCHANGE_%=:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], 0;\n"
      "@!done bra TF_EXCHANGE_%=;\n"
      "}\n" ::"r"(bar_address)
      : "memory");
}
// An accumulator as the 32-bit words an exchange moves, and back.
TFD void tf_to_words(float v, unsigned* words) { words[0] = __float_as_uint(v); }
TFD void tf_to_words(double v, unsigned* words) {
  words[0] = (unsigned)__double2loint(v);
  words[1] = (unsigned)__double2hiint(v);
}
TFD void tf_to_words(int64_t v, unsigned* words) {
  words[0] = (unsigned)(uint64_t)v;
  words[1] = (unsigned)((uint64_t)v >> 32);
}
TFD void tf_from_words(const unsigned* words, float& v) { v = __uint_as_float(words[0]); }
TFD void tf_from_words(const unsigned* words, double& v) { v = __hiloint2double((int)words[1], (int)words[0]); }
TFD void tf_from_words(const unsigned* words, int64_t& v) { v = (int64_t)(((uint64_t)words[1] << 32) | words[0]); }
template <typename T> TFD T tf_from_words(const unsigned* words) {
  T v;
  tf_from_words(words, v);
  return v;
}
// Combines the block totals of the cluster's CTAs (each thread holds its block's `v`; `slots`
// [kCluster][sizeof(T) / 4] words and `bar` this reduction's alone). Every CTA combines them
// in rank order, so all get the same bits.
template <int kCluster, typename Op, typename T> TFD T tf_cluster_reduce(T v, unsigned* slots, unsigned long long* bar) {
  constexpr int kWords = sizeof(T) / 4;
  unsigned words[kWords];
  tf_to_words(v, words);
  tf_exchange<kCluster, kWords>(words, slots, bar);
  T total = tf_from_words<T>(slots);
#pragma unroll
  for (int rank = 1; rank < kCluster; ++rank) total = Op::combine(total, tf_from_words<T>(slots + rank * kWords));
  return total;
}

// The online softmax's pair (a row kernel's max and sum of exp in one pass): m the max of
// the values seen, s the sum of exp(x - m) over them. Combining two pairs rescales each
// sum to the larger max; while both maxes are -inf the shift is 0 (exp(-inf - -inf) would
// be NaN). A NaN max stays NaN and makes the sum NaN.
template <typename T> TFD void tf_max_sum_combine(T& m, T& s, T m2, T s2) {
  const T top = max_nan(m, m2);
  const T shift = top == -INFINITY ? T(0) : top;
  s = s * tf_exp_nonpositive(m - shift) + s2 * tf_exp_nonpositive(m2 - shift);
  m = top;
}
template <int kWidth, typename T> TFD void tf_warp_reduce_max_sum(T& m, T& s) {
#pragma unroll
  for (int offset = kWidth / 2; offset > 0; offset /= 2) {
    const T m2 = __shfl_xor_sync(0xffffffffu, m, offset), s2 = __shfl_xor_sync(0xffffffffu, s, offset);
    tf_max_sum_combine(m, s, m2, s2);
  }
}
// As tf_block_reduce, for the pair; every thread gets the result.
template <int kThreads, typename T> TFD void tf_block_reduce_max_sum(T& m, T& s, T* scratch_m, T* scratch_s) {
  tf_warp_reduce_max_sum<32>(m, s);
  constexpr int kWarps = kThreads / 32;
  if (kWarps == 1) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    scratch_m[warp] = m;
    scratch_s[warp] = s;
  }
  __syncthreads();
  T wm = scratch_m[lane < kWarps ? lane : 0], ws = scratch_s[lane < kWarps ? lane : 0];
  tf_warp_reduce_max_sum<(kWarps < 32 ? kWarps : 32)>(wm, ws);
  m = __shfl_sync(0xffffffffu, wm, 0);
  s = __shfl_sync(0xffffffffu, ws, 0);
  __syncthreads();
}

// As tf_cluster_reduce, for the pair (one exchange for both; `slots` [kCluster][2 *
// sizeof(T) / 4] words): every CTA combines the blocks' pairs in rank order, so all get the
// same bits.
template <int kCluster, typename T> TFD void tf_cluster_reduce_max_sum(T& m, T& s, unsigned* slots, unsigned long long* bar) {
  constexpr int kWords = sizeof(T) / 4;
  unsigned words[2 * kWords];
  tf_to_words(m, words);
  tf_to_words(s, words + kWords);
  tf_exchange<kCluster, 2 * kWords>(words, slots, bar);
  m = tf_from_words<T>(slots);
  s = tf_from_words<T>(slots + kWords);
#pragma unroll
  for (int rank = 1; rank < kCluster; ++rank)
    tf_max_sum_combine(m, s, tf_from_words<T>(slots + rank * 2 * kWords), tf_from_words<T>(slots + rank * 2 * kWords + kWords));
}

// ---- Philox4x32-10, exactly as src/support/philox.cc: element `index` of a seeded stream ----
// One 10-round block: the four words of elements 4·counter .. 4·counter + 3.
TFD void tf_philox_block(uint64_t seed, uint64_t counter, uint32_t (&c)[4]) {
  c[0] = (uint32_t)counter; c[1] = (uint32_t)(counter >> 32); c[2] = 0; c[3] = 0;
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    if (round > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    uint32_t hi0 = __umulhi(0xD2511F53u, c[0]), lo0 = 0xD2511F53u * c[0];
    uint32_t hi1 = __umulhi(0xCD9E8D57u, c[2]), lo1 = 0xCD9E8D57u * c[2];
    uint32_t n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
    c[0] = n0; c[1] = lo1; c[2] = n2; c[3] = lo0;
  }
}
TFD float tf_philox_word_to_float(uint32_t word) { return (float)(word >> 8) * (1.0f / 16777216.0f); }
TFD float tf_philox_uniform(uint64_t seed, uint64_t index) {
  uint32_t c[4];
  tf_philox_block(seed, index / 4, c);
  const uint32_t lane = (uint32_t)(index % 4);  // a select chain, not an array: no local memory
  return tf_philox_word_to_float(lane == 0 ? c[0] : lane == 1 ? c[1] : lane == 2 ? c[2] : c[3]);
}
// The four elements of block `counter` from one generator call (kernels whose vectors are
// whole blocks: a quarter of the rounds per element).
TFD void tf_philox_uniform4(uint64_t seed, uint64_t counter, float* out) {
  uint32_t c[4];
  tf_philox_block(seed, counter, c);
#pragma unroll
  for (int i = 0; i < 4; ++i) out[i] = tf_philox_word_to_float(c[i]);
}

#undef TFD

}  // namespace tf
