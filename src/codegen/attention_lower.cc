#include "codegen/attention_lower.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <optional>

#include "codegen/lower.h"
#include "fusion/group_classifier.h"

namespace tilefuse {

namespace {

std::string Describe(const Node& n) { return fmt::format("{} %{}", OpName(n.op), n.id); }

Shape BatchDims(const Shape& s) { return Shape(s.begin(), s.end() - 2); }

// The first dims of a node's sizes in the model's symbols (null without symbols).
std::optional<std::vector<SymExpr>> BatchSizes(const std::vector<SymExpr>* sizes) {
  if (!sizes) return std::nullopt;
  return std::vector<SymExpr>(sizes->begin(), sizes->end() - 2);
}

// Flat offset in `operand_batch` of output batch element (loop variable 0): matmul
// batch dims broadcast like numpy (right-aligned, size 1 repeats). The sizes, where given,
// are the dims in the model's symbols.
Index BatchIndex(const Shape& out_batch, const Shape& operand_batch, const std::optional<std::vector<SymExpr>>& out_sizes = std::nullopt,
                 const std::optional<std::vector<SymExpr>>& operand_sizes = std::nullopt) {
  std::vector<Index> out = Unravel(IndexVar(0, NumElements(out_batch)), out_batch, out_sizes ? &*out_sizes : nullptr);
  size_t offset = out_batch.size() - operand_batch.size();
  std::vector<Index> at;
  for (size_t d = 0; d < operand_batch.size(); ++d) at.push_back(operand_batch[d] == 1 ? IndexConst(0) : out[d + offset]);
  return Ravel(at, operand_batch, operand_sizes ? &*operand_sizes : nullptr);
}

class AttentionLowering {
 public:
  AttentionLowering(const Graph& g, const FusionGroup& group, const std::vector<bool>& inlined, const SymbolicShapes* symbolic)
      : g_(g),
        group_(group),
        inlined_(inlined),
        symbolic_(symbolic && !symbolic->empty() ? symbolic : nullptr),
        member_(g.num_nodes(), false),
        placed_(g.num_nodes(), false) {
    for (int id : group.nodes) member_[id] = true;
  }

  StatusOr<AttentionKernel> Run();

 private:
  Status FindMatmuls();
  Status MatchSoftmax();
  int PeelLayoutKeeping(int node);
  bool IsZero(int node);
  StatusOr<int> MatchNanGuard(int where);
  StatusOr<int> RowReductionInput(int node, OpCode op, int* reduction_node = nullptr);
  Status MatchLogSumExp();
  StatusOr<std::vector<int>> ComputedAncestors(int node, const char* role);
  Status LowerLogits();
  Status LowerOperand(int node, const Shape& out_batch, bool may_read_in_place, AttentionOperand& operand);
  void Place(const std::vector<int>& nodes) {
    for (int id : nodes) placed_[id] = true;
  }
  int AddBuffer(int node);
  void RemapLoads(Kernel& program);
  // The node's dims in the model's symbols (null without symbols).
  const std::vector<SymExpr>* Sizes(int node) const { return symbolic_ ? &symbolic_->dims.at(static_cast<size_t>(node)) : nullptr; }

