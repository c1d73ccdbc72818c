#include "codegen/cuda/cuda_row_splits.h"

#include <algorithm>

#include "codegen/column_tiles.h"
#include "codegen/index_expr.h"
#include "codegen/launch_spec.h"
#include "support/env_switch.h"

namespace tilefuse {

namespace {

// Blocks the rule aims at: twice an H100's SMs where the GPU's count is unknown, so the
// slowest blocks' tail is short beside the whole.
constexpr int64_t kDefaultSms = 132;
// Vectors each thread reads of its slice at least: loads enough in flight that the hand-over
// (a fence, an atomic, one block's combine) stays small beside them.
constexpr int64_t kMinVectorsPerThread = 8;

}  // namespace

std::string WhyRowsCannotSplit(const Kernel& k) {
  if (k.reductions.empty()) return "no reduction";
  for (const KernelStore& s : k.stores)
    if (UsesVar(s.index, 1)) return "a store along the row needs the row's totals in every block";
  std::vector<int> reduced;
  for (const KernelReduction& r : k.reductions) reduced.push_back(r.value);
  const std::vector<bool> needed = ValuesNeeded(k, reduced);
  for (size_t v = 0; v < k.values.size(); ++v)
    if (needed[v] && k.values[v].kind == ScalarValue::Kind::kAccumulator) return "a reduction reads an earlier one's result";
  if (PrintsSymbolically(k, k.outer_size, k.outer) || PrintsSymbolically(k, k.inner_size, k.inner))
    return "sizes given at launch (the slices are in the text)";
  if (k.outer * 4 > kScratchCounterBytes) return "more rows than the scratch memory's counter region counts";
  return "";
}

int RuleRowSplits(const Kernel& k, const CudaKernelConfig& c) {
  if (SwitchedOff("TILEFUSE_ROW_SPLITS")) return 1;  // for comparison: a block (or cluster) a row
  if (c.threads_per_row != c.threads || c.threads <= 32 || c.cluster > 1 || c.vector < 1 || !WhyRowsCannotSplit(k).empty()) return 1;
  const int64_t sms = c.sm_count > 0 ? c.sm_count : kDefaultSms;
  if (k.outer >= sms) return 1;
  const int64_t wanted = (2 * sms + k.outer - 1) / k.outer;
  const int64_t most = k.inner / (int64_t{c.threads} * c.vector * kMinVectorsPerThread);
  return static_cast<int>(std::max<int64_t>(1, std::min(wanted, most)));
}

int64_t RowSplitSlice(const Kernel& k, int splits, int vector) {
  const int64_t slice = (k.inner + splits - 1) / splits;
  return (slice + vector - 1) / vector * vector;
}

int64_t RowSplitScratchBytes(const Kernel& k, int splits) {
  return kScratchCounterBytes + static_cast<int64_t>(k.reductions.size()) * k.outer * splits * 8;
}

}  // namespace tilefuse
