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
  if (g.a_view)
    problem += fmt::format(" a-view {} {} {} {} {} {} {} {}", g.a_view->offset, g.a_view->head, g.a_view->entry_rows, g.a_view->heads,
                           g.a_view->entries, g.a_view->stride[0], g.a_view->stride[1], g.a_view->stride[2]);
  return HashBytes(KernelFingerprint(g.epilogue) + "\n" + problem).ToHex();
}

}  // namespace tilefuse
