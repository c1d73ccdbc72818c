#include "codegen/kernel_fingerprint.h"

#include <fmt/format.h>

#include "codegen/gemm_template.h"
#include "codegen/kernel_printer.h"
#include "support/content_hash.h"

namespace tilefuse {

std::string KernelFingerprint(const Kernel& kernel) {
  Kernel anonymous = kernel;
  anonymous.name.clear();
  anonymous.nodes.clear();
  for (KernelBuffer& b : anonymous.buffers) b.node = -1;
  return HashBytes(PrintKernel(anonymous)).ToHex();
}

std::string GemmFingerprint(const GemmTemplateKernel& g) {
  std::string problem = fmt::format("gemm {} rows {} n {} k {} batch {} store {}", DTypeName(g.dtype), g.rows, g.n, g.k, g.batch,
                                    g.store_product);
  if (g.operand_dtype != g.dtype) problem += fmt::format(" operands {}", DTypeName(g.operand_dtype));
  if (g.a_view)
    problem += fmt::format(" a-view {} {} {} {} {} {} {} {}", g.a_view->offset, g.a_view->head, g.a_view->entry_rows, g.a_view->heads,
                           g.a_view->entries, g.a_view->stride[0], g.a_view->stride[1], g.a_view->stride[2]);
  if (g.a_conv) {
    const GemmConvWindow& c = *g.a_conv;
    problem += fmt::format(" a-conv {}x{}x{}x{} out {}x{} kernel {}x{} strides {}x{} dilations {}x{} pads {} {} {} {}", c.images, c.height,
                           c.width, c.channels, c.out_height, c.out_width, c.kernel[0], c.kernel[1], c.strides[0], c.strides[1],
                           c.dilations[0], c.dilations[1], c.pads[0], c.pads[1], c.pads[2], c.pads[3]);
  }
  if (g.b_k_major >= 0) problem += " b-k-major";
  if (g.b_rows) problem += fmt::format(" b-rows {}", g.b_rows);
  if (g.b_k_rows) problem += fmt::format(" b-k-rows {}", g.b_k_rows);
  if (g.a_mn_major >= 0) problem += " a-mn-major";
  if (g.scale_blocks) problem += fmt::format(" scale-blocks {}", g.scale_blocks);
  if (g.b_scale_columns) problem += fmt::format(" b-scale-columns {}", g.b_scale_columns);
  // 3xTF32 and TF32 forms of one f32 product take different configurations (no ping-pong).
  if (g.split_f32) problem += " 3xtf32";
  if (g.partner) problem += fmt::format(" partner {}", g.partner);  // (it limits the tile widths)
  if (g.layer_norm) problem += fmt::format(" layer-norm {} {} {}", g.layer_norm->bias >= 0, g.layer_norm->epsilon, g.a);
  if (g.amax) problem += fmt::format(" amax {} {} {}", DTypeName(g.amax->value_dtype), DTypeName(g.amax->dtype), g.amax->scalar);
  for (const GemmTemplateKernel& part : g.n_parts) problem += " part " + GemmFingerprint(part);
  for (const GemmTemplateKernel& gate : g.gate) problem += " gate " + GemmFingerprint(gate);
  return HashBytes(KernelFingerprint(g.epilogue) + "\n" + problem).ToHex();
}

}  // namespace tilefuse
