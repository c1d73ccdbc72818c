// The Hopper attention template: an AttentionTemplateKernel as one warp-specialised
// flash-attention kernel, FlashAttention-3 style. The kernel is the skeleton
// codegen/cuda/device/attention_fwd_sm90.cuh (producer and consumers; the online softmax of
// tile_softmax.cuh) instantiated on a Config and hooks this emitter prints:
//
//   Config                   the tile (128 or 192 query rows, block_n keys, K/V stages, query
//                            blocks per CTA, Q tiles), the loop (serial, overlap, ping-pong),
//                            the softmax's switches and the register split
//   Batch                    a batch entry's Q, K and V coordinates (heads are batch entries;
//                            GQA divides the K/V head) and its logits' batch entry
//   Logits, InteriorLogits   the group's logits program per score (scale, masks, bias), and
//                            the same without its mask for the key blocks the mask leaves
//                            whole; a logit that is the score times c is folded into the
//                            softmax's exponent instead
//   key-block tables         per query block, the key blocks a mask leaves (others are never
//                            loaded: causal attention's blocks above the diagonal), and the
//                            order that pairs heavy query blocks with light ones
//
// No score ever leaves the registers. Keys past the end are masked; rows past the end are
// not stored.
#pragma once

#include <vector>

#include "codegen/attention_mask_blocks.h"
#include "codegen/attention_template.h"
#include "codegen/cuda/cuda_emitter.h"

namespace tilefuse {


// The consumers' main loop: S, softmax and P·V one after another (serial);
// FlashAttention-3's intra-warpgroup pipelining, S of the next key block and its softmax
// while P·V of this one runs (overlap); and with the consumers taking turns at the tensor
// cores (ping-pong).
enum class AttentionLoop { kSerial, kOverlap, kPingPong };

struct CudaAttentionConfig {
  // Keys per step: 64, 128, 192 or 256. 128: 192 and 256 were slower on an H100 at every
  // benchmark shape (2026-11-23) and spill registers where the mask program is long.
  int block_n = 128;
  int stages = 0;     // K/V ring depth; 0: as many as fit (at most 3)
  // Per query block (BlockM() rows), the key blocks its mask leaves (UnmaskedKeyBlocks);
  // empty: all. Query blocks then run the most work first.
  std::vector<KeyBlockRange> key_blocks;
  // Per query block, the key blocks where the logits run without their mask
  // (InteriorKeyBlocks for this block_n); none: the whole logits program everywhere.
  InteriorLogits interior;
  AttentionLoop loop = AttentionLoop::kPingPong;
  // Every n-th column block of the softmax's exponentials on the FMA pipe (tf::Exp2Poly)
  // instead of the SFU; 0: none; -1: the rule (none: measured slower).
  int poly_exp_every = -1;
  // Lazy rescaling (FlashAttention-4's): a row's running maximum, and O with it, moves only
  // when the row grows by more than this (base 2: the exponentials stay below 2^margin);
  // -1: every key block, the textbook online softmax; -2: the rule (8 above head dim 64).
  float lazy_margin = -2;
  // Consumer warpgroups of 64 query rows each: 2 or 3 (then no ping-pong); 0: the rule.
  int consumers = 0;
  // Query blocks each CTA runs one after another: 1, 2 or 4; 0: the rule, decided where the
  // kernel is emitted (it needs key_blocks). With more than one, the producer loads the next
  // block's Q and first K/V tiles while the consumers finish the last P·V and store O of the
  // current one, and a mask's query blocks are paired heavy with light so that every CTA has
  // about the same work.
  int tiles = 0;
  // Q tiles in shared memory: 1, or 2 (the producer loads the next query block's Q while the
  // consumers still read this one's); 0: the rule, decided with `tiles` (2 where a CTA runs
  // several query blocks and shared memory has room, before a third K/V stage).
  int q_slots = 0;
  int sm_count = 132;  // the GPU's multiprocessors (the tile rule keeps two waves of CTAs)
  // The decode form: each CTA's keys and values brought into L2 before its wait for the grid
  // ahead (attention_decode.cuh's AttentionDecodePrefetch).
  bool decode_prefetch = true;
  int BlockM() const { return 64 * consumers; }  // query rows per tile (once resolved)
};

// `config` with every "the rule" field decided for `attention` (what EmitCudaAttention
// prints); its BlockM() is the query block the key-block analyses must use.
CudaAttentionConfig ResolveAttentionConfig(const AttentionTemplateKernel& attention, CudaAttentionConfig config);

// ResolveAttentionConfig, then the key blocks the attention's mask leaves each query block and
// those where its logits run without the mask (attention_mask_blocks), over `graph`'s values:
// the configuration EmitCudaAttention takes for a planned attention group.
CudaAttentionConfig ResolveAttentionConfigForMask(const Graph& graph, const AttentionTemplateKernel& attention,
                                                  CudaAttentionConfig config);

StatusOr<CudaKernelSource> EmitCudaAttention(const AttentionTemplateKernel& attention, const CudaAttentionConfig& config = {});

// The decode form (codegen/cuda/device/attention_decode.cuh): a batch entry of a few query rows
// (a decode step's one) over its keys, a CTA per row and no tensor cores, where the tiled
// kernel above would pad the rows to its 128-row tile and pay its pipeline's start for a few
// key blocks; a few rows over a long cache split over the keys (flash decoding) to fill the
// GPU's `sm_count` SMs. UsesDecodeForm: whether the template emits this form for `attention`
// (not under TILEFUSE_DECODE_ATTENTION=0, for comparison).
bool UsesDecodeForm(const AttentionTemplateKernel& attention);
// (Of `config`, the decode form reads sm_count and decode_prefetch.)
StatusOr<CudaKernelSource> EmitCudaDecodeAttention(const AttentionTemplateKernel& attention, const CudaAttentionConfig& config = {});

}  // namespace tilefuse
