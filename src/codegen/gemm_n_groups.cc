#include "codegen/gemm_n_groups.h"

#include <algorithm>
#include <fmt/format.h>

#include "codegen/gemm_gates.h"

namespace tilefuse {

Status GroupableOverN(const GemmTemplateKernel& g) {
  if (!g.n_parts.empty()) return InvalidArgument("already grouped");
  if (!g.gate.empty()) return InvalidArgument("gated");
  if (g.batch != 1) return InvalidArgument(fmt::format("{} batch entries with their own B", g.batch));
  if (g.a_conv) return InvalidArgument("A is an implicit GEMM's im2col");
  if (g.a_mn_major >= 0) return InvalidArgument("A is read MN-major");
  if (g.b_k_major < 0 || !g.b_read_only) return InvalidArgument("B is not a K-major weight");
  if (g.b_rows != 0 || g.b_k_rows != 0) return InvalidArgument("B's rows are padded");
  if (g.scale_blocks != 0) return InvalidArgument("a block-scaled FP8 product");
  if (g.n % 64 != 0) return InvalidArgument(fmt::format("N = {} is not a multiple of 64", g.n));
  return Status::Ok();
}

std::string GroupOverNKey(const GemmTemplateKernel& g) {
  std::string key = fmt::format("a {} rows {} k {} {} {} {}", g.a, g.rows, g.k, DTypeName(g.dtype), DTypeName(g.operand_dtype), g.split_f32);
  if (g.a_view) {
    const GemmOperandView& v = *g.a_view;
    key += fmt::format(" view {} {} {} {} {} {} {} {} {}", v.node, v.offset, v.head, v.entry_rows, v.heads, v.entries, v.stride[0],
                       v.stride[1], v.stride[2]);
  }
  return key;
}

StatusOr<GemmTemplateKernel> GroupOverN(std::vector<GemmTemplateKernel> parts) {
  if (parts.size() < 2 || parts.size() > static_cast<size_t>(kMaxGemmNParts))
    return InvalidArgument(fmt::format("{} products (a group over N takes 2 to {})", parts.size(), kMaxGemmNParts));
  for (const GemmTemplateKernel& p : parts) {
    RETURN_IF_ERROR(GroupableOverN(p));
    if (GroupOverNKey(p) != GroupOverNKey(parts.front()))
      return InvalidArgument(fmt::format("products %{} and %{} do not share A, rows, K and types", parts.front().product, p.product));
  }
  const GemmTemplateKernel& first = parts.front();
  GemmTemplateKernel g;
  g.name = first.name;
  g.dtype = first.dtype;
  g.operand_dtype = first.operand_dtype;
  g.product = first.product;
  g.a = first.a;
  g.b = first.b;
  g.rows = first.rows;
  g.rows_size = first.rows_size;
  g.symbols = first.symbols;
  g.k = first.k;
  g.a_view = first.a_view;
  g.b_k_major = first.b_k_major;
  g.b_read_only = true;
  g.split_f32 = first.split_f32;
  g.epilogue.name = first.epilogue.name;
  for (const GemmTemplateKernel& p : parts) {
    g.n += p.n;
    g.outputs.insert(g.outputs.end(), p.outputs.begin(), p.outputs.end());
    // Parts reading a partner column read it at one distance (the skeleton's one partner).
    if (p.partner != 0 && g.partner != 0 && p.partner != g.partner)
      return InvalidArgument(fmt::format("products %{} and %{} read partner columns at different distances", g.product, p.product));
    if (p.partner != 0) g.partner = p.partner;
  }
  g.n_parts = std::move(parts);
  return g;
}

bool PartsTakeWidth(const GemmTemplateKernel& g, int block_n) {
  if (!GateTakesWidth(g, block_n)) return false;
  if (g.partner != 0 && TileOutputColumns(g, block_n) % (2 * g.partner) != 0) return false;
  return std::all_of(g.n_parts.begin(), g.n_parts.end(), [&](const GemmTemplateKernel& p) { return p.n % block_n == 0; });
}

int NarrowestTileWidth(const GemmTemplateKernel& g) {
  for (int block_n : {64, 128, 256})
    if (PartsTakeWidth(g, block_n)) return block_n;
  return 256;  // (no width takes it: the emitter's check names why)
}

}  // namespace tilefuse
