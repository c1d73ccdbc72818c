#include "fusion/attention_matcher.h"

#include <algorithm>
#include <fmt/format.h>

#include "fusion/group_classifier.h"

namespace tilefuse {

namespace {

bool IsScoreOp(OpKind kind) {
  return kind == OpKind::Pointwise || kind == OpKind::Broadcast || kind == OpKind::View || kind == OpKind::Reduction;
}

class Matcher {
 public:
  explicit Matcher(const Graph& g) : g_(g), users_(g.ComputeUsers()), generator_(FindInlinedGenerators(g)),
                                     claimed_(g.num_nodes(), false), graph_output_(g.num_nodes(), false) {
    for (const Graph::Output& out : g.outputs()) graph_output_[out.node] = true;
  }

  std::vector<std::vector<int>> Run(std::vector<MissedAttention>* missed) {
    std::vector<std::vector<int>> groups;
    for (const Node& n : g_.nodes()) {
      if (n.op != OpCode::kMatMul || claimed_[n.id]) continue;
      std::string why;
      std::vector<int> members = Match(n, why);
      if (members.empty() && !why.empty() && missed) missed->push_back({n.id, std::move(why)});
      if (members.empty()) continue;
      for (int id : members) claimed_[id] = true;
      groups.push_back(std::move(members));
    }
    return groups;
  }

 private:
  // The first matmul reached walking back from the probabilities through score ops.
  // Score ops have the probabilities' size (or its rows', after a reduction): walking
  // only through those keeps the search inside one attention, not along the residual
  // stream through every earlier layer.
  // A value of another size that a score op reads (a padding mask [batch, 1, 1, keys] before
  // its broadcast, as transformers' exports compute it once for every layer) is an input of
  // the logits, computed before the group, provided it does not depend on the scores.
  // `blocker`: the node that stopped the walk, when one did.
  int FindScoreMatmul(int probs, std::vector<bool>& in_scores, int& blocker) const {
    const Shape& probs_shape = g_.node(probs).shape;
    int64_t full = NumElements(probs_shape), rows = probs_shape.empty() ? 1 : full / std::max<int64_t>(1, probs_shape.back());
    int score_matmul = -1;
    std::vector<int> stack = {probs}, side_inputs;
    while (!stack.empty()) {
      int id = stack.back();
      stack.pop_back();
      const Node& n = g_.node(id);
      if (in_scores[id] || n.info().kind == OpKind::Source || generator_[id]) continue;
      int64_t elements = NumElements(n.shape);
      if (id != probs && elements != full && elements != rows) {
        side_inputs.push_back(id);
        continue;
      }
      if (n.op == OpCode::kMatMul) {
        // A matmul another attention group already owns (its P·V) cannot be our Q·Kᵀ.
        if (claimed_[id] || (score_matmul >= 0 && score_matmul != id)) return blocker = id, -1;
        score_matmul = id;
        continue;
      }
      if (!IsScoreOp(n.info().kind) || claimed_[id]) return blocker = id, -1;
      in_scores[id] = true;
      for (int input : n.inputs) stack.push_back(input);
    }
    for (int id : side_inputs)
      if (score_matmul >= 0 && DependsOn(id, score_matmul)) return blocker = id, -1;
    return score_matmul;
  }

  // Is `node` computed from `ancestor`? (Node ids are in topological order.)
  bool DependsOn(int node, int ancestor) const {
    std::vector<bool> seen(g_.num_nodes(), false);
    std::vector<int> stack = {node};
    while (!stack.empty()) {
      const int id = stack.back();
      stack.pop_back();
      if (id == ancestor) return true;
      if (id < ancestor || seen[id]) continue;
      seen[id] = true;
      for (int input : g_.node(id).inputs) stack.push_back(input);
    }
    return false;
  }

  bool IsRowSoftmax(const std::vector<int>& scores, int64_t key_length) const {
    bool has_exp = false, has_sum = false;
    for (int id : scores) {
      const Node& n = g_.node(id);
      has_exp |= n.op == OpCode::kExp;
      has_sum |= n.op == OpCode::kReduceSum;
      int64_t rows, row_length;
      if (n.info().kind == OpKind::Reduction &&
          (!TrailingReductionSpace(g_, n, &rows, &row_length) || row_length != key_length))
        return false;
    }
    return has_exp && has_sum;
  }

  // A product with one scalar (a broadcast single-element constant): the scale exporters
  // put on Q and Kᵀ (torch.export splits SDPA's scale into a square root on each).
  bool IsScalarScale(const Node& n) const {
    if (n.op != OpCode::kMul) return false;
    for (int input : n.inputs) {
      const Node& in = g_.node(input);
      const bool scalar = NumElements(in.shape) == 1 ||
                          (in.op == OpCode::kBroadcast && NumElements(g_.node(in.inputs[0]).shape) == 1);
      if (generator_[input] && scalar) return true;
    }
    return false;
  }

  // Adds the view and broadcast nodes feeding `id` when all their users are already
  // members and none is a graph output (so nothing outside needs them materialised: a training
  // forward returns its Q, K and V views for the backward): they become index arithmetic.
  // (Broadcasts: K/V heads expanded for grouped-query attention are read, not copied.)
  // Scalar scales of an operand come along: the templates fold them into the score.
  void AbsorbFeeders(int id, std::vector<bool>& member) const {
    for (int input : g_.node(id).inputs) {
      const Node& in = g_.node(input);
      const bool index_only = in.info().kind == OpKind::View || in.info().kind == OpKind::Broadcast || IsScalarScale(in);
      if (member[input] || !index_only || generator_[input] || claimed_[input] || graph_output_[input]) continue;
      if (!std::all_of(users_[input].begin(), users_[input].end(), [&](int u) { return member[u]; })) continue;
      member[input] = true;
      AbsorbFeeders(input, member);
    }
  }

