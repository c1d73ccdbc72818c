// tilefuse tile library, typed part: the element types the compute-bound templates are
// instantiated on, and Mma<Element>, Hopper's warpgroup MMA (wgmma) for each of them.
//
//   Bf16, F16, F32, Tf32, E4m3, E5m2, S8  element types: storage, bytes, conversions (Tf32::Small:
//                               the part of an f32 value the TF32 tensor cores do not read, 3xTF32)
//   Mma<Element>                m64nNkK with f32 accumulators (int32 for S8: Mma::Accumulator);
//                               kK is 32 bytes of the element (16 for bf16/f16, 8 for tf32, 32
//                               for e4m3/e5m2/int8)
//     ::Shared<N, BMnMajor, AMnMajor>  A and B from shared memory (wgmma descriptors)
//     ::Registers<N, BMnMajor>  A from registers (four 32-bit words a thread: a warpgroup's
//                               fragment), B from shared memory: attention's P·V, 3xTF32's A
//                               (bf16, f16 and tf32; tf32 reads B K-major)
//
// Only the 16-bit types read A or B transposed (MN-major, wgmma's imm-trans-a/b); tf32, FP8 and int8 read
// both operands K-major, and asking otherwise fails to compile. N is a multiple of 16 up to
// 256 (wgmma_operands.cuh lists them).
#pragma once

#include "tilefuse_device.cuh"
#include "wgmma_operands.cuh"

