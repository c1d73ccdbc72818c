#include "runtime/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>

#include "support/check.h"

namespace tilefuse {

std::string_view BufferRoleName(BufferRole role) {
  switch (role) {
    case BufferRole::kGraphInput: return "graph input";
    case BufferRole::kGraphOutput: return "graph output";
    case BufferRole::kConstant: return "constant";
    case BufferRole::kIntermediate: return "intermediate";
  }
  TF_UNREACHABLE("unknown buffer role");
}

namespace {

std::string BufferLabel(const Schedule& schedule, int index) {
  const ScheduledBuffer& b = schedule.buffers[index];
  return b.name.empty() ? fmt::format("buffer {}", index) : fmt::format("buffer {} '{}'", index, b.name);
}

std::string StepLabel(const Schedule& schedule, int step) {
  const ScheduleStep& s = schedule.steps[step];
  return s.name.empty() ? fmt::format("step {}", step) : fmt::format("step {} '{}'", step, s.name);
}

int64_t AlignUp(int64_t bytes, int64_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

bool InArena(const Schedule& schedule, const std::vector<LiveRange>& live, int index) {
  return schedule.buffers[index].role == BufferRole::kIntermediate && live[index].first >= 0;
}

Status CheckBufferIndex(const Schedule& schedule, int step, int index) {
  if (index >= 0 && index < static_cast<int>(schedule.buffers.size())) return Status::Ok();
  return InvalidArgument(fmt::format("{} uses buffer {}, but the schedule has {} buffers", StepLabel(schedule, step),
                                     index, schedule.buffers.size()));
}

// Validates the schedule and finds each intermediate's live range: first write to last
// read or write. Other buffers keep {-1, -1}.
StatusOr<std::vector<LiveRange>> ComputeLiveRanges(const Schedule& schedule) {
  for (size_t i = 0; i < schedule.buffers.size(); ++i)
    if (schedule.buffers[i].bytes < 0)
      return InvalidArgument(fmt::format("{} has a negative size", BufferLabel(schedule, static_cast<int>(i))));
  std::vector<LiveRange> live(schedule.buffers.size());
  for (int s = 0; s < static_cast<int>(schedule.steps.size()); ++s) {
    const ScheduleStep& step = schedule.steps[s];
    for (int r : step.reads) {
      RETURN_IF_ERROR(CheckBufferIndex(schedule, s, r));
      if (schedule.buffers[r].role != BufferRole::kIntermediate) continue;
      if (live[r].first < 0)
        return InvalidArgument(fmt::format("{} reads intermediate {} before any step writes it", StepLabel(schedule, s),
                                           BufferLabel(schedule, r)));
      live[r].last = s;
    }
    for (int w : step.writes) {
      RETURN_IF_ERROR(CheckBufferIndex(schedule, s, w));
      BufferRole role = schedule.buffers[w].role;
      if (role == BufferRole::kGraphInput || role == BufferRole::kConstant)
        return InvalidArgument(fmt::format("{} writes {}, a {}", StepLabel(schedule, s), BufferLabel(schedule, w),
                                           BufferRoleName(role)));
      if (role != BufferRole::kIntermediate) continue;
      if (live[w].first < 0) live[w].first = s;
      live[w].last = s;
    }
  }
  return live;
}

// Lower bound of any placement: the most intermediate bytes live at one step.
void ComputePeakLiveBytes(const Schedule& schedule, MemoryPlan& plan) {
  std::vector<int64_t> delta(schedule.steps.size() + 1, 0);
  for (size_t i = 0; i < schedule.buffers.size(); ++i) {
    if (!InArena(schedule, plan.live_ranges, static_cast<int>(i))) continue;
    delta[plan.live_ranges[i].first] += schedule.buffers[i].bytes;
    delta[plan.live_ranges[i].last + 1] -= schedule.buffers[i].bytes;
    plan.total_intermediate_bytes += schedule.buffers[i].bytes;
    ++plan.num_intermediates;
  }
  int64_t live_bytes = 0;
  for (size_t s = 0; s < schedule.steps.size(); ++s) {
    live_bytes += delta[s];
    if (live_bytes > plan.peak_live_bytes || plan.peak_step < 0) {
      plan.peak_live_bytes = live_bytes;
      plan.peak_step = static_cast<int>(s);
    }
  }
}

struct Placement {
  int64_t offset;
  int64_t end;  // offset + aligned size
};

// The placed buffers live during a range of steps [a, b], found without scanning every
// placed buffer (which made 50k-step schedules take seconds): those born before a and
// still live at a come from a segment tree over steps (each range stored in O(log
// steps) nodes); those born in [a, b] from a map ordered by first step.
class LiveIndex {
 public:
  explicit LiveIndex(int num_steps) : num_steps_(std::max(1, num_steps)), tree_(4 * static_cast<size_t>(num_steps_)) {}

  void Insert(int placement, LiveRange live) {
    if (static_cast<int>(ranges_.size()) <= placement) ranges_.resize(placement + 1);
    ranges_[placement] = live;
    Insert(1, 0, num_steps_ - 1, placement, live);
    by_first_step_.emplace(live.first, placement);
  }

  void FindOverlapping(LiveRange query, std::vector<int>& out) const {
    int node = 1, lo = 0, hi = num_steps_ - 1;
    while (true) {
      for (int p : tree_[node])
        if (ranges_[p].first < query.first) out.push_back(p);
      if (lo == hi) break;
      int mid = (lo + hi) / 2;
      if (query.first <= mid) node = 2 * node, hi = mid;
      else node = 2 * node + 1, lo = mid + 1;
    }
    for (auto it = by_first_step_.lower_bound(query.first); it != by_first_step_.end() && it->first <= query.last; ++it)
      out.push_back(it->second);
  }

 private:
  void Insert(int node, int lo, int hi, int placement, LiveRange live) {
    if (live.last < lo || hi < live.first) return;
    if (live.first <= lo && hi <= live.last) {
      tree_[node].push_back(placement);
      return;
    }
    int mid = (lo + hi) / 2;
    Insert(2 * node, lo, mid, placement, live);
    Insert(2 * node + 1, mid + 1, hi, placement, live);
  }

  int num_steps_;
  std::vector<std::vector<int>> tree_;
  std::vector<LiveRange> ranges_;
  std::multimap<int, int> by_first_step_;
};

// Best fit among the gaps left by the placed buffers that are live at the same time;
// above all of them when no gap is large enough.
int64_t FindOffset(const std::vector<Placement>& placed, std::vector<int>& conflicts, int64_t size) {
  std::sort(conflicts.begin(), conflicts.end(), [&](int a, int b) { return placed[a].offset < placed[b].offset; });
  int64_t best = -1, best_gap = std::numeric_limits<int64_t>::max();
  int64_t gap_start = 0;
  for (int c : conflicts) {
    int64_t gap = placed[c].offset - gap_start;
    if (gap >= size && gap < best_gap) {
      best = gap_start;
      best_gap = gap;
    }
    gap_start = std::max(gap_start, placed[c].end);
  }
  return best >= 0 ? best : gap_start;
}

void PlaceBuffers(const Schedule& schedule, MemoryPlan& plan) {
  std::vector<int> order;
  for (size_t i = 0; i < schedule.buffers.size(); ++i)
    if (InArena(schedule, plan.live_ranges, static_cast<int>(i))) order.push_back(static_cast<int>(i));
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    int64_t size_a = schedule.buffers[a].bytes, size_b = schedule.buffers[b].bytes;
    if (size_a != size_b) return size_a > size_b;
    if (plan.live_ranges[a].first != plan.live_ranges[b].first)
      return plan.live_ranges[a].first < plan.live_ranges[b].first;
    return a < b;
  });
  std::vector<Placement> placed;
  LiveIndex live_index(static_cast<int>(schedule.steps.size()));
  std::vector<int> conflicts;
  for (int index : order) {
    int64_t size = AlignUp(schedule.buffers[index].bytes, plan.alignment);
    if (size == 0) {  // takes no bytes: anywhere will do
      plan.offsets[index] = 0;
      continue;
    }
    conflicts.clear();
    live_index.FindOverlapping(plan.live_ranges[index], conflicts);
    int64_t offset = FindOffset(placed, conflicts, size);
    plan.offsets[index] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    live_index.Insert(static_cast<int>(placed.size()), plan.live_ranges[index]);
    placed.push_back({offset, offset + size});
  }
}

}  // namespace

