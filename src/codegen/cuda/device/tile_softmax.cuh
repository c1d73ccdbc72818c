// tilefuse tile library: the online softmax (Milakov and Gimelshein; FlashAttention's) over
// the rows a thread holds, block after block of their values.
//
//   AccumulatorRows<Columns>   where a thread's rows live in a wgmma D fragment: two rows
//                              (lane / 4 and lane / 4 + 8 of its warp's 16), Columns / 4
//                              values each, joined across the four lanes holding a row
//   OnlineSoftmax<Rows>        each row's running maximum and sum (in the caller's
//                              variables); Update exponentiates a block in place against the
//                              maximum, and says whether what was accumulated from earlier
//                              blocks must be rescaled
//
// The values are base-2 logits times a multiplier `mult` > 0 (exp(x) = 2^(x log2 e): one
// multiply-add and ex2 a value), so the maximum of the values is the maximum logit.
#pragma once

#include "tilefuse_device.cuh"
#include "tilefuse_tiles.cuh"

namespace tf {

template <int Columns>
struct AccumulatorRows {
  static constexpr int kRows = 2, kValues = Columns / 4;
  // Value i of row `row`: accumulator (i / 2) * 4 + row * 2 + i % 2 (column 8 (i / 2) +
  // (lane % 4) * 2 + i % 2).
  static __device__ __forceinline__ constexpr int At(int row, int i) { return i / 2 * 4 + row * 2 + i % 2; }
  static __device__ __forceinline__ float Max(float v) { return QuadMax(v); }
  static __device__ __forceinline__ float Sum(float v) { return QuadSum(v); }
};

// The state lives in the caller's variables, each an object of its own: held in one object
// (indexed by the row loops' counters until they are unrolled), a store into one array may
// alias the others, and the compiler kept or sank values it otherwise forwards (the lazily
// rescaled causal d128 attention: 270 of 3441 instructions moved or changed, nvcc 13).
template <class Rows>
struct OnlineSoftmax {
  using RowValues = float[Rows::kRows];
  RowValues& max;
  RowValues& sum;      // this thread's share until Total
  RowValues& rescale;  // what the accumulators of the blocks before the last are rescaled by
  bool& rescaled;      // did the last Update move the maxima (the accumulators must be rescaled)?

  __device__ __forceinline__ OnlineSoftmax(RowValues& row_max, RowValues& row_sum, RowValues& row_rescale, bool& moved)
      : max(row_max), sum(row_sum), rescale(row_rescale), rescaled(moved) {}

  __device__ __forceinline__ void Start() {
#pragma unroll
    for (int r = 0; r < Rows::kRows; ++r) {
      max[r] = -INFINITY;
      sum[r] = 0.0f;
      rescale[r] = 1.0f;
    }
    rescaled = false;
  }

  // The block `values` (its base-2 logits: values * mult) exponentiated in place. Settings
  // gives kPolyExpEvery, every how many pairs of columns go to the FMA pipe (Exp2Poly) instead
  // of the SFU (0: none), and LazyMargin(), a constexpr function: lazy rescaling
  // (FlashAttention-4's) moves the running maxima only when one of the warp's rows grows by
  // more than the margin (base 2; the exponentials then stay below 2^margin), so that most
  // blocks skip the accumulators' rescale, whole warps at a time; a margin below 0: every
  // block. The margin is a constant expression here: as an argument, the softmax without
  // lazy rescaling was optimised before its `rescaled` was known to be true and scheduled
  // differently (156 of 1241 instructions, attention over 200 keys at head dim 64, nvcc 13).
  template <class Settings, int Size>
  __device__ __forceinline__ void Update(float (&values)[Size], const float mult) {
    constexpr int kPolyExpEvery = Settings::kPolyExpEvery;
    constexpr float kLazyMargin = Settings::LazyMargin();
    float block_max[Rows::kRows];
#pragma unroll
    for (int r = 0; r < Rows::kRows; ++r) {
      block_max[r] = -INFINITY;
#pragma unroll
      for (int i = 0; i < Rows::kValues; i += 2)
        block_max[r] = fmaxf(block_max[r], fmaxf(values[Rows::At(r, i)], values[Rows::At(r, i + 1)]));
      block_max[r] = Rows::Max(block_max[r]) * mult;
    }
    bool grows = false;
#pragma unroll
    for (int r = 0; r < Rows::kRows; ++r) grows = grows || block_max[r] > max[r] + kLazyMargin;
    rescaled = kLazyMargin < 0 || __any_sync(0xffffffffu, grows);
#pragma unroll
    for (int r = 0; r < Rows::kRows; ++r) {
      if (rescaled) {
        const float new_max = fmaxf(max[r], block_max[r]);
        // A row masked so far has max -inf: subtract 0 then, not -inf (no inf - inf).
        rescale[r] = Exp2(max[r] - (new_max == -INFINITY ? 0.0f : new_max));
        max[r] = new_max;
      }
      const float shift = max[r] == -INFINITY ? 0.0f : max[r];
      float block_sum = 0.0f;
      // By pairs of columns (a flat loop over the values was unrolled into other code).
#pragma unroll
      for (int pair = 0; pair < Rows::kValues / 2; ++pair)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int i = 2 * pair + e;
          const float x = fmaf(values[Rows::At(r, i)], mult, -shift);
          values[Rows::At(r, i)] = kPolyExpEvery > 0 && pair % kPolyExpEvery == kPolyExpEvery - 1 ? Exp2Poly(x) : Exp2(x);
          block_sum += values[Rows::At(r, i)];
        }
      sum[r] = (rescaled ? sum[r] * rescale[r] : sum[r]) + block_sum;
    }
  }

  // Accumulators laid out as Rows (an AccumulatorRows of their own width) rescaled after an
  // Update that moved the maxima.
  template <class AccumulatorRows, int Size>
  __device__ __forceinline__ void Rescale(float (&accumulators)[Size]) const {
    if (rescaled)
#pragma unroll
      for (int i = 0; i < AccumulatorRows::kValues; i += 2)
#pragma unroll
        for (int r = 0; r < Rows::kRows; ++r) {
          accumulators[AccumulatorRows::At(r, i)] *= rescale[r];
          accumulators[AccumulatorRows::At(r, i + 1)] *= rescale[r];
        }
  }

  // Row `row`'s sum over every value seen, joined across the lanes that hold the row.
  __device__ __forceinline__ float Total(int row) const { return Rows::Sum(sum[row]); }
};

}  // namespace tf
