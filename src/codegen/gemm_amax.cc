#include "codegen/gemm_amax.h"

#include <algorithm>
#include <fmt/format.h>

#include "support/check.h"
#include "tilefuse/tensor.h"

namespace tilefuse {

namespace {

// Does every value of `from` have an exact value in `to`? (A cast between them then commutes
// with max and with |·|.)
bool ExactlyWidens(DType from, DType to) {
  if (from == to) return true;
  if (!IsFloat(from) || !IsFloat(to) || IsFloat8Fnuz(from) || IsFloat8Fnuz(to)) return false;
  return to == DType::kF32 || to == DType::kF64 || (IsFloat8(from) && IsHalf(to));
}

// `id` past the member reshapes and exact casts that produce it, each added to `ops`.
int ThroughExactSteps(const Graph& g, int id, const std::vector<bool>& member, std::vector<int>& ops) {
  for (;;) {
    const Node& n = g.node(id);
    if (!member[id]) return id;
    if (n.op != OpCode::kReshape && !(n.op == OpCode::kCast && ExactlyWidens(g.node(n.inputs[0]).dtype, n.dtype))) return id;
    ops.push_back(id);
    id = n.inputs[0];
  }
}

}  // namespace

std::optional<AmaxMatch> MatchAmax(const Graph& g, int output, const std::vector<bool>& member) {
  if (NumElements(g.node(output).shape) != 1) return std::nullopt;
  AmaxMatch m{-1, output, {}};
  const Node& reduce = g.node(ThroughExactSteps(g, output, member, m.ops));
  // One element out of all of its input: the max over every element, whatever axes it names.
  if (reduce.op != OpCode::kReduceMax || !member[reduce.id] || NumElements(reduce.shape) != 1) return std::nullopt;
  m.ops.push_back(reduce.id);
  const Node& abs = g.node(ThroughExactSteps(g, reduce.inputs[0], member, m.ops));
  if (abs.op != OpCode::kAbs || !member[abs.id]) return std::nullopt;
  m.ops.push_back(abs.id);
  // u: the value before the member casts that only widen (their max is u's, widened).
  m.value = ThroughExactSteps(g, abs.inputs[0], member, m.ops);
  const DType dtype = g.node(m.value).dtype;
  if (!IsFloat(dtype) || IsFloat8Fnuz(dtype) || dtype == DType::kF64) return std::nullopt;
  std::sort(m.ops.begin(), m.ops.end());
  return m;
}

Status AmaxFoldable(const GemmTemplateKernel& gemm, int value) {
  if (!gemm.n_parts.empty() || !gemm.gate.empty() || gemm.output_in_registers || gemm.layer_norm)
    return Unimplemented("an amax in the epilogue of one product (not grouped over N, gated or a gate, no norm of A in the skinny template)");
  if (gemm.amax) return Unimplemented("one amax a product");
  const Kernel& k = gemm.epilogue;
  for (const KernelStore& st : k.stores) {
    const KernelBuffer& b = k.buffers[static_cast<size_t>(st.buffer)];
    if (b.node != value) continue;
    if (b.elements != gemm.batch * gemm.rows * gemm.n)
      return Unimplemented(fmt::format("an amax of %{}, {} elements where the product has {}", value, b.elements, gemm.batch * gemm.rows * gemm.n));
    return Status::Ok();
  }
  return Unimplemented(fmt::format("an amax of %{}, which the product's epilogue does not write", value));
}

GemmTemplateKernel FoldAmax(GemmTemplateKernel gemm, const AmaxMatch& amax, DType amax_dtype, bool keep_stored) {
  TF_CHECK_MSG(AmaxFoldable(gemm, amax.value).ok(), "FoldAmax needs AmaxFoldable");
  Kernel& k = gemm.epilogue;
  for (size_t i = 0; i < k.stores.size(); ++i) {
    const KernelBuffer& b = k.buffers[static_cast<size_t>(k.stores[i].buffer)];
    if (b.node != amax.value) continue;
    gemm.amax = GemmAmax{amax.value, k.stores[i].value, b.dtype, keep_stored, amax.output, amax_dtype};
    if (!keep_stored) {
      k.stores.erase(k.stores.begin() + static_cast<std::ptrdiff_t>(i));
      std::erase(gemm.outputs, amax.value);
      if (amax.value == gemm.product) gemm.store_product = false;
    }
    break;
  }
  gemm.outputs.push_back(amax.output);
  return gemm;
}

}  // namespace tilefuse