StatusOr<MemoryPlan> PlanMemory(const Schedule& schedule, const MemoryPlanOptions& options) {
  if (options.alignment <= 0 || (options.alignment & (options.alignment - 1)) != 0)
    return InvalidArgument(fmt::format("memory plan alignment {} is not a power of two", options.alignment));
  MemoryPlan plan;
  plan.alignment = options.alignment;
  ASSIGN_OR_RETURN(plan.live_ranges, ComputeLiveRanges(schedule));
  plan.offsets.assign(schedule.buffers.size(), -1);
  ComputePeakLiveBytes(schedule, plan);
  PlaceBuffers(schedule, plan);
  return plan;
}

namespace {

Status CheckPlacement(const Schedule& schedule, const MemoryPlan& plan, const std::vector<LiveRange>& live,
                      int index) {
  int64_t offset = plan.offsets[index];
  if (!InArena(schedule, live, index)) {
    if (offset == -1) return Status::Ok();
    return Internal(fmt::format("{} ({}, never live in the arena) has offset {}", BufferLabel(schedule, index),
                                BufferRoleName(schedule.buffers[index].role), offset));
  }
  if (offset < 0 || offset % plan.alignment != 0 || offset + schedule.buffers[index].bytes > plan.arena_bytes)
    return Internal(fmt::format("{} at offset {} ({} bytes) is unaligned or outside the {}-byte arena",
                                BufferLabel(schedule, index), offset, schedule.buffers[index].bytes, plan.arena_bytes));
  return Status::Ok();
}

Status OverlapError(const Schedule& schedule, const MemoryPlan& plan, const std::vector<LiveRange>& live, int a,
                    int b) {
  return Internal(fmt::format("{} [{}, {}) and {} [{}, {}) overlap in memory while both live at steps {}..{}",
                              BufferLabel(schedule, a), plan.offsets[a], plan.offsets[a] + schedule.buffers[a].bytes,
                              BufferLabel(schedule, b), plan.offsets[b], plan.offsets[b] + schedule.buffers[b].bytes,
                              std::max(live[a].first, live[b].first), std::min(live[a].last, live[b].last)));
}

}  // namespace

