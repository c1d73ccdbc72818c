// The attention forward for a few query rows over many keys: a decode step's one query over
// the whole KV cache, where the Hopper skeleton (attention_fwd_sm90.cuh) would pad the query to
// a 128-row tile and pay its pipeline's start for two or three key blocks.
//
//   CTA      one query row of one batch entry (heads are batch entries), or with kSplit a
//            range of its keys (flash decoding: a batch of few heads over a long cache fills
//            the GPU); kWarps warps take the keys 32 at a time, interleaved, each its own
//            online softmax
//   lane     Q·K of one key (Q in shared memory, the key's dims read as the operand's strides
//            have them, 16 bytes at a time where they are contiguous), the Logits hook, then
//            for P·V a column pair of the output (or, V's columns contiguous, 8 columns of a few
//            keys at a time, 16 bytes a load): each key's probability broadcast from its lane
//   end      the warps' maxima, sums and partial rows combined through shared memory; split,
//            each range's written to scratch memory and the CTA that finishes a row last (a
//            counter, zero again after) combines them in range order; O / sum stored (rows
//            without probabilities zeroed under Config::kZeroNanRows), and the row's
//            logsumexp where the graph asks for it
//
// Operands are read through plain pointers and element strides (DecodeOperands, a kernel
// parameter: the binding's values, so lengths given at launch keep one text).
//
// A KV cache's update at one position (Config::kUpdates, DecodeCacheUpdate): K and V are the
// caches as they were, the row at the position read from the step's new keys and values
// instead, and the kernel writes that row into the updated caches (a decode step's
// index_copy_, which was a kernel of its own on the step's critical path); where an updated
// cache is not the cache's own memory, its other rows are copied there too. Scores and
// sums are f32, logits base 2 as in the Hopper skeleton. The generated part
// (codegen/cuda/cuda_attention_emitter.cc) is the Config, the Batch and Logits hooks and a
// kernel that calls AttentionDecode.
#pragma once

#include "attention_common.cuh"
#include "attention_decode_projection.cuh"
#include "tile_mma.cuh"

