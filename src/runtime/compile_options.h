// What every backend's compile takes (the backends add their own: CpuCompileOptions,
// CudaCompileOptions).
#pragma once

#include <set>
#include <string>

#include "codegen/lowering_fault.h"
#include "fusion/fusion_plan.h"

namespace tilefuse {

struct CompileOptions {
  bool fuse = true;                   // false: every op its own kernel (views folded)
  std::set<GroupKind> disabled_kinds; // --disable-fusion=KIND
  std::string cache_dir;              // kernel cache; empty: $TILEFUSE_CACHE_DIR or ~/.cache/tilefuse
  bool poison_outputs = false;        // fill kernel outputs with NaN bits first (tests)
  // Compile this plan (checked by VerifyPlan) instead of planning; fuse and disabled_kinds
  // are then unused. For one graph: the autotuner's fallbacks (tune/fallback.h).
  const FusionPlan* plan_override = nullptr;
  // Where the driver writes what each stage made (plan.txt, kernels.ir.txt, the source);
  // empty: nothing.
  std::string dump_dir;
  LoweringFault fault;  // tests only: a deliberate lowering bug (codegen/lowering_fault.h)
};

}  // namespace tilefuse
