// A kernel's identity by what it computes, not by its name or graph position: the hash of
// its Kernel IR with the name, the member nodes and the buffers' nodes left out. The same
// fused group at the same shapes has the same fingerprint in another plan of the graph (a
// replan renumbers groups), in another layer, or in another model — so the tuner's
// configurations are keyed by it and follow their kernels wherever they go.
#pragma once

#include <string>

#include "codegen/kernel.h"

namespace tilefuse {

std::string KernelFingerprint(const Kernel& kernel);

// The GEMM template's problem the same way: its epilogue's fingerprint, the product's
// dtype and dimensions, and how A is read.
struct GemmTemplateKernel;
std::string GemmFingerprint(const GemmTemplateKernel& gemm);

}  // namespace tilefuse
