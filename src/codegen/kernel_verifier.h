// Checks a lowered Kernel's own invariants, the driver's verifier between lowering and
// emission: values in SSA order (every argument, index gather and accumulator refers to an
// earlier value), loads and stores name buffers that exist, stores write output buffers,
// every output buffer is written, reductions reduce existing values, and an op has the
// arguments its ops.def row says. A failure is a lowering bug: Internal, naming the kernel.
#pragma once

#include "codegen/kernel.h"
#include "tilefuse/status.h"

namespace tilefuse {

Status VerifyKernel(const Kernel& kernel);

}  // namespace tilefuse