  // Does the walk from the probabilities pass an exp and a row sum (a softmax)?
  bool SawSoftmax(const std::vector<bool>& in_scores) const {
    bool exp = false, sum = false;
    for (int id = 0; id < g_.num_nodes(); ++id) {
      if (!in_scores[id]) continue;
      exp |= g_.node(id).op == OpCode::kExp;
      sum |= g_.node(id).op == OpCode::kReduceSum;
    }
    return exp && sum;
  }

  // A training forward's saved statistic: the logsumexp of each score row, written as
  // add(row max, log(row sum)) from the softmax's own reductions (tilefuse.fx's GPU attention
  // forward emits it so). Its two nodes join the group, which then has it as a second output
  // (the templates write max + log(sum) beside P·V; codegen/attention_lower.h checks that the
  // reductions are the softmax's).
  void ClaimLogSumExp(const std::vector<int>& scores, std::vector<bool>& member) const {
    for (int sum : scores) {
      if (g_.node(sum).op != OpCode::kReduceSum) continue;
      for (int log : users_[sum]) {
        const Node& l = g_.node(log);
        if (member[log] || l.op != OpCode::kLog || users_[log].size() != 1) continue;
        const Node& add = g_.node(users_[log][0]);
        if (add.op != OpCode::kAdd || add.inputs.size() != 2 || add.shape != l.shape) continue;
        const int other = add.inputs[0] == log ? add.inputs[1] : add.inputs[0];
        if (!member[other] || g_.node(other).op != OpCode::kReduceMax) continue;
        member[log] = member[add.id] = true;
      }
    }
  }

  static std::string Label(const Node& n) { return fmt::format("{} %{}", OpName(n.op), n.id); }

  // The members of the attention whose P·V is `pv`, or none; `why` says what failed for a
  // matmul that reads a softmax (empty for matmuls that do not look like attention).
  std::vector<int> Match(const Node& pv, std::string& why) {
    std::vector<bool> in_scores(g_.num_nodes(), false);
    int blocker = -1;
    int qk = FindScoreMatmul(pv.inputs[0], in_scores, blocker);
    if (qk < 0) {
      if (blocker >= 0 && SawSoftmax(in_scores))
        why = fmt::format("between the softmax and Q·Kᵀ, {} is not a per-score op (or belongs to another attention)",
                          Label(g_.node(blocker)));
      return {};
    }
    const Node& qk_node = g_.node(qk);
    const bool softmax_like = SawSoftmax(in_scores);
    auto miss = [&](std::string reason) {
      if (softmax_like) why = std::move(reason);
      return std::vector<int>{};
    };
    if (qk_node.shape.back() > 0 && qk_node.shape != g_.node(pv.inputs[0]).shape)
      return miss(fmt::format("the scores of {} and the probabilities P·V reads differ in shape", Label(qk_node)));
    if (g_.node(qk_node.inputs[0]).shape.back() > kMaxAttentionHeadDim || pv.shape.back() > kMaxAttentionHeadDim)
      return miss(fmt::format("head dims above {}", kMaxAttentionHeadDim));
    std::vector<int> scores;
    for (int id = qk + 1; id < pv.id; ++id)
      if (in_scores[id]) scores.push_back(id);
    if (!IsRowSoftmax(scores, qk_node.shape.back()))
      return miss("the ops between the matmuls are not a softmax over each score row (exp, row sum, and reductions only over the keys)");
    // The N×N intermediates must not be needed outside the group.
    std::vector<bool> member(g_.num_nodes(), false);
    member[qk] = member[pv.id] = true;
    for (int id : scores) member[id] = true;
    for (int id : scores)
      if (graph_output_[id])
        return miss(fmt::format("{} between the matmuls is a graph output: its N×N values would have to be stored", Label(g_.node(id))));
    if (graph_output_[qk]) return miss(fmt::format("the scores {} are a graph output", Label(qk_node)));
    ClaimLogSumExp(scores, member);
    for (int id : scores)
      for (int u : users_[id])
        if (!member[u])
          return miss(fmt::format("{} between the matmuls is also read by {} outside the attention: its N×N values would have to be stored",
                                  Label(g_.node(id)), Label(g_.node(u))));
    for (int u : users_[qk])
      if (!member[u])
        return miss(fmt::format("the scores {} are also read by {} outside the attention", Label(qk_node), Label(g_.node(u))));
    for (int id : scores) AbsorbFeeders(id, member);
    AbsorbFeeders(qk, member);
    AbsorbFeeders(pv.id, member);
    std::vector<int> members;
    for (int id = 0; id < g_.num_nodes(); ++id)
      if (member[id]) members.push_back(id);
    return members;
  }

  const Graph& g_;
  std::vector<std::vector<int>> users_;
  std::vector<bool> generator_;
  std::vector<bool> claimed_;
  std::vector<bool> graph_output_;
};

}  // namespace

std::vector<std::vector<int>> FindAttentionGroups(const Graph& graph, std::vector<MissedAttention>* missed) {
  return Matcher(graph).Run(missed);
}

}  // namespace tilefuse