Status CheckMemoryPlan(const Schedule& schedule, const MemoryPlan& plan) {
  if (plan.offsets.size() != schedule.buffers.size())
    return Internal(fmt::format("the plan has {} offsets for {} buffers", plan.offsets.size(), schedule.buffers.size()));
  if (plan.alignment <= 0) return Internal(fmt::format("the plan's alignment is {}", plan.alignment));
  // Recomputed rather than taken from the plan, so the check does not trust the planner.
  ASSIGN_OR_RETURN(std::vector<LiveRange> live, ComputeLiveRanges(schedule));
  std::vector<std::vector<int>> born(schedule.steps.size()), dying(schedule.steps.size());
  for (int i = 0; i < static_cast<int>(schedule.buffers.size()); ++i) {
    RETURN_IF_ERROR(CheckPlacement(schedule, plan, live, i));
    if (!InArena(schedule, live, i) || schedule.buffers[i].bytes == 0) continue;
    born[live[i].first].push_back(i);
    dying[live[i].last].push_back(i);
  }
  // Sweep over the steps holding the live buffers ordered by offset. They are pairwise
  // disjoint until the first conflict, so a newcomer need only be checked against its
  // neighbours: linear in the buffers (times log), however much the plan reuses bytes.
  std::map<int64_t, int> live_by_offset;
  for (size_t step = 0; step < schedule.steps.size(); ++step) {
    for (int b : born[step]) {
      auto next = live_by_offset.lower_bound(plan.offsets[b]);
      if (next != live_by_offset.end() && next->first < plan.offsets[b] + schedule.buffers[b].bytes)
        return OverlapError(schedule, plan, live, next->second, b);
      if (next != live_by_offset.begin()) {
        auto previous = std::prev(next);
        if (previous->first + schedule.buffers[previous->second].bytes > plan.offsets[b])
          return OverlapError(schedule, plan, live, previous->second, b);
      }
      live_by_offset.emplace(plan.offsets[b], b);
    }
    for (int d : dying[step]) live_by_offset.erase(plan.offsets[d]);
  }
  return Status::Ok();
}

namespace {

BufferRole RoleOf(const Node& node, const std::vector<bool>& is_graph_output) {
  if (node.op == OpCode::kParameter) return BufferRole::kGraphInput;
  if (node.op == OpCode::kConstant) return BufferRole::kConstant;
  return is_graph_output[node.id] ? BufferRole::kGraphOutput : BufferRole::kIntermediate;
}

std::string NodeLabel(const Node& n) { return n.name.empty() ? fmt::format("%{}", n.id) : fmt::format("%{} {}", n.id, n.name); }

// Nodes that hold memory: every parameter, every graph output, and every node a group
// reads or writes, except iotas and inlined generators (group_of -1, not a source).
std::vector<bool> NodesWithBuffers(const Graph& graph, const FusionPlan& plan) {
  std::vector<bool> has_buffer(graph.num_nodes(), false);
  for (int id : graph.inputs()) has_buffer[id] = true;
  for (const Graph::Output& o : graph.outputs()) has_buffer[o.node] = true;
  for (const FusionGroup& g : plan.groups) {
    for (int id : g.outputs) has_buffer[id] = true;
    for (int id : g.inputs)
      if (plan.group_of[id] >= 0 || graph.node(id).info().kind == OpKind::Source) has_buffer[id] = true;
  }
  return has_buffer;
}

}  // namespace

