// Random graphs over symbolic dims, for differential fuzzing at several shapes
// (DifferentialFuzzOptions::symbolic): an input x [batch, seq, C] (and others sized by batch,
// seq and past) goes through pointwise ops, broadcasts of seq- or batch-sized inputs,
// reductions and softmax along seq or the channels, layer norm, linear layers (merged rows or
// batched), transposes, concatenation with a past-sized input and the slice back, position
// iotas and attention (causal, or over past + seq keys). Every op choice comes from the seed
// alone, never from the sizes, so one seed gives the same graph at every binding of its
// symbols: the fuzzer compiles and checks it at three (SymbolicBindingsFor), and the
// graph's SymbolicInputs make the kernels print those sizes over the symbols.
//
// Values stay tame as in random_graph.h: magnitudes are squashed (tanh) before they could
// grow, exp never sees an unbounded argument, and masks compare iotas only (exact).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tilefuse/dtype.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

struct SymbolicBinding {
  int64_t batch = 1, seq = 1, past = 1;
  std::string ToString() const;  // "batch=2,seq=13,past=5"
};

// Three bindings for `seed`, their seq lengths distinct (one of them, often, 1: a decode step).
std::vector<SymbolicBinding> SymbolicBindingsFor(uint64_t seed);

// The graph of `seed` at `at`, in `dtype` (f32 or f64), with its symbolic inputs set.
StatusOr<Graph> GenerateSymbolicGraph(uint64_t seed, const SymbolicBinding& at, DType dtype);

}  // namespace tilefuse
