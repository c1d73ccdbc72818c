#include "backend/cuda/l2_residency.h"

#include <algorithm>
#include <fmt/format.h>

#include "support/env_switch.h"

namespace tilefuse {

std::optional<L2Residency> ChooseL2Residency(const std::vector<L2Candidate>& candidates, int64_t max_persisting_bytes,
                                             int64_t max_window_bytes, double fill) {
  if (candidates.empty() || max_persisting_bytes <= 0 || max_window_bytes <= 0 || !(fill > 0.0)) return std::nullopt;
  const auto largest =
      std::max_element(candidates.begin(), candidates.end(), [](const L2Candidate& a, const L2Candidate& b) { return a.bytes < b.bytes; });
  if (largest->bytes <= 0) return std::nullopt;
  L2Residency r;
  r.kernel = largest->kernel;
  r.node = largest->node;
  r.window_bytes = std::min(largest->bytes, max_window_bytes);
  r.set_aside_bytes = std::min(max_persisting_bytes, r.window_bytes);
  const double persisting = std::min(1.0, fill) * static_cast<double>(max_persisting_bytes);
  r.hit_ratio = static_cast<float>(std::min(1.0, persisting / static_cast<double>(r.window_bytes)));
  return r;
}

StatusOr<std::optional<L2Residency>> KeepWeightInL2(const CudaDevice& device, const std::vector<std::pair<std::string, const LaunchSpec*>>& specs) {
  if (!SwitchedOn("TILEFUSE_L2_PERSIST")) return std::optional<L2Residency>();
  std::vector<L2Candidate> candidates;
  for (const auto& [name, spec] : specs)
    if (spec->l2_keep_node >= 0) candidates.push_back({name, spec->l2_keep_node, spec->l2_keep_bytes});
  const int percent = PositiveSetting("TILEFUSE_L2_PERSIST_PERCENT");
  const double fill = percent > 0 ? std::min(100, percent) / 100.0 : kL2PersistingFill;
  std::optional<L2Residency> r = ChooseL2Residency(candidates, device.max_persisting_l2_bytes(), device.max_access_policy_window_bytes(), fill);
  if (!r) return r;
  size_t current = 0;
  RETURN_IF_ERROR(device.Check(device.api().cuCtxGetLimit(&current, CU_LIMIT_PERSISTING_L2_CACHE_SIZE), "cuCtxGetLimit (persisting L2)"));
  if (static_cast<int64_t>(current) < r->set_aside_bytes)
    RETURN_IF_ERROR(device.Check(device.api().cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, static_cast<size_t>(r->set_aside_bytes)),
                                 fmt::format("cuCtxSetLimit (persisting L2, {} bytes)", r->set_aside_bytes)));
  return r;
}

CUlaunchAttribute AccessPolicyAttribute(const L2Residency& r, CUdeviceptr base) {
  CUlaunchAttribute a = {};
  a.id = CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW;
  a.value.accessPolicyWindow.base_ptr = reinterpret_cast<void*>(base);
  a.value.accessPolicyWindow.num_bytes = static_cast<size_t>(r.window_bytes);
  a.value.accessPolicyWindow.hitRatio = r.hit_ratio;
  a.value.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
  // The rest of the weight streams through once a call: it should not evict what persists.
  a.value.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
  return a;
}

}  // namespace tilefuse
