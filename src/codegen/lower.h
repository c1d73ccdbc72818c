// Lowering: one fusion group → one Kernel. Views, broadcasts and inlined generators
// become index arithmetic and recomputation inside the kernel; only the group's
// inputs are loaded and only its outputs stored.
#pragma once

#include "codegen/kernel.h"
#include "codegen/lowering_fault.h"
#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

// Pointwise, row_reduction and reduction groups. Unimplemented for the other kinds, and
// for shapes of reduction the loop template cannot express (the caller then runs the
// group's members one by one). `fault` is for tests only (codegen/lowering_fault.h).
// With `symbolic` (the graph's InferSymbolicShapes), the kernel knows what its extents are in
// the model's symbolic dims (Kernel::outer_size, inner_size).
StatusOr<Kernel> LowerGroup(const Graph& graph, const FusionGroup& group, const std::vector<bool>& inlined,
                            const LoweringFault& fault = {}, const SymbolicShapes* symbolic = nullptr);

// A template's epilogue (a pointwise group after its anchor): as LowerGroup, except that an
// output which is a transpose (through reshapes) of a member or input with the loop's
// elements is stored through the view from where that value is computed, not computed again
// at the output's own position. The GEMM template computes each element where its
// accumulator is: a LLaMA-style layer's key, rotated in the product's [tokens, heads · d]
// layout, is also a graph output as [batch, heads, tokens, d] (the KV cache), stored there
// from the same registers.
StatusOr<Kernel> LowerEpilogue(const Graph& graph, const FusionGroup& group, const std::vector<bool>& inlined);

// The buffer of `kernel` that holds `node`, added (an input) when it has none.
int KernelBufferFor(Kernel& kernel, const Graph& graph, int node);

// Adds to `kernel`, a pointwise Kernel over `node`'s flat offset, a store of `node` itself read at
// its own offset: a template's epilogue that also outputs its anchor (the GEMM's product, the
// depthwise taps' sum), whose loads of it the template serves from its accumulators.
void StoreAnchorItself(Kernel& kernel, const Graph& graph, int node);

// One value for templates that drive their own loops (attention): `node` evaluated at
// flat offset `at`, an Index over loop variables 0 ([0, outer)) and 1 ([0, inner)).
// `members` (pointwise, broadcast and view nodes) are computed, inlined generators
// recomputed, anything else loaded. The kernel holds the loads and the scalar program
// and no stores; `value` is the result's id in it.
struct LoweredValue {
  Kernel kernel;
  int value = -1;
};
StatusOr<LoweredValue> LowerValueAt(const Graph& graph, const std::vector<int>& members, const std::vector<bool>& inlined,
                                    int node, const Index& at, int64_t outer, int64_t inner, const SymbolicShapes* symbolic = nullptr);

}  // namespace tilefuse