namespace tf {

// A strided operand's element (batch coordinates c, row r, column c') at
// offset + row_stride·r + column_stride·c' + Σ batch_stride[t]·c[t] (attention_template.h).
struct DecodeOperand {
  long long offset, row_stride, column_stride, batch_stride[3];
  __device__ __forceinline__ long long Base(const int (&coordinates)[3]) const {
    return offset + coordinates[0] * batch_stride[0] + coordinates[1] * batch_stride[1] + coordinates[2] * batch_stride[2];
  }
};
// Q [nq][d], Kᵀ [d][nk] and V [nk][dv].
struct DecodeOperands {
  DecodeOperand q, k, v;
};

// Config::kUpdates: the keys and values at `position` are the rows k_row and v_row (views with
// K's and V's batch terms; k_row_operand.row_stride steps over a key's dims, v_row_operand's
// column_stride over a value's), written into k_updated and v_updated at that key, laid out as
// the caches K and V read. Where an updated cache is not the cache itself, every other key's
// elements are copied into it: `elements` each, key of flat element e (e / key_stride) % keys.
template <class Storage>
struct DecodeCacheUpdate {
  long long position;
  const Storage* __restrict__ k_row;
  const Storage* __restrict__ v_row;
  DecodeOperand k_row_operand, v_row_operand;
  Storage* k_updated;
  Storage* v_updated;
  long long k_elements, v_elements, k_key_stride, v_key_stride, keys;
};

// Whether two pointers hold one address, asked so that the compiler cannot answer: a kernel's
// __restrict__ parameters are distinct objects to it, and it may take `k_updated != k` as true
// without looking (the whole cache then copied over itself every call).
__device__ __forceinline__ bool SameAddress(const void* a, const void* b) {
  unsigned long long x, y;
  asm volatile("mov.b64 %0, %1;" : "=l"(x) : "l"(a));
  asm volatile("mov.b64 %0, %1;" : "=l"(y) : "l"(b));
  return x == y;
}

// kUpdates: this CTA's part of writing the updated caches. The first CTA of a query row's keys
// (`writes_row`) writes its heads' new rows at the position (query heads sharing a K/V head
// write the same values); where an updated cache is not the cache's own memory, every CTA first
// copies a grid-strided share of the other keys' elements into it. No CTA reads the position's
// row of the caches, so the writes race with no read.
template <class Config, class Storage>
__device__ __forceinline__ void DecodeWriteUpdate(const Storage* k, const Storage* v, const DecodeOperands& operands, long long k0,
                                                  long long v0, const DecodeCacheUpdate<Storage>& update, const Storage* k_new,
                                                  const Storage* v_new, bool writes_row) {
  const long long position = update.position;
  const long long step = (long long)gridDim.x * blockDim.x, first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (!SameAddress(update.k_updated, k))
    for (long long e = first; e < update.k_elements; e += step)
      if (e / update.k_key_stride % update.keys != position) update.k_updated[e] = k[e];
  if (!SameAddress(update.v_updated, v))
    for (long long e = first; e < update.v_elements; e += step)
      if (e / update.v_key_stride % update.keys != position) update.v_updated[e] = v[e];
  if (!writes_row || position < 0 || position >= update.keys) return;  // (outside the cache: nothing replaced)
  for (int j = threadIdx.x; j < Config::kD; j += blockDim.x)
    update.k_updated[k0 + position * operands.k.column_stride + j * operands.k.row_stride] = k_new[j * update.k_row_operand.row_stride];
  for (int j = threadIdx.x; j < Config::kDV; j += blockDim.x)
    update.v_updated[v0 + position * operands.v.row_stride + j * operands.v.column_stride] = v_new[j * update.v_row_operand.column_stride];
}

// Split over keys (Config::kSplit): each CTA takes keys_per_split keys of its row, and the
// rows' counters and the ranges' partials (max, sum, then the kDV unnormalised columns, f32)
// live in the kernel's scratch memory.
struct DecodeSplit {
  int keys_per_split;
  unsigned* __restrict__ counters;
  float* __restrict__ partials;
};

// The query row, batch entry and keys [key_begin, key_end) of this CTA.
struct DecodeCta {
  int row, batch, range, ranges, key_begin, key_end;
};
template <class Config>
__device__ __forceinline__ DecodeCta DecodeCtaOf(const AttentionLengths& lengths, int keys_per_split) {
  DecodeCta c;
  c.ranges = Config::kSplit ? max(1, (lengths.nk + keys_per_split - 1) / keys_per_split) : 1;  // (no keys: one)
  const int flat_row = blockIdx.x / c.ranges;
  c.range = blockIdx.x % c.ranges;
  c.row = flat_row % lengths.nq;
  c.batch = flat_row / lengths.nq;
  c.key_begin = Config::kSplit ? c.range * keys_per_split : 0;
  c.key_end = Config::kSplit ? min(lengths.nk, c.key_begin + keys_per_split) : lengths.nk;
  return c;
}

// The elements base + a·stride_a + b·stride_b (a < count_a, b < count_b) brought into L2 by
// the copy engine (cp.async.bulk.prefetch), where they lie densely: their span at most twice
// their bytes (a key-major cache's head: one contiguous run). A hint, no data moves to the SM.
template <class Storage>
__device__ __forceinline__ void PrefetchSpanL2(const Storage* base, long long stride_a, int count_a, long long stride_b, int count_b) {
#if __CUDA_ARCH__ >= 900
  if (count_a <= 0 || count_b <= 0 || stride_a < 0 || stride_b < 0) return;
  const long long span = (count_a - 1) * stride_a + (count_b - 1) * stride_b + 1;
  if (span > 2LL * count_a * count_b) return;
  unsigned long long begin = reinterpret_cast<unsigned long long>(base) & ~15ull;
  const unsigned long long end = (reinterpret_cast<unsigned long long>(base + span) + 15) & ~15ull;
  for (; begin < end; begin += 1u << 16) {  // (at most 64 KB an instruction)
    const unsigned bytes = (unsigned)min(end - begin, 1ull << 16);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(begin), "r"(bytes) : "memory");
  }
#endif
}

