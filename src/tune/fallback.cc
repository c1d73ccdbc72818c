#include "tune/fallback.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "tune/plan_pairing.h"

namespace tilefuse {

namespace {

constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

// Times by group id, NaN where a group has no measurement.
StatusOr<std::vector<double>> TimesById(const std::vector<GroupTiming>& timings, size_t num_groups, const char* which) {
  std::vector<double> times(num_groups, kNotMeasured);
  for (const GroupTiming& t : timings) {
    if (t.group < 0 || static_cast<size_t>(t.group) >= num_groups)
      return InvalidArgument(fmt::format("{} timing names group {}, the plan has {}", which, t.group, num_groups));
    if (!std::isfinite(t.time_us) || t.time_us < 0)
      return InvalidArgument(fmt::format("{} group {} has time {} us", which, t.group, t.time_us));
    if (!std::isnan(times[t.group]))
      return InvalidArgument(fmt::format("{} group {} is timed twice", which, t.group));
    times[t.group] = t.time_us;
  }
  return times;
}

// The comparison, once both times are known. Timings are rounded decimal microseconds,
// so "exactly 10% slower" must not fall back on the last bit of 1.1 × t.
void Compare(FallbackDecision& d, double slower_factor) {
  double limit = slower_factor * d.unfused_us;
  d.use_unfused = d.fused_us > limit + 1e-9 * limit;
  if (d.use_unfused)
    d.reason = fmt::format("unfused: fused measured {:.2f}x slower (limit {:.2f}x)", d.fused_us / d.unfused_us, slower_factor);
  else if (d.fused_us < d.unfused_us)
    d.reason = fmt::format("kept fused: {:.2f}x faster than unfused", d.unfused_us / d.fused_us);
  else if (d.fused_us == d.unfused_us)
    d.reason = "kept fused: as fast as unfused";
  else
    d.reason = fmt::format("kept fused: {:.2f}x slower than unfused, within the {:.2f}x limit", d.fused_us / d.unfused_us,
                           slower_factor);
}

// " (unfused group 13 shares views with fused group 1, timed there)" or "".
std::string SharedNote(const FusionGroup& group, const PlanPairing& pairing) {
  std::vector<std::string> shared;
  for (int u : pairing.touching[group.id])
    if (pairing.timed_with[u] != group.id) shared.push_back(fmt::format("{} with fused group {}", u, pairing.timed_with[u]));
  if (shared.empty()) return "";
  return fmt::format(" (views shared: unfused group {}, timed there)", fmt::join(shared, ", "));
}

FallbackDecision Decide(const FusionGroup& group, const PlanPairing& pairing, const std::vector<double>& fused_times,
                        const std::vector<double>& unfused_times, double slower_factor) {
  FallbackDecision d;
  d.fused_group = group.id;
  d.unfused_groups = pairing.touching[group.id];
  d.fused_us = fused_times[group.id];
  d.unfused_us = 0;
  int missing = -1;
  for (int u : d.unfused_groups) {
    if (pairing.timed_with[u] != group.id) continue;
    d.unfused_us += unfused_times[u];  // NaN stays NaN
    if (std::isnan(unfused_times[u]) && missing < 0) missing = u;
  }
  if (std::isnan(d.fused_us))
    d.reason = "kept fused: not measured (no time for the fused group)";
  else if (missing >= 0)
    d.reason = fmt::format("kept fused: not measured (no time for unfused group {})", missing);
  else if (d.unfused_groups.size() == 1)
    d.reason = "kept fused: one kernel unfused too";
  else
    Compare(d, slower_factor);
  d.reason += SharedNote(group, pairing);
  return d;
}

}  // namespace

StatusOr<std::vector<FallbackDecision>> DecideFallbacks(const Graph& graph, const FusionPlan& fused,
                                                        const FusionPlan& unfused,
                                                        const std::vector<GroupTiming>& fused_times,
                                                        const std::vector<GroupTiming>& unfused_times,
                                                        double slower_factor) {
  if (!(slower_factor > 0) || !std::isfinite(slower_factor))
    return InvalidArgument(fmt::format("fallback factor {} must be a positive number", slower_factor));
  ASSIGN_OR_RETURN(PlanPairing pairing, PairPlans(graph, fused, unfused));
  ASSIGN_OR_RETURN(std::vector<double> fused_by_id, TimesById(fused_times, fused.groups.size(), "fused"));
  ASSIGN_OR_RETURN(std::vector<double> unfused_by_id, TimesById(unfused_times, unfused.groups.size(), "unfused"));
  std::vector<FallbackDecision> decisions;
  for (const FusionGroup& group : fused.groups)
    decisions.push_back(Decide(group, pairing, fused_by_id, unfused_by_id, slower_factor));
  return decisions;
}

std::string DescribeFallbacks(const std::vector<FallbackDecision>& decisions) {
  auto us = [](double t) { return std::isnan(t) ? std::string("not measured") : fmt::format("{:.2f} us", t); };
  std::string out;
  for (const FallbackDecision& d : decisions)
    out += fmt::format("group {}: fused {}, unfused {} (unfused groups {}) -> {}\n", d.fused_group, us(d.fused_us),
                       us(d.unfused_us), fmt::join(d.unfused_groups, ", "), d.reason);
  return out;
}

nlohmann::json FallbacksToJson(const std::vector<FallbackDecision>& decisions) {
  auto us = [](double t) { return std::isnan(t) ? nlohmann::json(nullptr) : nlohmann::json(t); };
  nlohmann::json out = nlohmann::json::array();
  for (const FallbackDecision& d : decisions)
    out.push_back({{"fused_group", d.fused_group},
                   {"unfused_groups", d.unfused_groups},
                   {"fused_us", us(d.fused_us)},
                   {"unfused_us", us(d.unfused_us)},
                   {"use_unfused", d.use_unfused},
                   {"reason", d.reason}});
  return out;
}

}  // namespace tilefuse
