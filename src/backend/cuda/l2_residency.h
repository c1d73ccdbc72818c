// Part of one weight kept in L2 between a model's calls. A decode step reads every weight once
// a token, ~250 MB for GPT-2 small against 50 MB of L2, so nothing survives from one token to
// the next; most products load their weights while the kernel ahead still runs, but the LM head
// (77 MB, several rounds of its grid) streams at the memory's rate on the critical path. Hopper
// can set part of L2 aside for lines marked persisting (an access policy window on a launch,
// a share of its lines persisting): what of the LM head stays there is read from L2 on the
// next token instead of memory. One window a model, on the largest such weight
// (LaunchSpec::l2_keep_node); the set-aside is the context's, raised to what the window needs.
// Off unless TILEFUSE_L2_PERSIST=1, until measured.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/cuda_driver.h"
#include "codegen/launch_spec.h"

namespace tilefuse {

// A kernel that streams a weight over several rounds (LaunchSpec::l2_keep_*).
struct L2Candidate {
  std::string kernel;
  int node = -1;
  int64_t bytes = 0;
};

// The window named on `kernel`'s launches: `window_bytes` from the start of graph value `node`,
// `hit_ratio` of its lines persisting, which fill `fill` of the `set_aside_bytes`.
struct L2Residency {
  std::string kernel;
  int node = -1;
  int64_t window_bytes = 0;
  float hit_ratio = 0.0f;
  int64_t set_aside_bytes = 0;
};

// The default share of the set-aside the persisting lines fill: lines are marked by a hash, so
// some of L2's sets get more than their share, and a set whose persisting lines overflow it
// evicts them in turn on a scan that repeats (LRU on a cycle: no hits at all in that set).
inline constexpr double kL2PersistingFill = 0.8;

// The window for the largest candidate, sized to the device: none where there is no candidate
// or the device sets no L2 aside. `fill` (0, 1]: the share of the set-aside its lines fill.
std::optional<L2Residency> ChooseL2Residency(const std::vector<L2Candidate>& candidates, int64_t max_persisting_bytes,
                                             int64_t max_window_bytes, double fill = kL2PersistingFill);

// The candidates among `specs` (kernel names beside them), the window for this device
// (TILEFUSE_L2_PERSIST_PERCENT moves the fill for measurement) and the context's set-aside
// raised to it (never lowered: a caller may have set more). Nothing where the switch is off.
StatusOr<std::optional<L2Residency>> KeepWeightInL2(const CudaDevice& device, const std::vector<std::pair<std::string, const LaunchSpec*>>& specs);

// The launch attribute for `r` over the value at `base`.
CUlaunchAttribute AccessPolicyAttribute(const L2Residency& r, CUdeviceptr base);

}  // namespace tilefuse