// Before the wait for the grid ahead (the generated kernel's first statement): this CTA's keys
// and values brought into L2 while the kernel ahead (the step's QKV product) still runs, so
// that the loop's loads after the wait hit L2, not memory. Only a hint, and it reads no value:
// what the grid ahead writes (the new key and value) is read after the wait as before.
template <class Config, class Batch>
__device__ __forceinline__ void AttentionDecodePrefetch(const typename Config::Element::Storage* __restrict__ k,
                                                        const typename Config::Element::Storage* __restrict__ v,
                                                        const DecodeOperands& operands, const AttentionLengths lengths,
                                                        const Batch& batch_hook, int keys_per_split = 0) {
  if (threadIdx.x != 0) return;
  const DecodeCta c = DecodeCtaOf<Config>(lengths, keys_per_split);
  const AttentionBatch at = batch_hook(c.batch);
  const int keys = c.key_end - c.key_begin;
  // Kᵀ [d][nk] (a key its column) and V [nk][dv] (a key its row).
  PrefetchSpanL2(k + operands.k.Base(at.k) + c.key_begin * operands.k.column_stride, operands.k.row_stride, Config::kD,
                 operands.k.column_stride, keys);
  PrefetchSpanL2(v + operands.v.Base(at.v) + c.key_begin * operands.v.row_stride, operands.v.row_stride, keys,
                 operands.v.column_stride, Config::kDV);
}