  const Graph& g_;
  const FusionGroup& group_;
  const std::vector<bool>& inlined_;
  const SymbolicShapes* symbolic_;
  std::vector<bool> member_, placed_;
  const Node* qk_ = nullptr;
  const Node* pv_ = nullptr;
  int logit_node_ = -1;
  int row_max_ = -1, row_sum_ = -1;  // the softmax's reductions (row_max_: where it subtracts one)
  int64_t score_rows_ = 0;
  Index row_, key_, score_at_;  // loop variables of the logits and their flat offset
  std::map<int, int> input_buffer_;
  AttentionKernel a_;
};

int AttentionLowering::AddBuffer(int node) {
  if (auto it = input_buffer_.find(node); it != input_buffer_.end()) return it->second;
  const Node& n = g_.node(node);
  a_.buffers.push_back({node, n.dtype, NumElements(n.shape), false});
  return input_buffer_[node] = static_cast<int>(a_.buffers.size()) - 1;
}

// Programs come out of LowerValueAt with buffers of their own: renumber their loads into
// the kernel's argument list; loads of the Q·Kᵀ product become the dot product (-1).
void AttentionLowering::RemapLoads(Kernel& program) {
  for (ScalarValue& v : program.values) {
    if (v.kind != ScalarValue::Kind::kLoad) continue;
    int node = program.buffers[v.buffer].node;
    v.buffer = node == qk_->id ? -1 : AddBuffer(node);
  }
  program.buffers.clear();
}

Status AttentionLowering::FindMatmuls() {
  for (int id : group_.nodes) {
    if (g_.node(id).op != OpCode::kMatMul) continue;
    if (pv_) return Unimplemented("the attention template takes exactly two matmuls (Q·Kᵀ and P·V)");
    (qk_ ? pv_ : qk_) = &g_.node(id);
  }
  if (!pv_) return Unimplemented("the attention template needs the Q·Kᵀ and P·V matmuls");
  for (int out : group_.outputs)
    if (out != pv_->id && g_.node(out).op != OpCode::kAdd)
      return Unimplemented(fmt::format("{} inside the attention group is needed outside it; the template writes only P·V and "
                                       "the rows' logsumexp", Describe(g_.node(out))));
  if (!IsFloat(qk_->dtype) || !IsFloat(pv_->dtype))
    return Unimplemented(fmt::format("the attention template computes in floats, not {}", DTypeName(qk_->dtype)));
  a_.nq = qk_->shape[qk_->rank() - 2];
  a_.nk = qk_->shape.back();
  a_.d = g_.node(qk_->inputs[0]).shape.back();
  a_.dv = pv_->shape.back();
  if (a_.nk == 0 || NumElements(pv_->shape) == 0) return Unimplemented("empty attention (no keys or no output)");
  score_rows_ = NumElements(qk_->shape) / a_.nk;
  // A loop of one iteration is the constant 0, as the index simplifier would fold it:
  // comparing offsets structurally then needs no special case.
  row_ = score_rows_ == 1 ? IndexConst(0) : IndexVar(0, score_rows_);
  key_ = a_.nk == 1 ? IndexConst(0) : IndexVar(1, a_.nk);
  if (const std::vector<SymExpr>* sizes = Sizes(qk_->id)) {
    a_.symbols = symbolic_->values;
    a_.nq_size = sizes->at(sizes->size() - 2);
    a_.nk_size = sizes->back();
    a_.batch_sizes = *BatchSizes(Sizes(pv_->id));
    const std::vector<SymExpr> score_sizes = {symbolic_->Elements(qk_->id).DividedBy(a_.nk_size).value_or(SymExpr::Constant(score_rows_)),
                                              a_.nk_size};
    score_at_ = Ravel({row_, key_}, {score_rows_, a_.nk}, &score_sizes);
  } else {
    a_.nq_size = SymExpr::Constant(a_.nq);
    a_.nk_size = SymExpr::Constant(a_.nk);
    score_at_ = Ravel({row_, key_}, {score_rows_, a_.nk});
  }
  Place({qk_->id, pv_->id});
  return Status::Ok();
}

// `node` must be a trailing-axis `op` reduction of each score row, read through views
// (keepdims, broadcast) at its own row: checked by lowering the views and looking at
// where the one load lands. Returns the reduced value's node.
StatusOr<int> AttentionLowering::RowReductionInput(int node, OpCode op, int* reduction_node) {
  std::vector<int> views;
  int at = node;
  while (member_[at] && (g_.node(at).info().kind == OpKind::View || g_.node(at).info().kind == OpKind::Broadcast)) {
    views.push_back(at);
    at = g_.node(at).inputs[0];
  }
  const Node& reduction = g_.node(at);
  int64_t rows = 0, length = 0;
  if (!member_[at] || reduction.op != op || !TrailingReductionSpace(g_, reduction, &rows, &length) || rows != score_rows_ ||
      length != a_.nk)
    return Unimplemented(fmt::format("the softmax's {} is not a {} over each score row", Describe(g_.node(node)), OpName(op)));
  std::sort(views.begin(), views.end());
  ASSIGN_OR_RETURN(LoweredValue read, LowerValueAt(g_, views, inlined_, node, score_at_, score_rows_, a_.nk));
  const ScalarValue& v = read.kernel.values[read.value];
  if (v.kind != ScalarValue::Kind::kLoad || read.kernel.buffers[v.buffer].node != reduction.id || !SameIndex(v.index, row_))
    return Unimplemented(fmt::format("{} is read at another row than the one it reduces", Describe(reduction)));
  Place(views);
  Place({reduction.id});
  if (reduction_node) *reduction_node = reduction.id;
  return reduction.inputs[0];
}

// Walks up from `node` past the float casts and reshapes (of the scores' shape) inside the
// group, placing them; returns the first node that is neither.
int AttentionLowering::PeelLayoutKeeping(int node) {
  auto is_layout_keeping = [&](const Node& n) {
    bool float_cast = n.op == OpCode::kCast && IsFloat(n.dtype) && IsFloat(g_.node(n.inputs[0]).dtype);
    return n.shape == qk_->shape && (float_cast || n.op == OpCode::kReshape);
  };
  while (member_[node] && is_layout_keeping(g_.node(node))) {
    Place({node});
    node = g_.node(node).inputs[0];
  }
  return node;
}

// Whether `node` is 0 everywhere: a constant of zeros, possibly broadcast or viewed.
bool AttentionLowering::IsZero(int node) {
  std::vector<int> views;
  while (g_.node(node).info().kind == OpKind::View || g_.node(node).info().kind == OpKind::Broadcast) {
    views.push_back(node);
    node = g_.node(node).inputs[0];
  }
  const Node& n = g_.node(node);
  if (n.op != OpCode::kConstant || !n.attrs.value) return false;
  for (int64_t i = 0; i < n.attrs.value->num_elements(); ++i)
    if (n.attrs.value->GetDouble(i) != 0) return false;
  Place(views);
  return true;
}

// The safe softmax's guard at `where`: where(isnan(p), 0, p) or where(not isnan(p), p, 0),
// p under casts on either side. Returns p's node (casts peeled).
StatusOr<int> AttentionLowering::MatchNanGuard(int where) {
  const Node& w = g_.node(where);
  int condition = w.inputs[0], zero = w.inputs[1], kept = w.inputs[2];
  std::vector<int> guard = {where};
  if (member_[condition] && g_.node(condition).op == OpCode::kNot) {
    guard.push_back(condition);
    condition = g_.node(condition).inputs[0];
    std::swap(zero, kept);
  }
  const Node& is_nan = g_.node(condition);
  if (w.shape != qk_->shape || !member_[condition] || is_nan.op != OpCode::kIsNaN || !IsZero(zero))
    return Unimplemented(fmt::format("P·V reads {}, not the safe softmax's where(isnan(p), 0, p): the attention template allows only "
                                     "casts and that guard between the softmax and P·V", Describe(w)));
  guard.push_back(condition);
  const int probs = PeelLayoutKeeping(kept), tested = PeelLayoutKeeping(is_nan.inputs[0]);
  if (probs != tested)
    return Unimplemented(fmt::format("{} keeps {} where another value, {}, is NaN: not the safe softmax's where(isnan(p), 0, p)",
                                     Describe(w), Describe(g_.node(probs)), Describe(g_.node(tested))));
  Place(guard);
  return probs;
}

// probs = [casts, reshapes] [where(isnan(·), 0, ·) [casts]] (exp(logits − [row max]) ÷ row sum).
Status AttentionLowering::MatchSoftmax() {
  int probs = PeelLayoutKeeping(pv_->inputs[0]);
  if (member_[probs] && g_.node(probs).op == OpCode::kWhere) {
    ASSIGN_OR_RETURN(probs, MatchNanGuard(probs));
    a_.zero_nan_rows = true;
  }
  const Node& div = g_.node(probs);
  if (!member_[probs] || div.op != OpCode::kDiv)
    return Unimplemented(fmt::format("P·V reads {}, not a softmax's division by the row sum: the attention template "
                                     "allows only casts and the safe softmax's where(isnan(p), 0, p) between the softmax and P·V",
                                     Describe(div)));
  const Node& exp = g_.node(div.inputs[0]);
  if (!member_[exp.id] || exp.op != OpCode::kExp || exp.shape != qk_->shape)
    return Unimplemented(fmt::format("the softmax divides {}, not an exp of the scores", Describe(exp)));
  ASSIGN_OR_RETURN(int summed, RowReductionInput(div.inputs[1], OpCode::kReduceSum, &row_sum_));
  if (summed != exp.id) return Unimplemented("the softmax divides by the row sum of another value than its numerator");
  Place({div.id, exp.id});
  logit_node_ = exp.inputs[0];
  const Node& shifted = g_.node(logit_node_);
  if (member_[shifted.id] && shifted.op == OpCode::kSub) {
    // The usual max-subtraction: the online softmax's running max replaces it.
    int reduction = -1;
    StatusOr<int> maxed = RowReductionInput(shifted.inputs[1], OpCode::kReduceMax, &reduction);
    if (maxed.ok() && *maxed == shifted.inputs[0]) {
      Place({shifted.id});
      logit_node_ = shifted.inputs[0];
      row_max_ = reduction;
    }
  }
  if (g_.node(logit_node_).shape != qk_->shape)
    return Unimplemented(fmt::format("the logits {} do not have the scores' shape", Describe(g_.node(logit_node_))));
  return Status::Ok();
}

// The rows' logsumexp the matcher claimed (fusion/attention_matcher.cc's ClaimLogSumExp), an
// output of the group: add(row max, log(row sum)) of this softmax's own max and sum, one f32
// (or f64) value a score row. exp(logit − max) ÷ sum is the softmax, so max + log(sum) is
// log Σ exp(logit) whichever max the kernel subtracts: the online softmax's running one
// serves.
Status AttentionLowering::MatchLogSumExp() {
  for (int out : group_.outputs) {
    if (out == pv_->id) continue;
    const Node& add = g_.node(out);
    const int log = g_.node(add.inputs[0]).op == OpCode::kLog ? add.inputs[0] : add.inputs[1];
    const int max = log == add.inputs[0] ? add.inputs[1] : add.inputs[0];
    if (a_.logsumexp >= 0 || !member_[log] || g_.node(log).op != OpCode::kLog || g_.node(log).inputs[0] != row_sum_ || max != row_max_ ||
        row_max_ < 0)
      return Unimplemented(fmt::format("{} inside the attention group is needed outside it, and it is not the logsumexp of the "
                                       "softmax's rows (add(row max, log(row sum)) of the max it subtracts)",
                                       Describe(add)));
    if (add.dtype != DType::kF32 && add.dtype != DType::kF64)
      return Unimplemented(fmt::format("the rows' logsumexp {} is {}; the attention kernels write it in f32 or f64", Describe(add),
                                       DTypeName(add.dtype)));
    if (NumElements(add.shape) != score_rows_ || score_rows_ != a_.batch * a_.nq)
      return Unimplemented(fmt::format("{} is not one value a row of the output (the scores broadcast over a batch dim)", Describe(add)));
    Place({log, add.id});
    a_.buffers.push_back({add.id, add.dtype, score_rows_, true});
    a_.logsumexp = static_cast<int>(a_.buffers.size()) - 1;
  }
  return Status::Ok();
}

// The members `node` is computed from (itself included), not looking past the Q·Kᵀ
// product or non-members; they must be per-element ops the template can recompute.
StatusOr<std::vector<int>> AttentionLowering::ComputedAncestors(int node, const char* role) {
  std::vector<bool> seen(g_.num_nodes(), false);
  std::vector<int> stack = {node}, found;
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    if (seen[id] || !member_[id] || id == qk_->id) continue;
    seen[id] = true;
    const Node& n = g_.node(id);
    OpKind kind = n.info().kind;
    if (kind != OpKind::Pointwise && kind != OpKind::Broadcast && kind != OpKind::View)
      return Unimplemented(fmt::format("{} inside {}: the attention template computes them element by element", Describe(n), role));
    found.push_back(id);
    for (int input : n.inputs) stack.push_back(input);
  }
  std::sort(found.begin(), found.end());
  return found;
}

Status AttentionLowering::LowerLogits() {
  ASSIGN_OR_RETURN(std::vector<int> members, ComputedAncestors(logit_node_, "the logits"));
  ASSIGN_OR_RETURN(LoweredValue logits, LowerValueAt(g_, members, inlined_, logit_node_, score_at_, score_rows_, a_.nk, symbolic_));
  for (const ScalarValue& v : logits.kernel.values)
    if (v.kind == ScalarValue::Kind::kLoad && logits.kernel.buffers[v.buffer].node == qk_->id && !SameIndex(v.index, score_at_))
      return Unimplemented("the logits read Q·Kᵀ at another position than their own (a transposed or shifted score)");
  Place(members);
  a_.logits = std::move(logits.kernel);
  a_.logit = logits.value;
  RemapLoads(a_.logits);
  return Status::Ok();
}

Status AttentionLowering::LowerOperand(int node, const Shape& out_batch, bool may_read_in_place, AttentionOperand& operand) {
  const Node& n = g_.node(node);
  operand.node = node;
  operand.elements = NumElements(n.shape);
  operand.batch_index = BatchIndex(out_batch, BatchDims(n.shape), BatchSizes(Sizes(pv_->id)), BatchSizes(Sizes(node)));
  bool scalar_constant = n.op == OpCode::kConstant && operand.elements == 1;
  if (may_read_in_place && !member_[node] && !inlined_[node] && !scalar_constant && n.dtype == a_.compute) {
    operand.buffer = AddBuffer(node);
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(std::vector<int> members, ComputedAncestors(node, "a matmul operand"));
  ASSIGN_OR_RETURN(LoweredValue pack, LowerValueAt(g_, members, inlined_, node, IndexVar(0, operand.elements), operand.elements, 1, symbolic_));
  Place(members);
  operand.pack = std::move(pack.kernel);
  operand.pack_value = pack.value;
  RemapLoads(operand.pack);
  return Status::Ok();
}

StatusOr<AttentionKernel> AttentionLowering::Run() {
  RETURN_IF_ERROR(FindMatmuls());
  RETURN_IF_ERROR(MatchSoftmax());
  a_.name = fmt::format("tf_group{}_attention", group_.id);
  a_.nodes = group_.nodes;
  a_.score_dtype = qk_->dtype;
  for (int id : group_.nodes)
    if (g_.node(id).dtype == DType::kF64) a_.compute = DType::kF64;
  for (int operand : {qk_->inputs[0], qk_->inputs[1], pv_->inputs[1]})
    if (g_.node(operand).dtype == DType::kF64) a_.compute = DType::kF64;
  RETURN_IF_ERROR(LowerLogits());
  Shape out_batch = BatchDims(pv_->shape);
  a_.batch = NumElements(out_batch);
  a_.score_batch_index = BatchIndex(out_batch, BatchDims(qk_->shape), BatchSizes(Sizes(pv_->id)), BatchSizes(Sizes(qk_->id)));
  // Kᵀ and V are always packed: the emitter pads their rows to whole vectors.
  RETURN_IF_ERROR(LowerOperand(qk_->inputs[0], out_batch, true, a_.q));
  RETURN_IF_ERROR(LowerOperand(qk_->inputs[1], out_batch, false, a_.k));
  RETURN_IF_ERROR(LowerOperand(pv_->inputs[1], out_batch, false, a_.v));
  a_.buffers.push_back({pv_->id, pv_->dtype, NumElements(pv_->shape), true});
  a_.output = static_cast<int>(a_.buffers.size()) - 1;
  RETURN_IF_ERROR(MatchLogSumExp());
  for (int id : group_.nodes)
    if (!placed_[id])
      return Unimplemented(fmt::format("{} has no place in the attention template (matmul, logits, softmax, casts, matmul)",
                                       Describe(g_.node(id))));
  return std::move(a_);
}

}  // namespace

bool AttentionKernel::SizesAtLaunch() const {
  if (symbols.empty()) return false;
  SymExpr batch_size = SymExpr::Constant(1);
  for (const SymExpr& d : batch_sizes) batch_size = batch_size * d;
  const bool symbolic = !nq_size.IsConstant() || !nk_size.IsConstant() || !batch_size.IsConstant();
  return symbolic && nq_size.Is(nq, symbols) && nk_size.Is(nk, symbols) && batch_size.Is(batch, symbols);
}

StatusOr<AttentionKernel> LowerAttention(const Graph& graph, const FusionGroup& group, const std::vector<bool>& inlined,
                                         const SymbolicShapes* symbolic) {
  if (group.kind != GroupKind::kAttention) return Unimplemented("not an attention group");
  return AttentionLowering(graph, group, inlined, symbolic).Run();
}

}  // namespace tilefuse