namespace tf {

// ---- element types ----
struct Bf16 {
  using Storage = unsigned short;
  static constexpr int kBytes = 2;
  static __device__ __forceinline__ float ToFloat(Storage v) { return tf_cvt_bf16(v); }
  // Two values as one 32-bit pair, `lo` in the low half (an A-fragment register).
  static __device__ __forceinline__ unsigned Pack2(float lo, float hi) { return tf_pack2_bf16(lo, hi); }
  // Two pairs multiplied element by element, each product rounded to nearest (as the f32
  // product of two bf16 values, exact, rounded to bf16).
  static __device__ __forceinline__ unsigned Mul2(unsigned a, unsigned b) {
    unsigned d;
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
};
struct F16 {
  using Storage = unsigned short;
  static constexpr int kBytes = 2;
  static __device__ __forceinline__ float ToFloat(Storage v) { return tf_cvt_f16(v); }
  static __device__ __forceinline__ unsigned Pack2(float lo, float hi) { return tf_pack2_f16(lo, hi); }
  static __device__ __forceinline__ unsigned Mul2(unsigned a, unsigned b) {
    unsigned d;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
  }
};
struct F32 {
  using Storage = float;
  static constexpr int kBytes = 4;
  static __device__ __forceinline__ float ToFloat(Storage v) { return v; }
  // Two values as one 8-byte pair (a staged f32 store's column pair).
  static __device__ __forceinline__ float2 Pack2(float lo, float hi) { return make_float2(lo, hi); }
};
// TF32 operands travel as f32 words; the tensor cores read their top 19 bits.
struct Tf32 {
  using Storage = float;
  static constexpr int kBytes = 4;
  static __device__ __forceinline__ float ToFloat(Storage v) { return v; }
  // 3xTF32: x as big + small, big = x as the tensor cores read it (its top 19 bits: the low
  // 13 of the mantissa cut) and small = the rest, exact in f32, which the tensor cores cut
  // to its own top 19 bits in turn. A·B is then A_big·B_big + A_big·B_small + A_small·B_big
  // within about 2^-20 of each product (A_small·B_small and small's cut bits dropped): f32's
  // accuracy on TF32 tensor cores (CUTLASS's "fast accurate" f32 rounds both parts instead,
  // which needs the big one written back, and a conversion each). An infinite or NaN x has
  // small 0 (x - big would be NaN).
  static __device__ __forceinline__ float Small(float x) {
    const float big = __uint_as_float(__float_as_uint(x) & 0xffffe000u);
    return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u ? x - big : 0.0f;
  }
};
// FP8 e4m3 (bias 7, no infinities) and e5m2 (bias 15): one byte a value.
// Pack2: two values as adjacent bytes (the first low), saturating as the kernels' conversions
// do (an epilogue's staged 8-bit store).
struct E4m3 {
  using Storage = unsigned char;
  static constexpr int kBytes = 1;
  static __device__ __forceinline__ unsigned short Pack2(float lo, float hi) {
    return (unsigned short)(tf_float_to_f8e4m3(lo) | tf_float_to_f8e4m3(hi) << 8);
  }
};
struct E5m2 {
  using Storage = unsigned char;
  static constexpr int kBytes = 1;
  static __device__ __forceinline__ unsigned short Pack2(float lo, float hi) {
    return (unsigned short)(tf_float_to_f8e5m2(lo) | tf_float_to_f8e5m2(hi) << 8);
  }
};

// int8 (symmetric quantization's values): one byte a value, products summed in int32 (exact).
struct S8 {
  using Storage = signed char;
  static constexpr int kBytes = 1;
};

// ---- the instruction, spelt per form ----
// Operands i0.. are the ones after the N/2 accumulators (TF_WGMMA_NEXT_<N>). The accumulate
// flag arrives as a register and becomes a predicate; scale A and scale B are 1.
#define TF_WGMMA_PREDICATE(i) "{\n.reg .pred p;\nsetp.ne.b32 p, %" #i ", 0;\n"
#define TF_WGMMA_SHAPE(N, K, TYPE) "wgmma.mma_async.sync.aligned.m64n" #N "k" #K ".f32." #TYPE "." #TYPE " {"
// 16-bit types, A and B by descriptor: transpose A and B as asked.
#define TF_WGMMA_SS16_AT(TYPE, N, i0, i1, i2, i3, i4, i5, i6)                                                     \
  asm volatile(TF_WGMMA_PREDICATE(i2) TF_WGMMA_SHAPE(N, 16, TYPE) TF_WGMMA_ACC_##N "}, %" #i0 ", %" #i1              \
                                                                  ", p, 1, 1, %" #i4 ", %" #i3 ";\n}\n"              \
               : TF_WGMMA_OUT_##N(d)                                                                                \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(BMnMajor ? 1 : 0), "n"(AMnMajor ? 1 : 0))
// 16-bit types, A from four registers a thread (a register A has no transpose).
#define TF_WGMMA_RS16_AT(TYPE, N, i0, i1, i2, i3, i4, i5, i6)                                                     \
  asm volatile(TF_WGMMA_PREDICATE(i5) TF_WGMMA_SHAPE(N, 16, TYPE) TF_WGMMA_ACC_##N "}, {%" #i0 ", %" #i1 ", %" #i2   \
                                                                  ", %" #i3 "}, %" #i4 ", p, 1, 1, %" #i6 ";\n}\n"   \
               : TF_WGMMA_OUT_##N(d)                                                                                \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate), "n"(BMnMajor ? 1 : 0))
// tf32, A from four registers a thread, B K-major by descriptor (no transpose operand).
#define TF_WGMMA_RS_TF32_AT(N, i0, i1, i2, i3, i4, i5, i6)                                                        \
  asm volatile(TF_WGMMA_PREDICATE(i5) TF_WGMMA_SHAPE(N, 8, tf32) TF_WGMMA_ACC_##N "}, {%" #i0 ", %" #i1 ", %" #i2    \
                                                               ", %" #i3 "}, %" #i4 ", p, 1, 1;\n}\n"               \
               : TF_WGMMA_OUT_##N(d)                                                                                \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate))
// tf32 and the 8-bit floats, A and B by descriptor, both K-major (no transpose operands).
#define TF_WGMMA_SS_KMAJOR_AT(TYPE, K, N, i0, i1, i2, i3, i4, i5, i6)                                              \
  asm volatile(TF_WGMMA_PREDICATE(i2) TF_WGMMA_SHAPE(N, K, TYPE) TF_WGMMA_ACC_##N "}, %" #i0 ", %" #i1 ", p, 1, 1;\n}\n" \
               : TF_WGMMA_OUT_##N(d)                                                                                \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate))
// int8, A and B by descriptor, both K-major, int32 accumulators: integer wgmma takes no scale
// operands (a mismatch for ptxas).
#define TF_WGMMA_SS_INT8_AT(N, i0, i1, i2, i3, i4, i5, i6)                                                            \
  asm volatile(TF_WGMMA_PREDICATE(i2) "wgmma.mma_async.sync.aligned.m64n" #N "k32.s32.s8.s8 {" TF_WGMMA_ACC_##N "}, %" #i0 \
               ", %" #i1 ", p;\n}\n"                                                                                  \
               : TF_WGMMA_IOUT_##N(d)                                                                               \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate))
// The operand numbers of N expanded before the form sees them.
#define TF_WGMMA_APPLY(FORM, ...) FORM(__VA_ARGS__)
// One `else if constexpr` per N: the front end parses each operand list once per form, and
// only the N a kernel instantiates reaches the assembler.
#define TF_WGMMA_SS16_CASE(N)                                                          \
  else if constexpr (kN == N) {                                                        \
    if constexpr (kBf16) TF_WGMMA_APPLY(TF_WGMMA_SS16_AT, bf16, N, TF_WGMMA_NEXT_##N); \
    else TF_WGMMA_APPLY(TF_WGMMA_SS16_AT, f16, N, TF_WGMMA_NEXT_##N);                  \
  }
#define TF_WGMMA_RS16_CASE(N)                                                          \
  else if constexpr (kN == N) {                                                        \
    if constexpr (kBf16) TF_WGMMA_APPLY(TF_WGMMA_RS16_AT, bf16, N, TF_WGMMA_NEXT_##N); \
    else TF_WGMMA_APPLY(TF_WGMMA_RS16_AT, f16, N, TF_WGMMA_NEXT_##N);                  \
  }
#define TF_WGMMA_RS_TF32_CASE(N) \
  else if constexpr (kN == N) TF_WGMMA_APPLY(TF_WGMMA_RS_TF32_AT, N, TF_WGMMA_NEXT_##N);
#define TF_WGMMA_INT8_CASE(N) \
  else if constexpr (kN == N) TF_WGMMA_APPLY(TF_WGMMA_SS_INT8_AT, N, TF_WGMMA_NEXT_##N);
#define TF_WGMMA_KMAJOR_CASE(N)                                                                  \
  else if constexpr (kN == N) {                                                                  \
    if constexpr (kTf32) TF_WGMMA_APPLY(TF_WGMMA_SS_KMAJOR_AT, tf32, 8, N, TF_WGMMA_NEXT_##N);   \
    else if constexpr (kE4m3) TF_WGMMA_APPLY(TF_WGMMA_SS_KMAJOR_AT, e4m3, 32, N, TF_WGMMA_NEXT_##N); \
    else TF_WGMMA_APPLY(TF_WGMMA_SS_KMAJOR_AT, e5m2, 32, N, TF_WGMMA_NEXT_##N);                  \
  }

template <bool kFirst, class T, class F>
struct Pick {
  using type = T;
};
template <class T, class F>
struct Pick<false, T, F> {
  using type = F;
};

template <class T, class U>
inline constexpr bool kSameType = false;
template <class T>
inline constexpr bool kSameType<T, T> = true;

template <class Element>
struct Mma {
  static constexpr bool kSixteenBit = kSameType<Element, Bf16> || kSameType<Element, F16>;
  static constexpr bool kInt8 = kSameType<Element, S8>;
  static_assert(kSixteenBit || kSameType<Element, Tf32> || kSameType<Element, E4m3> || kSameType<Element, E5m2> || kInt8,
                "Mma: bf16, f16, tf32, e4m3, e5m2 or int8");
  // The accumulators' type: int32 sums of int8 products, f32 otherwise.
  using Accumulator = typename Pick<kInt8, int, float>::type;
  static constexpr int kK = 32 / Element::kBytes;  // the reduction depth of one instruction

  // d (+)= A·B for a 64 × N tile, A and B in shared memory; accumulate = 0 overwrites d.
  template <int N, bool BMnMajor, bool AMnMajor = false>
  static __device__ __forceinline__ void Shared(Accumulator (&d)[N / 2], unsigned long long desc_a, unsigned long long desc_b,
                                                int accumulate) {
    constexpr int kN = N;
    constexpr bool kBf16 = kSameType<Element, Bf16>, kTf32 = kSameType<Element, Tf32>, kE4m3 = kSameType<Element, E4m3>;
    static_assert(kSixteenBit || !BMnMajor, "Mma: only bf16 and f16 read B MN-major");
    static_assert(kSixteenBit || !AMnMajor, "Mma: only bf16 and f16 read A MN-major");
    if constexpr (kN % 16 != 0 || kN > 256) static_assert(kN < 0, "Mma: N is a multiple of 16 up to 256");
    else if constexpr (kSixteenBit) {
      if constexpr (false) {}
      TF_WGMMA_FOR_EACH_N(TF_WGMMA_SS16_CASE)
    } else if constexpr (kInt8) {
      if constexpr (false) {}
      TF_WGMMA_FOR_EACH_N(TF_WGMMA_INT8_CASE)
    } else {
      if constexpr (false) {}
      TF_WGMMA_FOR_EACH_N(TF_WGMMA_KMAJOR_CASE)
    }
  }

  // The same with A from registers: for 16-bit types a[0..3] hold rows (lane / 4, + 8) and
  // columns ((lane % 4) * 2, + 8) of the warp's 16 rows, as packed pairs; for tf32 one value
  // each, columns lane % 4 and + 4 (as ldmatrix's 8x8 b16 matrices deliver 8 rows of four
  // f32 words, GemmLoadA's).
  template <int N, bool BMnMajor>
  static __device__ __forceinline__ void Registers(float (&d)[N / 2], const unsigned (&a)[4], unsigned long long desc_b,
                                                   int accumulate) {
    constexpr int kN = N;
    constexpr bool kBf16 = kSameType<Element, Bf16>;
    static_assert(kSixteenBit || kSameType<Element, Tf32>, "Mma: a register A is bf16, f16 or tf32 here");
    static_assert(kSixteenBit || !BMnMajor, "Mma: only bf16 and f16 read B MN-major");
    if constexpr (kN % 16 != 0 || kN > 256) static_assert(kN < 0, "Mma: N is a multiple of 16 up to 256");
    else if constexpr (kSixteenBit) {
      if constexpr (false) {}
      TF_WGMMA_FOR_EACH_N(TF_WGMMA_RS16_CASE)
    } else {
      if constexpr (false) {}
      TF_WGMMA_FOR_EACH_N(TF_WGMMA_RS_TF32_CASE)
    }
  }
};

}  // namespace tf