template <class Config, class Batch, class Logits>
__device__ __forceinline__ void AttentionDecode(const typename Config::Element::Storage* __restrict__ q,
                                                const typename Config::Element::Storage* __restrict__ k,
                                                const typename Config::Element::Storage* __restrict__ v, const DecodeOperands& operands,
                                                const AttentionLengths lengths, const Batch& batch_hook, const Logits& logits,
                                                typename Config::Element::Storage* __restrict__ out, float* __restrict__ logsumexp,
                                                const DecodeSplit split = {},
                                                const DecodeCacheUpdate<typename Config::Element::Storage> update = {}) {
  using Element = typename Config::Element;
  using Storage = typename Element::Storage;
  using Index = typename Config::Index;
  constexpr int kD = Config::kD, kDV = Config::kDV, kWarps = Config::kWarps;
  constexpr int kColumns = (kDV + 31) / 32;  // output columns a lane accumulates
  constexpr unsigned kAll = 0xffffffffu;
  __shared__ float q_row[kD];
  __shared__ float warp_max[kWarps], warp_sum[kWarps];
  __shared__ float warp_out[kWarps][kDV];
  __shared__ int last_range;
  const int nq = lengths.nq;
  const DecodeCta cta = DecodeCtaOf<Config>(lengths, split.keys_per_split);
  const int ranges = cta.ranges, range = cta.range, row = cta.row, batch = cta.batch, flat_row = blockIdx.x / ranges;
  const int key_begin = cta.key_begin, key_end = cta.key_end;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const AttentionBatch at = batch_hook(batch);
  const long long q0 = operands.q.Base(at.q) + row * operands.q.row_stride;
  for (int j = threadIdx.x; j < kD; j += blockDim.x) q_row[j] = Element::ToFloat(q[q0 + j * operands.q.column_stride]);
  const long long k0 = operands.k.Base(at.k), v0 = operands.v.Base(at.v);
  const Index score_row = (Index)batch_hook.LogitsEntry(batch) * nq + row;
  // kUpdates: the new rows of this row's key and value heads, and the key they replace.
  constexpr bool kUpdates = Config::kUpdates != 0;
  long long replaced = -1;
  const Storage* k_new = nullptr;
  const Storage* v_new = nullptr;
  long long k_new_dim_stride = 0, v_new_column_stride = 0;
  if constexpr (kUpdates) {
    replaced = update.position;
    k_new = update.k_row + update.k_row_operand.Base(at.k);
    v_new = update.v_row + update.v_row_operand.Base(at.v);
    k_new_dim_stride = update.k_row_operand.row_stride;
    v_new_column_stride = update.v_row_operand.column_stride;
    DecodeWriteUpdate<Config>(k, v, operands, k0, v0, update, k_new, v_new, row == 0 && range == 0);
  }
  __syncthreads();

  // P·V with V's columns contiguous (Config::kVColumnsContiguous): a key's row read 16 bytes
  // a lane, kVLanes lanes a row, 32 / kVLanes keys at a time (every load of the warp's keys
  // issued together, unrolled), each lane summing 8 columns over its keys; the lanes that
  // share columns are summed once at the end. Otherwise a lane sums columns lane, lane + 32,
  // ... key by key.
  constexpr bool kVectorV = Config::kVColumnsContiguous != 0;
  static_assert(!kVectorV || Element::kBytes == 2, "kVColumnsContiguous: 8 elements a 16-byte read");
  constexpr int kVLanes = kVectorV ? kDV / 8 : 32, kVKeys = 32 / kVLanes;
  constexpr int kHeld = kVectorV ? 8 : kColumns;  // output columns a lane accumulates
  const int v_key = lane / kVLanes, v_column = (lane % kVLanes) * 8;
  float row_max = -INFINITY, row_sum = 0.0f, o[kHeld];
#pragma unroll
  for (int c = 0; c < kHeld; ++c) o[c] = 0.0f;
  for (int key0 = key_begin + warp * 32; key0 < key_end; key0 += kWarps * 32) {
    const int key = key0 + lane;
    // This lane's 16 bytes of its keys' V rows, loaded with K. Rows past the end read the last
    // key's again (their p is 0): loads without a branch, which ptxas keeps in registers (a
    // guarded load spilled them, 2026-12-05).
    uint4 v_rows[kVectorV ? 32 / kVKeys : 1];
    if constexpr (kVectorV) {
#pragma unroll
      for (int r = 0; r < 32 / kVKeys; ++r) {
        const int v_row = min(key0 + r * kVKeys + v_key, key_end - 1);
        const Storage* vp = kUpdates && v_row == replaced ? v_new : v + v0 + (long long)v_row * operands.v.row_stride;
        v_rows[r] = *reinterpret_cast<const uint4*>(vp + v_column);
      }
    }
    float s = -INFINITY;  // base-2 logit; keys past the end are masked
    if (key < key_end) {
      const bool replaced_key = kUpdates && key == replaced;
      const Storage* kp = replaced_key ? k_new : k + k0 + key * operands.k.column_stride;
      float dot = 0.0f;
      if constexpr (Config::kKDimsContiguous) {  // the key's dims in a row, 16-byte aligned
#pragma unroll
        for (int j = 0; j < kD; j += 8) {
          const uint4 chunk = *reinterpret_cast<const uint4*>(kp + j);
          const unsigned words[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
#pragma unroll
          for (int w = 0; w < 4; ++w)
            dot += q_row[j + 2 * w] * Element::ToFloat((Storage)(words[w] & 0xffff)) +
                   q_row[j + 2 * w + 1] * Element::ToFloat((Storage)(words[w] >> 16));
        }
      } else {
        const long long dim_stride = kUpdates && replaced_key ? k_new_dim_stride : operands.k.row_stride;
#pragma unroll 8
        for (int j = 0; j < kD; ++j) dot += q_row[j] * Element::ToFloat(kp[j * dim_stride]);
      }
      if constexpr (Logits::kScoreTimesMultiplier) s = dot * Logits::Multiplier();
      else s = logits(score_row, key, dot) * 1.4426950408889634f;
    }
    float block_max = s;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) block_max = fmaxf(block_max, __shfl_xor_sync(kAll, block_max, offset));
    const float new_max = fmaxf(row_max, block_max);
    const float base = new_max == -INFINITY ? 0.0f : new_max;  // every key so far masked: p = 0, not NaN
    const float p = exp2f(s - base), rescale = exp2f(row_max - base);
    float p_sum = p;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) p_sum += __shfl_xor_sync(kAll, p_sum, offset);
    row_sum = row_sum * rescale + p_sum;
    row_max = new_max;
#pragma unroll
    for (int c = 0; c < kHeld; ++c) o[c] *= rescale;
    if constexpr (kVectorV) {  // keys past the end: p = 0
#pragma unroll
      for (int r = 0; r < 32 / kVKeys; ++r) {
        const float pi = __shfl_sync(kAll, p, r * kVKeys + v_key);
        const unsigned words[4] = {v_rows[r].x, v_rows[r].y, v_rows[r].z, v_rows[r].w};
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          o[2 * w] += pi * Element::ToFloat((Storage)(words[w] & 0xffff));
          o[2 * w + 1] += pi * Element::ToFloat((Storage)(words[w] >> 16));
        }
      }
    } else {
      const int keys = min(32, key_end - key0);
      for (int i = 0; i < keys; ++i) {
        const float pi = __shfl_sync(kAll, p, i);
        const bool replaced_row = kUpdates && key0 + i == replaced;
        const Storage* vp = replaced_row ? v_new : v + v0 + (long long)(key0 + i) * operands.v.row_stride;
        const long long column_stride = replaced_row ? v_new_column_stride : operands.v.column_stride;
#pragma unroll
        for (int c = 0; c < kColumns; ++c) {
          const int column = lane + 32 * c;
          if (kDV % 32 == 0 || column < kDV) o[c] += pi * Element::ToFloat(vp[column * column_stride]);
        }
      }
    }
  }

  // The warps' partial rows combined: this CTA's maximum, sum and unnormalised columns.
  if (lane == 0) {
    warp_max[warp] = row_max;
    warp_sum[warp] = row_sum;
  }
  if constexpr (kVectorV) {  // the lanes of a column set summed, then written by the first keys' lanes
#pragma unroll
    for (int offset = kVLanes; offset < 32; offset *= 2)
#pragma unroll
      for (int c = 0; c < 8; ++c) o[c] += __shfl_xor_sync(kAll, o[c], offset);
    if (v_key == 0)
#pragma unroll
      for (int c = 0; c < 8; ++c) warp_out[warp][v_column + c] = o[c];
  } else {
#pragma unroll
    for (int c = 0; c < kColumns; ++c)
      if (kDV % 32 == 0 || lane + 32 * c < kDV) warp_out[warp][lane + 32 * c] = o[c];
  }
  __syncthreads();
  float total_max = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) total_max = fmaxf(total_max, warp_max[w]);
  float base = total_max == -INFINITY ? 0.0f : total_max;
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) total += warp_sum[w] * exp2f(warp_max[w] - base);
  auto cta_column = [&](int column) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += warp_out[w][column] * exp2f(warp_max[w] - base);
    return sum;
  };
  Storage* o_row = out + ((Index)batch * nq + row) * kDV;
  if constexpr (Config::kSplit) {
    // This range's partial to scratch memory; the row's last CTA combines every range's, in
    // range order (the result does not depend on timing). Memory order as the skinny GEMM's
    // hand-over: partials fenced before the counter's atomic, the last fences before reading.
    float* mine = split.partials + ((long long)flat_row * ranges + range) * (2 + kDV);
    for (int column = threadIdx.x; column < kDV; column += blockDim.x) __stcg(mine + 2 + column, cta_column(column));
    if (threadIdx.x == 0) {
      __stcg(mine, total_max);
      __stcg(mine + 1, total);
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
      const bool last = atomicAdd(split.counters + flat_row, 1u) == (unsigned)ranges - 1;
      if (last) split.counters[flat_row] = 0;  // zero again for the next launch
      last_range = last;
    }
    __syncthreads();
    if (!last_range) return;
    __threadfence();
    const float* first = split.partials + (long long)flat_row * ranges * (2 + kDV);
    total_max = -INFINITY;
    for (int r = 0; r < ranges; ++r) total_max = fmaxf(total_max, __ldcg(first + r * (2 + kDV)));
    base = total_max == -INFINITY ? 0.0f : total_max;
    total = 0.0f;
    for (int r = 0; r < ranges; ++r) total += __ldcg(first + r * (2 + kDV) + 1) * exp2f(__ldcg(first + r * (2 + kDV)) - base);
    // Under the safe softmax's guard, a row whose sum is not positive (every key masked, a NaN
    // or +inf logit) is zeros, as in the Hopper skeleton.
    const bool zeroed = Config::kZeroNanRows && !(total > 0.0f);
    const float inverse = Config::OutputScale() / total;
    for (int column = threadIdx.x; column < kDV; column += blockDim.x) {
      float sum = 0.0f;
      for (int r = 0; r < ranges; ++r) sum += __ldcg(first + r * (2 + kDV) + 2 + column) * exp2f(__ldcg(first + r * (2 + kDV)) - base);
      o_row[column] = zeroed ? Storage(0) : (Storage)(Element::Pack2(sum * inverse, 0.0f) & 0xffff);
    }
  } else {
    const bool zeroed = Config::kZeroNanRows && !(total > 0.0f);
    const float inverse = Config::OutputScale() / total;
    // kProjection: the row goes to the cluster's CTAs, not to memory (every CTA of the cluster
    // started, its barriers initialised: DecodeProjectionStart's arrival awaited here).
    if constexpr (Config::kProjection != 0) tf_cluster_wait();
    for (int column = threadIdx.x; column < kDV; column += blockDim.x) {
      const Storage value = zeroed ? Storage(0) : (Storage)(Element::Pack2(cta_column(column) * inverse, 0.0f) & 0xffff);
      if constexpr (Config::kProjection != 0) DecodeProjectionSend<Config>(column, value);
      else o_row[column] = value;
    }
  }
  if (logsumexp && threadIdx.x == 0)
    logsumexp[score_row] = total_max == -INFINITY ? NAN : (total_max + log2f(total)) * 0.6931471805599453f;
}

}  // namespace tf
