#include "codegen/kernel_fingerprint.h"

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

}  // namespace tilefuse
