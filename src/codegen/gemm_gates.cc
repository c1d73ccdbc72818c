#include "codegen/gemm_gates.h"

#include <fmt/format.h>

#include "codegen/gemm_n_groups.h"

namespace tilefuse {

namespace {

// Whether every load of node `value` in `gemm`'s epilogue is at the product's position, and
// there is one.
bool ReadsAtProductPosition(const GemmTemplateKernel& gemm, int value) {
  const Kernel& k = gemm.epilogue;
  bool any = false;
  for (const ScalarValue& v : k.values) {
    if (v.kind != ScalarValue::Kind::kLoad || k.buffers[v.buffer].node != value) continue;
    if (!AtProductPosition(gemm, v.index)) return false;
    any = true;
  }
  return any;
}

}  // namespace

Status Gateable(const GemmTemplateKernel& gate, const GemmTemplateKernel& product, int gate_value) {
  if (Status s = GroupableOverN(gate); !s.ok()) return InvalidArgument("the gate: " + s.message());
  if (Status s = GroupableOverN(product); !s.ok()) return InvalidArgument("the product: " + s.message());
  if (GroupOverNKey(gate) != GroupOverNKey(product) || gate.n != product.n)
    return InvalidArgument(fmt::format("products %{} and %{} do not share A, rows, N, K and types", gate.product, product.product));
  if (gate.partner != 0 || product.partner != 0) return InvalidArgument("an epilogue reads a partner column (not with a gate)");
  // (FP8 products are not yet run gated.)
  if (IsFloat8(gate.operand_dtype)) return InvalidArgument(fmt::format("{} operands (gated products take bf16, f16 and f32)", DTypeName(gate.operand_dtype)));
  const Kernel& k = gate.epilogue;
  if (gate.outputs != std::vector<int>{gate_value} || k.stores.size() != 1 || k.buffers[k.stores[0].buffer].node != gate_value ||
      !AtProductPosition(gate, k.stores[0].index))
    return InvalidArgument(fmt::format("the gate's epilogue stores more than %{} at the product's position", gate_value));
  for (const KernelStore& st : product.epilogue.stores)
    if (product.epilogue.buffers[st.buffer].node == gate_value) return InvalidArgument(fmt::format("the product's epilogue writes %{}", gate_value));
  if (!ReadsAtProductPosition(product, gate_value))
    return InvalidArgument(fmt::format("the product's epilogue does not read %{} only at its own position", gate_value));
  return Status::Ok();
}

StatusOr<GemmTemplateKernel> GateProduct(GemmTemplateKernel gate, GemmTemplateKernel product, int gate_value) {
  RETURN_IF_ERROR(Gateable(gate, product, gate_value));
  gate.output_in_registers = true;
  product.gate_value = gate_value;
  product.gate.push_back(std::move(gate));
  return product;
}

int TileOutputColumns(const GemmTemplateKernel& g, int block_n) { return g.gate.empty() ? block_n : block_n / 2; }

bool GateTakesWidth(const GemmTemplateKernel& g, int block_n) { return g.gate.empty() || (block_n % 128 == 0 && g.n % (block_n / 2) == 0); }

}  // namespace tilefuse
