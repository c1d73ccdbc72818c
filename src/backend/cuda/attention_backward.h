// The attention backward template (codegen/cuda/device/attention_bwd_sm90.cuh) as a call on
// device pointers: its three kernels printed for one problem, compiled through NVRTC (cached
// on disk, loaded once per process and problem) and launched on a stream. What the torch
// frontend runs for PyTorch's attention backward ops, and what its tests launch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/cuda_driver.h"
#include "backend/cuda/nvrtc_compiler.h"
#include "codegen/cuda/cuda_emitter.h"
#include "tilefuse/dtype.h"
#include "tilefuse/status.h"

namespace tilefuse {

struct AttentionBackwardProblem {
  DType dtype = DType::kBF16;  // bf16 or f16
  int heads = 1;               // query heads of all batch entries
  int group = 1;               // query heads per key/value head (grouped-query attention)
  int nq = 1, nk = 1;          // queries, keys
  int d = 64;                  // head dim: 64 or 128
  bool causal = false;         // PyTorch's is_causal (top-left)
  double scale = 0.125;        // the softmax scale the scores were multiplied by
  int heads_together = 1;      // the CTAs' order (Config::kHeadsTogether)

  std::string Label() const;
  int QueryBlocks() const { return (nq + 63) / 64; }
  int KeyBlocks() const { return (nk + 127) / 128; }
};

// Device memory of one call: Q, O, dO, dQ dense [heads][nq][d]; K, V, dK, dV dense
// [heads / group][nk][d]; the logsumexp [heads][nq] f32 (natural log, of the scaled scores);
// `scratch` AttentionBackwardScratchBytes bytes. Every address 16-byte aligned.
struct AttentionBackwardPointers {
  CUdeviceptr q = 0, k = 0, v = 0, out = 0, dout = 0, lse = 0;
  CUdeviceptr dq = 0, dk = 0, dv = 0;
  CUdeviceptr scratch = 0;
};

// Why the template does not take `problem` (InvalidArgument), or Ok.
Status CheckAttentionBackward(const AttentionBackwardProblem& problem);
// The scratch a call needs: the base-2 logsumexp and D padded to whole query blocks, and the
// f32 dQ accumulator.
int64_t AttentionBackwardScratchBytes(const AttentionBackwardProblem& problem);
// Where the kernels read and write: graph values (LaunchArg::node) of Q, K, V, O, dO, the
// logsumexp, dQ, dK and dV, all dense as AttentionBackwardPointers has them; the statistics and
// the dQ accumulator in the kernels' scratch memory from `scratch_offset` on (a model's: past
// the split kernels' counters). The default numbers are RunAttentionBackward's address table.
struct AttentionBackwardValues {
  int q = 0, k = 1, v = 2, out = 3, dout = 4, lse = 5;
  int dq = 6, dk = 7, dv = 8;
  int64_t scratch_offset = 0;
};

// The three kernels (name_prepare, name, name_finish: D and the base-2 logsumexp with the dQ
// accumulator zeroed; the main loop writing dK and dV; dQ from its accumulator), each a
// complete __global__ function with its launch, to be launched in that order on one stream.
std::vector<CudaKernelSource> AttentionBackwardKernels(const AttentionBackwardProblem& problem, const AttentionBackwardValues& at,
                                                       const std::string& name);
// The translation unit of the three kernels (attention_bwd_prepare, attention_bwd,
// attention_bwd_finish), for NVRTC.
std::string AttentionBackwardSource(const AttentionBackwardProblem& problem);

// Compiles (or finds compiled) and queues the three kernels on `stream`.
Status RunAttentionBackward(const CudaDevice& gpu, NvrtcCompiler& nvrtc, const AttentionBackwardProblem& problem,
                            const AttentionBackwardPointers& pointers, CUstream stream);

}  // namespace tilefuse
