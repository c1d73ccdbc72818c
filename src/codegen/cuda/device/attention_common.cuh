// What both attention forward skeletons take from their generated kernels: a batch entry's
// operand coordinates (the Batch hook's answer), the problem's lengths, and the Logits hook
// where none runs (attention_fwd_sm90.cuh, attention_decode.cuh).
#pragma once

namespace tf {

// A batch entry's coordinates in the Q, K and V maps' batch dims (what Batch returns).
struct AttentionBatch {
  int q[3], k[3], v[3];
};

// The problem's sizes: literals where the kernel is generated for one shape (the compiler
// folds them as it would Config's constants), expressions over the kernel's parameters where
// the model's symbolic dims give them at launch. Config::kWholeKeyBlocks says whether nk is a
// multiple of kBN.
struct AttentionLengths {
  int nq, nk;                    // query rows and keys of each batch entry
  int inner_first, inner_last;   // the interior key blocks of every query block (kSameInterior)
};

// The Logits hook where none runs (every key block takes the other one).
struct NoLogits {
  enum : int { kScoreTimesMultiplier = 1 };
  static constexpr __device__ float Multiplier() { return 1.0f; }
};

}  // namespace tf
