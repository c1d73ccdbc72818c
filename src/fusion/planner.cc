#include "fusion/planner.h"

#include <algorithm>
#include <fmt/format.h>
#include <queue>

#include "fusion/attention_matcher.h"
#include "fusion/cost_model.h"
#include "fusion/device_spec.h"
#include "fusion/group_classifier.h"

namespace tilefuse {

namespace {

// Note on cycles. Merging producer group P with consumer group C is illegal when some
// other path P ⇝ X ⇝ C exists: the merged group would both feed X and need it.
//
//        P ──────► C            P∪C ──► X ──► P∪C   (a cycle: no kernel order exists)
//         └─► X ──┘
//
// We keep a topological order of the groups (`order`) and only search the groups whose
// order lies strictly between P and C; after a merge the groups of that interval are
// renumbered (Pearce–Kelly style): those that reach C go before the merged group,
// those reachable from P after it. Searches stay local, so planning stays near-linear.

struct Group {
  std::vector<int> members;
  GroupKind kind = GroupKind::kPointwise;
  double seconds = 0;
  int version = 0;
  int order = 0;
  bool alive = false;
  bool closed = false;  // attention, or a staged convolution input: takes no further ops
};

struct Candidate {
  FusionDecision decision = FusionDecision::Allow();
  double saving = 0;
  GroupKind kind = GroupKind::kPointwise;
  double seconds = 0;
};

struct HeapEntry {
  double saving;
  int producer, consumer, producer_version, consumer_version;
  bool operator<(const HeapEntry& o) const {  // max-heap on saving; then smallest ids first
    if (saving != o.saving) return saving < o.saving;
    if (producer != o.producer) return producer > o.producer;
    return consumer > o.consumer;
  }
};

std::vector<int> MergeSorted(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> out;
  out.reserve(a.size() + b.size());
  std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

class PriorityFusion {
 public:
  PriorityFusion(const Graph& g, const CostModel& model, const PlannerOptions& options)
      : g_(g), model_(model), options_(options), users_(g.ComputeUsers()), groups_(g.num_nodes()),
        group_of_(g.num_nodes(), -1), mark_(g.num_nodes(), 0), inlined_(FindInlinedGenerators(g)),
        conv_anchors_(options.target && options.target->AnchorsConvolution()) {}

  FusionPlan Run() {
    CreateInitialGroups();
    ComputeInitialOrder();
    if (options_.fuse) {
      MergeByPriority();
      MoveBoundaryOps();
      RecordRejections();
    } else {
      FoldViewsIntoConsumers();
    }
    return Finish();
  }

 private:
  // The NHWC copy passes/stage_conv_inputs.h makes of a convolution's NCHW input:
  // transpose(x, [0, 2, 3, 1]) read only through transpose(·, [0, 3, 1, 2]) views by windows.
  // It is a group of its own, never folded into its readers (whose implicit GEMM reads it
  // by TMA) nor into its producer.
  bool StagedConvInput(int id) const {
    auto is_transpose = [&](int n, std::initializer_list<int64_t> perm) {
      return g_.node(n).op == OpCode::kTranspose && g_.node(n).attrs.perm == std::vector<int64_t>(perm);
    };
    if (!is_transpose(id, {0, 2, 3, 1}) || users_[id].empty()) return false;
    for (int view : users_[id]) {
      if (!is_transpose(view, {0, 3, 1, 2}) || users_[view].empty()) return false;
      for (int window : users_[view])
        if (g_.node(window).op != OpCode::kWindow) return false;
    }
    return true;
  }

  // A group of views (a window of one element: the zero padding ResNet's stem reads, made part
  // of its staged copy by passes/stage_conv_inputs) read only by a staged convolution input:
  // the copy reads through them, one kernel instead of a padded copy and its transpose.
  bool ViewsIntoStagedCopy(int producer, int consumer) const {
    const Group &p = groups_[producer], &q = groups_[consumer];
    if (p.closed || !q.closed || q.kind == GroupKind::kAttention) return false;
    for (int id : p.members) {
      if (g_.node(id).info().kind != OpKind::View) return false;
      for (int user : users_[id])
        if (group_of_[user] != producer && group_of_[user] != consumer) return false;
    }
    return true;
  }

  // Sources and inlined generators belong to no group; their readers load or recompute them.
  bool Ungrouped(int id) const { return g_.node(id).info().kind == OpKind::Source || inlined_[id]; }

  void CreateInitialGroups() {
    if (options_.fuse && !options_.disabled_kinds.count(GroupKind::kAttention)) {
      std::vector<MissedAttention> missed;
      std::vector<std::vector<int>> attention = FindAttentionGroups(g_, &missed);
      for (const MissedAttention& m : missed) missed_attention_.push_back(fmt::format("matmul %{}: {}", m.matmul, m.reason));
      for (std::vector<int>& members : attention) {
        if (std::any_of(members.begin(), members.end(), [&](int id) { return options_.no_attention_at.count(id) > 0; })) continue;
        Group& group = groups_[members[0]];
        for (int id : members) group_of_[id] = members[0];
        group.members = std::move(members);
        group.kind = GroupKind::kAttention;
        group.closed = true;
        group.alive = true;
        group.seconds = model_.PredictGroupTime(group.members).seconds;
      }
    }
    for (const Node& n : g_.nodes()) {
      if (Ungrouped(n.id) || group_of_[n.id] >= 0) continue;
      Group& group = groups_[n.id];
      group.members = {n.id};
      group.kind = ClassifyGroup(g_, group.members, conv_anchors_).kind;
      group.alive = true;
      group.seconds = model_.PredictGroupTime(group.members).seconds;
      group_of_[n.id] = n.id;
      group.closed = StagedConvInput(n.id);
    }
  }

  std::vector<int> Neighbours(int group, bool consumers) const {
    std::vector<int> out;
    for (int id : groups_[group].members) {
      const std::vector<int>& next = consumers ? users_[id] : g_.node(id).inputs;
      for (int other : next) {
        int og = group_of_[other];
        if (og >= 0 && og != group) out.push_back(og);
      }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  // Kahn's algorithm over the group graph, smallest first member first.
  void ComputeInitialOrder() {
    std::vector<int> pending(groups_.size(), 0);
    std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
    for (size_t gid = 0; gid < groups_.size(); ++gid) {
      if (!groups_[gid].alive) continue;
      pending[gid] = static_cast<int>(Neighbours(static_cast<int>(gid), false).size());
      if (pending[gid] == 0) ready.push(static_cast<int>(gid));
    }
    int next = 0;
    while (!ready.empty()) {
      int gid = ready.top();
      ready.pop();
      groups_[gid].order = next++;
      for (int c : Neighbours(gid, true))
        if (--pending[c] == 0) ready.push(c);
    }
  }

  // Groups reachable from `from` (forward) or reaching it (backward) whose order lies
  // strictly inside (low, high). Marks use a fresh stamp per search.
  std::vector<int> SearchInterval(int from, bool forward, int low, int high) {
    ++stamp_;
    std::vector<int> found, stack = {from};
    while (!stack.empty()) {
      int gid = stack.back();
      stack.pop_back();
      for (int next : Neighbours(gid, forward)) {
        int order = groups_[next].order;
        if (order <= low || order >= high || mark_[next] == stamp_) continue;
        mark_[next] = stamp_;
        found.push_back(next);
        stack.push_back(next);
      }
    }
    return found;
  }

  // Is there a path producer ⇝ X ⇝ consumer through some other group X?
  int IndirectPath(int producer, int consumer) {
    int low = groups_[producer].order, high = groups_[consumer].order;
    for (int reached : SearchInterval(producer, true, low, high))
      for (int next : Neighbours(reached, true))
        if (next == consumer) return reached;
    return -1;
  }

  std::string GroupLabel(int gid) const {
    const Node& n = g_.node(groups_[gid].members.back());
    return fmt::format("group of {} %{}{}", OpName(n.op), n.id, n.name.empty() ? "" : " '" + n.name + "'");
  }

  Candidate Evaluate(int producer, int consumer) {
    Candidate c;
    const Group& p = groups_[producer];
    const Group& q = groups_[consumer];
    if ((p.closed || q.closed) && !ViewsIntoStagedCopy(producer, consumer)) {
      c.decision = FusionDecision::Forbid(p.kind == GroupKind::kAttention || q.kind == GroupKind::kAttention
                                              ? "attention groups take no further ops"
                                              : "a convolution's staged NHWC input stays a copy of its own");
      return c;
    }
    std::vector<int> merged = MergeSorted(p.members, q.members);
    GroupClassification cls = ClassifyGroup(g_, merged, conv_anchors_);
    if (!cls.decision) {
      c.decision = cls.decision;
      return c;
    }
    c.kind = cls.kind;
    if (options_.disabled_kinds.count(cls.kind)) {
      c.decision = FusionDecision::Forbid(fmt::format("{} fusion is disabled (--disable-fusion)", GroupKindName(cls.kind)));
      return c;
    }
    GroupCost cost = model_.PredictGroupTime(merged);
    c.seconds = cost.seconds;
    c.saving = p.seconds + q.seconds - c.seconds;
    if (c.saving <= 0) {
      c.decision = FusionDecision::Forbid(fmt::format("no predicted saving: {:.2f} us fused vs {:.2f} us apart{}", c.seconds * 1e6,
                                                      (p.seconds + q.seconds) * 1e6, cost.note.empty() ? "" : " (" + cost.note + ")"));
      return c;
    }
    if (int via = IndirectPath(producer, consumer); via >= 0)
      c.decision = FusionDecision::Forbid(fmt::format("fusing would create a cycle through the {}", GroupLabel(via)));
    return c;
  }

  void PushCandidates(int gid, std::priority_queue<HeapEntry>& heap) {
    for (int producer : Neighbours(gid, false)) Push(producer, gid, heap);
    for (int consumer : Neighbours(gid, true)) Push(gid, consumer, heap);
  }

  void Push(int producer, int consumer, std::priority_queue<HeapEntry>& heap) {
    Candidate c = Evaluate(producer, consumer);
    if (c.decision)
      heap.push({c.saving, producer, consumer, groups_[producer].version, groups_[consumer].version});
  }

  void MergeByPriority() {
    std::priority_queue<HeapEntry> heap;
    for (size_t gid = 0; gid < groups_.size(); ++gid)
      if (groups_[gid].alive)
        for (int consumer : Neighbours(static_cast<int>(gid), true)) Push(static_cast<int>(gid), consumer, heap);
    while (!heap.empty()) {
      HeapEntry e = heap.top();
      heap.pop();
      const Group& p = groups_[e.producer];
      const Group& c = groups_[e.consumer];
      if (!p.alive || !c.alive || p.version != e.producer_version || c.version != e.consumer_version) continue;
      // Other merges may have joined groups into a new indirect path since the push.
      Candidate now = Evaluate(e.producer, e.consumer);
      if (!now.decision) continue;
      Merge(e.producer, e.consumer, now);
      PushCandidates(e.producer, heap);
    }
  }

  // Greedy merging can leave a cheap op in the wrong one of two neighbouring groups: a
  // widening cast taken into a gemm epilogue (compute-bound: its extra write looked free)
  // before the layer norm reading it had become one group, which then reads the wide
  // values back. This pass moves such an op to the group of all its readers when the two
  // groups are then predicted faster. Only ops whose inputs in their group are written
  // out anyway and which read nothing from a third group move, so no output is added and
  // no cycle can form; the groups keep their order.
  //
  // A transpose moves too, also when its input is then written instead of it (as many
  // elements) and when the cost model sees no difference: taken into the group that writes
  // its input (a channels-last value read by a convolution's window), it makes that group
  // store the value transposed — with stores strided along the layout it computes in —
  // where the readers' gemm prologue reads through it as index arithmetic.
  void MoveBoundaryOps() {
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t gid = 0; gid < groups_.size(); ++gid) {
        if (!groups_[gid].alive || groups_[gid].closed || groups_[gid].members.size() < 2) continue;
        for (int id : groups_[gid].members)
          if (TryMoveToReaders(static_cast<int>(gid), id)) {
            moved = true;
            break;
          }
      }
    }
  }

  bool TryMoveToReaders(int from, int id) {
    const Node& n = g_.node(id);
    const bool transpose = n.op == OpCode::kTranspose;
    if ((n.info().kind != OpKind::Pointwise && !transpose) || users_[id].empty()) return false;
    const int to = group_of_[users_[id].front()];
    if (to == from || to < 0 || groups_[to].closed) return false;
    for (const Graph::Output& o : g_.outputs())
      if (o.node == id) return false;
    for (int u : users_[id])
      if (group_of_[u] != to) return false;
    for (int input : n.inputs) {
      if (Ungrouped(input)) continue;
      if (group_of_[input] != from) return false;  // reads a third group
      bool escapes = std::any_of(users_[input].begin(), users_[input].end(), [&](int u) { return u != id && group_of_[u] != from; });
      for (const Graph::Output& o : g_.outputs()) escapes = escapes || o.node == input;
      if (!escapes && !transpose) return false;  // its input would become a new output
    }
    std::vector<int> rest;
    for (int m : groups_[from].members)
      if (m != id) rest.push_back(m);
    std::vector<int> grown = MergeSorted(groups_[to].members, {id});
    GroupClassification rest_cls = ClassifyGroup(g_, rest, conv_anchors_), grown_cls = ClassifyGroup(g_, grown, conv_anchors_);
    if (!rest_cls.decision || !grown_cls.decision || options_.disabled_kinds.count(rest_cls.kind) ||
        options_.disabled_kinds.count(grown_cls.kind))
      return false;
    const double before = groups_[from].seconds + groups_[to].seconds;
    const double rest_seconds = model_.PredictGroupTime(rest).seconds, grown_seconds = model_.PredictGroupTime(grown).seconds;
    if (rest_seconds + grown_seconds >= before * (transpose ? 1 + 1e-6 : 1 - 1e-6)) return false;
    Group& f = groups_[from];
    Group& t = groups_[to];
    f.members = std::move(rest);
    f.kind = rest_cls.kind;
    f.seconds = rest_seconds;
    ++f.version;
    t.members = std::move(grown);
    t.kind = grown_cls.kind;
    t.seconds = grown_seconds;
    ++t.version;
    group_of_[id] = to;
    return true;
  }

  void Merge(int producer, int consumer, const Candidate& c) {
    int low = groups_[producer].order, high = groups_[consumer].order;
    std::vector<int> after = SearchInterval(producer, true, low, high);    // must follow the merged group
    std::vector<int> before = SearchInterval(consumer, false, low, high);  // must precede it
    std::vector<int> slots = {low, high};
    for (int gid : after) slots.push_back(groups_[gid].order);
    for (int gid : before) slots.push_back(groups_[gid].order);
    std::sort(slots.begin(), slots.end());
    auto by_order = [&](int a, int b) { return groups_[a].order < groups_[b].order; };
    std::sort(before.begin(), before.end(), by_order);
    std::sort(after.begin(), after.end(), by_order);
    size_t slot = 0;
    for (int gid : before) groups_[gid].order = slots[slot++];
    groups_[producer].order = slots[slot++];
    slot = slots.size() - after.size();
    for (int gid : after) groups_[gid].order = slots[slot++];

    Group& p = groups_[producer];
    Group& q = groups_[consumer];
    for (int id : q.members) group_of_[id] = producer;
    p.members = MergeSorted(p.members, q.members);
    p.closed = p.closed || q.closed;  // a staged copy that took the views it reads stays a copy of its own
    p.kind = c.kind;
    p.seconds = c.seconds;
    ++p.version;
    q.alive = false;
    q.members.clear();
    ++q.version;
  }

  // --no-fusion: every op is its own kernel, except views and broadcasts, which become
  // index arithmetic in their consumer's loads when the consumer's template allows it.
  void FoldViewsIntoConsumers() {
    for (int id = g_.num_nodes() - 1; id >= 0; --id) {
      OpKind kind = g_.node(id).info().kind;
      if (group_of_[id] != id || groups_[id].closed || (kind != OpKind::View && kind != OpKind::Broadcast)) continue;
      std::vector<int> consumers = Neighbours(id, true);
      if (consumers.empty()) continue;
      std::vector<int> merged = MergeSorted(groups_[id].members, groups_[consumers[0]].members);
      GroupClassification cls = ClassifyGroup(g_, merged, conv_anchors_);
      if (!cls.decision || groups_[consumers[0]].closed || IndirectPath(id, consumers[0]) >= 0) continue;
      Candidate c;
      c.kind = cls.kind;
      c.seconds = model_.PredictGroupTime(merged).seconds;
      Merge(id, consumers[0], c);
    }
  }

  void RecordRejections() {
    for (size_t gid = 0; gid < groups_.size(); ++gid) {
      if (!groups_[gid].alive) continue;
      for (int consumer : Neighbours(static_cast<int>(gid), true)) {
        Candidate c = Evaluate(static_cast<int>(gid), consumer);
        rejected_.push_back({static_cast<int>(gid), consumer,
                             c.decision ? std::string("not merged (a better merge took one side first)") : c.decision.Explain()});
      }
    }
  }

  FusionPlan Finish();

  const Graph& g_;
  const CostModel& model_;
  const PlannerOptions& options_;
  std::vector<std::vector<int>> users_;
  std::vector<Group> groups_;
  std::vector<int> group_of_;
  std::vector<int> mark_;
  std::vector<bool> inlined_;
  const bool conv_anchors_;  // Conv anchors gemm groups (TargetCapabilities::AnchorsConvolution)
  int stamp_ = 0;
  std::vector<RejectedMerge> rejected_;
  std::vector<std::string> missed_attention_;
};

FusionPlan PriorityFusion::Finish() {
  std::vector<int> alive;
  for (size_t gid = 0; gid < groups_.size(); ++gid)
    if (groups_[gid].alive) alive.push_back(static_cast<int>(gid));
  std::sort(alive.begin(), alive.end(), [&](int a, int b) { return groups_[a].order < groups_[b].order; });
  std::vector<int> new_id(groups_.size(), -1);
  for (size_t i = 0; i < alive.size(); ++i) new_id[alive[i]] = static_cast<int>(i);

  std::vector<bool> is_output(g_.num_nodes(), false);
  for (const Graph::Output& o : g_.outputs()) is_output[o.node] = true;
  FusionPlan plan;
  plan.device = model_.spec().name;
  plan.group_of.assign(g_.num_nodes(), -1);
  for (int gid : alive) {
    FusionGroup fg;
    fg.id = new_id[gid];
    fg.kind = groups_[gid].kind;
    fg.nodes = groups_[gid].members;
    for (int id : fg.nodes) {
      plan.group_of[id] = fg.id;
      for (int input : g_.node(id).inputs)
        if (group_of_[input] != gid) fg.inputs.push_back(input);
      bool escapes = is_output[id] || std::any_of(users_[id].begin(), users_[id].end(),
                                                  [&](int u) { return group_of_[u] != gid; });
      if (escapes) fg.outputs.push_back(id);
      OpKind kind = g_.node(id).info().kind;
      if (kind != OpKind::View && kind != OpKind::Broadcast)
        fg.unfused_predicted_us += model_.PredictGroupTime({id}).seconds * 1e6;
    }
    std::sort(fg.inputs.begin(), fg.inputs.end());
    fg.inputs.erase(std::unique(fg.inputs.begin(), fg.inputs.end()), fg.inputs.end());
    GroupCost cost = model_.PredictGroupTime(fg.nodes);
    fg.bytes = cost.bytes;
    fg.flops = cost.flops;
    fg.predicted_us = cost.seconds * 1e6;
    fg.cost_note = cost.note;
    fg.unfused_predicted_us = std::max(fg.unfused_predicted_us, fg.predicted_us * (fg.nodes.size() == 1));
    plan.predicted_us += fg.predicted_us;
    plan.groups.push_back(std::move(fg));
  }
  for (const RejectedMerge& r : rejected_) plan.rejected.push_back({new_id[r.producer_group], new_id[r.consumer_group], r.reason});
  plan.missed_attention = missed_attention_;
  return plan;
}

}  // namespace

bool ParseGroupKind(std::string_view name, GroupKind* kind) {
  for (GroupKind k : {GroupKind::kPointwise, GroupKind::kRowReduction, GroupKind::kReduction, GroupKind::kGemm,
                      GroupKind::kAttention, GroupKind::kOpaque}) {
    if (GroupKindName(k) == name) {
      *kind = k;
      return true;
    }
  }
  return false;
}

StatusOr<FusionPlan> PlanFusion(const Graph& graph, const PlannerOptions& options) {
  const DeviceSpec* spec = FindDeviceSpec(options.device);
  if (!spec)
    return InvalidArgument(fmt::format("unknown device '{}' (known: {})", options.device, fmt::join(KnownDeviceNames(), ", ")));
  for (const Node& n : graph.nodes())
    if (n.info().kind == OpKind::Composite)
      return InvalidArgument(fmt::format("%{} ({}) is a composite op: run the graph passes before planning", n.id, OpName(n.op)));
  CostModel model(graph, *spec, options.target);
  PlannerOptions unfused_options = options;
  unfused_options.fuse = false;
  FusionPlan unfused = PriorityFusion(graph, model, unfused_options).Run();
  FusionPlan plan = options.fuse ? PriorityFusion(graph, model, options).Run() : unfused;
  plan.unfused_kernels = static_cast<int>(unfused.groups.size());
  plan.unfused_predicted_us = unfused.predicted_us;
  return plan;
}

}  // namespace tilefuse