Schedule ScheduleFromFusionPlan(const Graph& graph, const FusionPlan& plan) {
  TF_CHECK(static_cast<int>(plan.group_of.size()) == graph.num_nodes());
  std::vector<bool> is_graph_output(graph.num_nodes(), false);
  for (const Graph::Output& o : graph.outputs()) is_graph_output[o.node] = true;
  std::vector<bool> has_buffer = NodesWithBuffers(graph, plan);

  Schedule schedule;
  std::vector<int> buffer_of_node(graph.num_nodes(), -1);
  for (const Node& n : graph.nodes()) {
    if (!has_buffer[n.id]) continue;
    buffer_of_node[n.id] = static_cast<int>(schedule.buffers.size());
    schedule.buffers.push_back({NumElements(n.shape) * DTypeSize(n.dtype), RoleOf(n, is_graph_output), n.id, NodeLabel(n)});
  }
  for (const FusionGroup& g : plan.groups) {
    ScheduleStep step;
    step.name = fmt::format("group {} ({})", g.id, GroupKindName(g.kind));
    for (int id : g.inputs)
      if (buffer_of_node[id] >= 0) step.reads.push_back(buffer_of_node[id]);
    for (int id : g.outputs) {
      TF_CHECK_MSG(plan.group_of[id] == g.id, "a group output belongs to another group");
      step.writes.push_back(buffer_of_node[id]);
    }
    schedule.steps.push_back(std::move(step));
  }
  return schedule;
}

void AddStepLocalBuffers(const Graph& graph, const std::vector<std::vector<int>>& local_values, Schedule& schedule) {
  TF_CHECK(local_values.size() <= schedule.steps.size());
  std::vector<bool> has_buffer(graph.num_nodes(), false);
  for (const ScheduledBuffer& b : schedule.buffers)
    if (b.node >= 0) has_buffer[b.node] = true;
  for (size_t step = 0; step < local_values.size(); ++step)
    for (int id : local_values[step]) {
      if (has_buffer[id]) continue;
      has_buffer[id] = true;
      const Node& n = graph.node(id);
      TF_CHECK_MSG(n.op != OpCode::kParameter && n.op != OpCode::kConstant, "a step cannot materialise an input or a constant");
      schedule.steps[step].writes.push_back(static_cast<int>(schedule.buffers.size()));
      schedule.buffers.push_back({NumElements(n.shape) * DTypeSize(n.dtype), BufferRole::kIntermediate, id, NodeLabel(n)});
    }
}

void AddStepReads(const std::vector<std::vector<int>>& touched, Schedule& schedule) {
  TF_CHECK(touched.size() <= schedule.steps.size());
  std::map<int, int> buffer_of_node;
  for (size_t b = 0; b < schedule.buffers.size(); ++b)
    if (schedule.buffers[b].node >= 0) buffer_of_node[schedule.buffers[b].node] = static_cast<int>(b);
  for (size_t s = 0; s < touched.size(); ++s) {
    ScheduleStep& step = schedule.steps[s];
    for (int id : touched[s]) {
      auto it = buffer_of_node.find(id);
      if (it == buffer_of_node.end()) continue;
      const int b = it->second;
      if (std::find(step.reads.begin(), step.reads.end(), b) != step.reads.end() ||
          std::find(step.writes.begin(), step.writes.end(), b) != step.writes.end())
        continue;
      step.reads.push_back(b);
    }
  }
}

StatusOr<MemoryPlan> PlanFusionPlanMemory(const Graph& graph, const FusionPlan& plan,
                                          const MemoryPlanOptions& options) {
  return PlanMemory(ScheduleFromFusionPlan(graph, plan), options);
}

namespace {

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < 1024 * 1024) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  if (bytes < int64_t{1} << 30) return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0));
  return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024.0 * 1024.0));
}

}  // namespace

std::string DescribeMemoryPlan(const MemoryPlan& plan) {
  return fmt::format("{} intermediates, arena {} (peak live {}, no reuse {})", plan.num_intermediates,
                     FormatBytes(plan.arena_bytes), FormatBytes(plan.peak_live_bytes),
                     FormatBytes(plan.total_intermediate_bytes));
}

}  // namespace tilefuse
