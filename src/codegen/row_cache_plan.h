// Which per-element values of a row kernel are kept in a row buffer instead of being
// recomputed.
//
// A row kernel runs its inner loop once per pass: one pass per reduction, in order,
// then one for the per-element stores. The looped strategy recomputes in each pass
// whatever it needs, which is free for loads and adds (the row is in L1/L2 by then) but
// not for exp, tanh or the Philox generator: softmax would evaluate exp(x - max) twice
// per element, dropout + residual + layer norm the generator three times. So a value
// that a later pass needs again and whose computation contains such an op is written to
// a row buffer by the first pass that computes it and read back by the later ones.
//
//   pass 0: max   x            pass 1: sum  e = exp(x - max) ──► row0[i]
//   pass 2: store e / sum      reads e from row0[i] instead of calling exp again
//
// Random values whose elements run in whole, aligned Philox blocks along the row (index
// i0*c0 + i1 + offset, with c0, offset and the row length multiples of 4) are
// prefilled: the row's buffer is filled four elements per generator call before its
// first pass, and every pass reads it (a quarter of the Philox rounds per element).
//
// The plan is target-independent: the C++ emitter keeps the buffer in thread-private
// memory; a GPU emitter would keep it in shared memory or registers.
#pragma once

#include <vector>

#include "codegen/kernel.h"

namespace tilefuse {

struct RowCachePlan {
  // The passes of the kernel's inner loop, in order: one per reduction (its index), then
  // the store pass (index kernel.reductions.size()), present even without inner stores.
  int num_passes = 0;
  // Per value: the row buffer that holds it, or -1 when it is not cached.
  std::vector<int> buffer_of_value;
  // Per value: the pass that computes it and writes its buffer (cached values only);
  // -1 for a prefilled value.
  std::vector<int> writer_pass;
  // Per buffer: the value it holds (its dtype decides the element type).
  std::vector<int> buffer_values;

  bool ReadsCache(int value, int pass) const {
    return buffer_of_value[value] >= 0 && writer_pass[value] < pass;
  }
  bool WritesCache(int value, int pass) const {
    return buffer_of_value[value] >= 0 && writer_pass[value] == pass;
  }
  bool Prefilled(int value) const { return buffer_of_value[value] >= 0 && writer_pass[value] < 0; }
};

// Whether computing `value` (with its per-element arguments) calls a transcendental
// function or the random generator, or takes more than a few dozen operations (a depthwise
// convolution's taps): worth a buffer store and load to avoid repeating.
// Values with a row buffer in `buffer_of_value` (when given) count as cheap loads.
bool IsExpensiveToRecompute(const Kernel& kernel, int value, const std::vector<int>& buffer_of_value = {});

// The SSA values a value's computation reads: its arguments and the gather indices in
// its index expression, in the order the emitters compute them.
std::vector<int> ValueDependencies(const ScalarValue& value);

// Whether random value `value` can be prefilled in Philox blocks (see above).
bool FillsInPhiloxBlocks(const Kernel& kernel, int value);

RowCachePlan PlanRowCache(const Kernel& kernel);
// No buffer: every pass recomputes what it needs (a tuning alternative to PlanRowCache).
RowCachePlan RecomputeRowValues(const Kernel& kernel);

}  // namespace tilefuse
