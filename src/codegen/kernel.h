// The Kernel IR: what one fusion group computes, independent of the target. Both
// emitters (C++ for the CPU, CUDA later) print the same Kernel.
//
// Every kernel iterates `outer` (parallel) × `inner` (sequential, the reduced elements
// of one output for reduction templates; 1 for pointwise). Loop variable 0 is the outer
// index, variable 1 the inner one. The scalar program is SSA over `values`; loads and
// stores address buffers with Index expressions over those variables, so views cost no
// copy. Reductions run over the inner loop one after another (a later one may use an
// earlier one's result: variance after mean); values are recomputed in each loop that
// needs them (the looped strategy — the row stays in cache between passes).
#pragma once

#include <string>
#include <vector>

#include "codegen/index_expr.h"
#include "fusion/fusion_plan.h"
#include "ir/symbolic_shapes.h"
#include "tilefuse/graph.h"

namespace tilefuse {

struct KernelBuffer {
  int node = -1;          // the graph value it holds
  DType dtype = DType::kF32;
  int64_t elements = 0;
  bool is_output = false; // written by this kernel
};

struct ScalarValue {
  enum class Kind {
    kLoad,         // buffer[index]
    kConstant,     // a literal
    kOp,           // a pointwise op of ops.def applied to args
    kIndex,        // the integer value of `index` (iota)
    kRandom,       // philox uniform at `index` with `seed`
    kAccumulator,  // the finished result of reduction `reduction`
  };
  Kind kind = Kind::kConstant;
  DType dtype = DType::kF32;  // dtype of the graph value (the op's result dtype)
  OpCode op = OpCode::kAdd;   // kOp
  std::vector<int> args;      // kOp: value ids
  int buffer = -1;            // kLoad
  Index index;                // kLoad, kIndex, kRandom
  double constant = 0;        // kConstant
  uint64_t seed = 0;          // kRandom
  int reduction = -1;         // kAccumulator
  bool inner = false;         // depends on the inner loop variable (computed per element)
};

struct KernelReduction {
  OpCode op = OpCode::kReduceSum;  // sum, max, min, mean, prod
  int value = -1;                  // the inner value reduced
  int64_t count = 1;               // elements per output (mean divides by it)
  DType dtype = DType::kF32;
};

struct KernelStore {
  int buffer = -1;
  int value = -1;
  Index index;
};

struct Kernel {
  std::string name;
  GroupKind kind = GroupKind::kPointwise;
  std::vector<int> nodes;  // the fusion group's members
  std::vector<KernelBuffer> buffers;
  std::vector<ScalarValue> values;  // SSA: args precede users
  std::vector<KernelReduction> reductions;
  std::vector<KernelStore> stores;
  int64_t outer = 1;  // loop variable 0: [0, outer), run in parallel
  int64_t inner = 1;  // loop variable 1: [0, inner)
  // What `outer` and `inner` are in the model's symbolic dims (ir/symbolic_shapes.h), and
  // the symbols' values by id. An emitter prints a size as the expression, over parameters
  // the launch passes, where it evaluates to the size (KernelSizeText); constants otherwise.
  SymExpr outer_size, inner_size;
  std::vector<int64_t> symbols;
};

// Whether `size` (of `kernel`) is printed as an expression of the symbols: not a constant,
// and equal to `value` at the kernel's binding.
bool PrintsSymbolically(const Kernel& kernel, const SymExpr& size, int64_t value);
// `value` as C text: the symbols' expression (parameters tf_sym<id>) where PrintsSymbolically,
// else the literal.
std::string KernelSizeText(const Kernel& kernel, const SymExpr& size, int64_t value);
// The symbols the kernel's outer extent and index constants are printed with, in id order:
// the parameters its function takes after its buffers; with `inner`, the inner extent's too
// where it is a size in them. (An inner extent may shape the code — chunks a thread,
// registers a row — so an emitter prints it over the symbols only where it does not: the C++
// loops, CUDA rows re-read per pass and column reductions.)
std::vector<int> PrintedSymbols(const Kernel& kernel, bool inner = false);

}  // namespace tilefuse
