// Which key blocks of each query block an attention's mask removes entirely — causal
// attention's blocks above the diagonal, a sliding window's blocks outside it — proven on
// the host by interval arithmetic over the group's logits program, so the kernel neither
// loads nor multiplies them (half the work of causal attention).
//
// A score is "masked" when its logit is at most -1e4 whatever the score (a select of a
// constant like -1e9, -inf or the dtype's lowest, possibly added to the scaled score):
// exp(masked − row max) is then 0 in f32, so leaving the block out changes nothing. That
// takes logits of real scores well above -1e4, as they are. A block is left out only when
// every row of its query block keeps a provably unmasked key elsewhere (a row masked
// everywhere would, in the graph, average all keys). Masks read from graph inputs, or from
// constants too large to scan, are not analysed: every block is computed.
#pragma once

#include <optional>
#include <vector>

#include "codegen/index_expr.h"
#include "codegen/kernel.h"
#include "tilefuse/graph.h"

namespace tilefuse {

struct KeyBlockRange {
  int first = 0, last = 0;  // inclusive
};

// An attention's logits as the CPU and GPU attention kernels both hold them.
struct AttentionLogits {
  const Kernel& program;  // loop variable 0: the flat score row, 1: the key; loads of buffer -1 read the score
  int logit;              // its result
  const std::vector<KernelBuffer>& buffers;  // what its other loads index
  const Index& score_batch_index;            // over the output batch (its max + 1: the score batches)
  int64_t nq, nk;
};

// One range per query block of `block_m` rows (keys in blocks of `block_n`); every range
// is [0, key blocks − 1] where nothing is proven.
std::vector<KeyBlockRange> UnmaskedKeyBlocks(const Graph& graph, const AttentionLogits& logits, int block_m, int block_n);

// The logits where a block's selects all go one way — causal attention's blocks below the
// diagonal, where the mask keeps every score — so a kernel runs the program without the
// mask there: `program` is the logits program with those selects resolved (and `+ 0`,
// `* 1` dropped), valid for the key blocks `blocks` names per query block (one range; first >
// last: none). Only full key blocks (no key past the end) are interior. Of several ways
// the selects go, the one covering the most blocks whose logits are real scores is taken.
struct InteriorLogits {
  Kernel program;
  int logit = -1;
  std::vector<KeyBlockRange> blocks;
  bool Any() const;
};
InteriorLogits InteriorKeyBlocks(const Graph& graph, const AttentionLogits& logits, int block_m, int block_n);

// c when logit `logit` of `program` is the score times a constant c > 0 (in f32; casts to
// f32 aside):
// the online softmax then folds c into its exponent's multiply-add.
std::optional<double> ScoreMultiplier(const Kernel& program, int logit);

}  // namespace tilefuse
