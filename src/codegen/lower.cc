#include "codegen/lower.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <optional>

namespace tilefuse {

namespace {

// Builds a Kernel by evaluating graph nodes at index expressions ("the value of node n
// at flat offset i of its own shape"), memoized so each (node, index) is computed once.
class Lowering {
 public:
  Lowering(const Graph& g, const FusionGroup& group, const std::vector<bool>& inlined, const LoweringFault& fault = {},
           const SymbolicShapes* symbolic = nullptr)
      : g_(g), group_(group), inlined_(inlined), fault_(fault), symbolic_(symbolic), member_(g.num_nodes(), false) {
    for (int id : group.nodes) member_[id] = true;
  }

  StatusOr<Kernel> Run();
  StatusOr<LoweredValue> RunValue(int node, const Index& at, int64_t outer, int64_t inner);
  // Outputs that are transposes or reshapes of a member over the whole loop are stored
  // through the view from where that member is computed (LowerEpilogue).
  void StoreViewsAtTheirSource() { views_at_source_ = true; }

 private:
  // Output `out`, a chain of transposes and reshapes (members) of a member or the group's input
  // `*source` with the loop's elements: the index in `out` of the source's element `at`; or
  // nullopt where `out` is no such view.
  std::optional<Index> ThroughView(int out, const Index& at, int* source) const;
  StatusOr<int> Evaluate(int node, const Index& flat);
  StatusOr<int> EvaluateMember(const Node& n, const Index& flat);
  StatusOr<std::optional<int>> OnePlusTanhAsSigmoid(const Node& n, const Index& flat);
  StatusOr<int> EvaluateView(const Node& n, const Index& flat);
  StatusOr<int> EvaluateGather(const Node& n, const Index& flat);
  StatusOr<int> EvaluateWindow(const Node& n, const Index& flat);
  StatusOr<int> EvaluateReduction(const Node& n, const Index& flat);
  int Load(int node, const Index& flat);
  int AddValue(ScalarValue v);
  int Constant(double value, DType dtype);
  int Op(OpCode op, std::vector<int> args, DType dtype);
  int BufferFor(int node, bool output);
  // Offset in the reduced tensor `x` of output element (var 0) and reduced element (var 1).
  Index ReducedInputIndex(const Node& reduction) const;
  // The node's dims in the model's symbols (nullptr without symbolic dims), and one of them.
  const std::vector<SymExpr>* Sizes(int node) const {
    return symbolic_ && !symbolic_->empty() ? &symbolic_->dims.at(static_cast<size_t>(node)) : nullptr;
  }
  SymExpr DimSize(int node, int64_t d) const {
    return Sizes(node) ? Sizes(node)->at(static_cast<size_t>(d)) : SymExpr::Constant(g_.node(node).shape.at(static_cast<size_t>(d)));
  }
  // `value` as an index constant, printed over the model's symbols where `size` is a size in
  // them that stands for it (a KV cache's past length), else as the number.
  Index SizeOrConst(int64_t value, const SymExpr& size) const {
    return symbolic_ && size.StandsFor(value, symbolic_->values) ? IndexSize(value, size) : IndexConst(value);
  }

  const Graph& g_;
  const FusionGroup& group_;
  const std::vector<bool>& inlined_;
  LoweringFault fault_;
  const SymbolicShapes* symbolic_;
  std::vector<bool> member_;
  Kernel k_;
  std::map<std::pair<int, std::string>, int> memo_;
  std::map<int, int> buffer_of_node_;
  std::vector<std::string> var_names_ = {"i0", "i1"};
  bool views_at_source_ = false;
};

// Whether `index` reads a value (a gather's index) that is computed per inner element.
bool ReadsInnerValue(const Index& index, const std::vector<ScalarValue>& values) {
  if (!index) return false;
  if (index->kind == IndexExpr::Kind::kValue && values[static_cast<size_t>(index->value)].inner) return true;
  return ReadsInnerValue(index->a, values) || ReadsInnerValue(index->b, values);
}

int Lowering::AddValue(ScalarValue v) {
  if (v.kind == ScalarValue::Kind::kOp)
    for (int arg : v.args) v.inner = v.inner || k_.values[arg].inner;
  else if (v.index)
    v.inner = UsesVar(v.index, 1) || ReadsInnerValue(v.index, k_.values);
  k_.values.push_back(std::move(v));
  return static_cast<int>(k_.values.size()) - 1;
}

int Lowering::Constant(double value, DType dtype) {
  ScalarValue v;
  v.kind = ScalarValue::Kind::kConstant;
  v.dtype = dtype;
  v.constant = value;
  return AddValue(std::move(v));
}

int Lowering::Op(OpCode op, std::vector<int> args, DType dtype) {
  ScalarValue v;
  v.kind = ScalarValue::Kind::kOp;
  v.op = op;
  v.args = std::move(args);
  v.dtype = dtype;
  return AddValue(std::move(v));
}

int Lowering::BufferFor(int node, bool output) {
  auto it = buffer_of_node_.find(node);
  if (it != buffer_of_node_.end()) {
    k_.buffers[it->second].is_output |= output;
    return it->second;
  }
  const Node& n = g_.node(node);
  k_.buffers.push_back({node, n.dtype, NumElements(n.shape), output});
  buffer_of_node_[node] = static_cast<int>(k_.buffers.size()) - 1;
  return buffer_of_node_[node];
}

int Lowering::Load(int node, const Index& flat) {
  ScalarValue v;
  v.kind = ScalarValue::Kind::kLoad;
  v.dtype = g_.node(node).dtype;
  v.buffer = BufferFor(node, false);
  v.index = flat;
  return AddValue(std::move(v));
}

StatusOr<int> Lowering::Evaluate(int node, const Index& flat) {
  auto key = std::make_pair(node, PrintIndex(flat, var_names_));
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  const Node& n = g_.node(node);
  int value;
  if (n.op == OpCode::kConstant && n.attrs.value->num_elements() == 1) {
    value = Constant(n.attrs.value->GetDouble(0), n.dtype);
  } else if (member_[node] || inlined_[node]) {
    ASSIGN_OR_RETURN(value, EvaluateMember(n, flat));
  } else {
    value = Load(node, flat);
  }
  memo_[key] = value;
  return value;
}

StatusOr<int> Lowering::EvaluateMember(const Node& n, const Index& flat) {
  switch (n.info().kind) {
    case OpKind::View: case OpKind::Broadcast: return EvaluateView(n, flat);
    case OpKind::Reduction: return EvaluateReduction(n, flat);
    case OpKind::Pointwise: break;
    default: return Unimplemented(fmt::format("{} cannot be lowered into a {} kernel", OpName(n.op), GroupKindName(group_.kind)));
  }
  ScalarValue v;
  v.dtype = n.dtype;
  if (n.op == OpCode::kIota) {
    v.kind = ScalarValue::Kind::kIndex;
    v.index = Unravel(flat, n.shape, Sizes(n.id))[n.attrs.axis];
    return AddValue(std::move(v));
  }
  if (n.op == OpCode::kRandomUniform) {
    v.kind = ScalarValue::Kind::kRandom;
    v.index = flat;
    v.seed = n.attrs.seed;
    return AddValue(std::move(v));
  }
  ASSIGN_OR_RETURN(std::optional<int> sigmoid, OnePlusTanhAsSigmoid(n, flat));
  if (sigmoid) return *sigmoid;
  std::vector<int> args;
  for (int input : n.inputs) {
    ASSIGN_OR_RETURN(int arg, Evaluate(input, flat));
    args.push_back(arg);
  }
  int result = Op(n.op, std::move(args), n.dtype);
  if (fault_.op == n.op && IsFloat(n.dtype))
    result = Op(OpCode::kMul, {result, Constant(1 + fault_.relative_error, n.dtype)}, n.dtype);
  return result;
}

// 1 + tanh(u) (GELU's tanh form) as 2 / (1 + exp(-2u)): the same function, since
// 1 + tanh(u) = 2 sigmoid(2u). tanh costs about twice exp on both targets (libmvec's
// tanhf took 68% of the CPU GELU kernel; this form ran it 1.6x faster), and the sum no
// longer cancels where tanh(u) nears -1. Only where this add is the tanh's one user and
// the tanh is not a kernel output: otherwise tanh is computed anyway. Half types keep
// tanh: the GPU computes it with the SFU's tanh.approx, one instruction, and the exp form
// measured slower there (GELU bf16 on the H200: 74 -> 91 us).
StatusOr<std::optional<int>> Lowering::OnePlusTanhAsSigmoid(const Node& n, const Index& flat) {
  bool half = IsHalf(n.dtype);
  if (n.op != OpCode::kAdd || !IsFloat(n.dtype) || half || n.inputs.size() != 2) return std::optional<int>();
  // A member read outside the group is one of its outputs, so the members are all the
  // users to count (the whole graph's user lists would cost O(nodes) per group).
  auto member_users = [&](int id) {
    return std::count_if(group_.nodes.begin(), group_.nodes.end(), [&](int m) {
      const std::vector<int>& in = g_.node(m).inputs;
      return std::find(in.begin(), in.end(), id) != in.end();
    });
  };
  for (int side = 0; side < 2; ++side) {
    const Node& tanh = g_.node(n.inputs[1 - side]);
    bool lone_tanh = tanh.op == OpCode::kTanh && member_[tanh.id] && member_users(tanh.id) == 1 &&
                     tanh.shape == n.shape && tanh.dtype == n.dtype &&
                     std::find(group_.outputs.begin(), group_.outputs.end(), tanh.id) == group_.outputs.end();
    if (!lone_tanh) continue;
    // The 1 is usually a broadcast scalar constant: ask what it lowers to.
    ASSIGN_OR_RETURN(int one, Evaluate(n.inputs[side], flat));
    if (k_.values[one].kind != ScalarValue::Kind::kConstant || k_.values[one].constant != 1.0) continue;
    ASSIGN_OR_RETURN(int u, Evaluate(tanh.inputs[0], flat));
    int exp = Op(OpCode::kExp, {Op(OpCode::kMul, {u, Constant(-2, n.dtype)}, n.dtype)}, n.dtype);
    return std::optional<int>(Op(OpCode::kDiv, {Constant(2, n.dtype), Op(OpCode::kAdd, {one, exp}, n.dtype)}, n.dtype));
  }
  return std::optional<int>();
}

StatusOr<int> Lowering::EvaluateView(const Node& n, const Index& flat) {
  const Node& in = g_.node(n.inputs[0]);
  std::vector<Index> out = Unravel(flat, n.shape, Sizes(n.id));
  std::vector<Index> src(in.shape.size());
  switch (n.op) {
    case OpCode::kReshape: return Evaluate(in.id, flat);
    case OpCode::kBroadcast: {
      size_t offset = n.shape.size() - in.shape.size();
      for (size_t d = 0; d < in.shape.size(); ++d) src[d] = in.shape[d] == 1 ? IndexConst(0) : out[d + offset];
      break;
    }
    case OpCode::kTranspose:
      for (size_t d = 0; d < out.size(); ++d) src[n.attrs.perm[d]] = out[d];
      break;
    case OpCode::kSlice:
      for (size_t d = 0; d < out.size(); ++d) {
        // A slice to the end whose start is a size in the model's symbols (a KV cache's
        // newest positions after the past ones: start = past) reads at that size, printed
        // over them; other starts are constants.
        const int64_t start = n.attrs.starts[d];
        const bool to_the_end = n.attrs.steps[d] == 1 && start + n.shape[d] == in.shape[d];
        src[d] = IndexAdd(IndexMul(out[d], n.attrs.steps[d]),
                          to_the_end ? SizeOrConst(start, DimSize(in.id, d) - DimSize(n.id, d)) : IndexConst(start));
      }
      break;
    case OpCode::kConcat: {
      // Every input is loaded at a clamped (always valid) offset; the axis position
      // selects which one counts.
      int64_t axis = n.attrs.axis, offset = 0;
      SymExpr offset_size;  // the offset in the model's symbols (a KV cache's past length)
      int result = -1;
      for (int input : n.inputs) {
        const Node& part = g_.node(input);
        const SymExpr part_size = DimSize(input, axis);
        std::vector<Index> at = out;
        at[axis] = IndexClamp(IndexAdd(out[axis], IndexSize(-offset, SymExpr() - offset_size)), 0,
                              IndexSize(part.shape[axis] - 1, part_size - SymExpr::Constant(1)));
        ASSIGN_OR_RETURN(int v, Evaluate(input, Ravel(at, part.shape, Sizes(input))));
        offset += part.shape[axis];
        offset_size = offset_size + part_size;
        if (result < 0) {
          result = v;
          continue;
        }
        ScalarValue position;
        position.kind = ScalarValue::Kind::kIndex;
        position.dtype = DType::kI64;
        position.index = out[axis];
        int pos = AddValue(std::move(position));
        // The part's start: a constant, or where it is a size in the model's symbols (a KV
        // cache's past length) an index value printed over them.
        const int64_t start = offset - part.shape[axis];
        const Index start_index = SizeOrConst(start, offset_size - part_size);
        int boundary = Constant(static_cast<double>(start), DType::kI64);
        if (!start_index->size.IsConstant()) {
          ScalarValue at;
          at.kind = ScalarValue::Kind::kIndex;
          at.dtype = DType::kI64;
          at.index = start_index;
          boundary = AddValue(std::move(at));
        }
        int before = Op(OpCode::kLess, {pos, boundary}, DType::kBool);
        result = Op(OpCode::kWhere, {before, result, v}, n.dtype);
      }
      return result;
    }
    case OpCode::kWindow: return EvaluateWindow(n, flat);
    default: return EvaluateGather(n, flat);
  }
  return Evaluate(in.id, Ravel(src, in.shape, Sizes(in.id)));
}

// im2col as index arithmetic: the input is read at a clamped (always valid) position and
// the fill selected where the window reaches outside it; where the index bounds prove a
// spatial dim always inside (no padding on that side), it costs no compare.
StatusOr<int> Lowering::EvaluateWindow(const Node& n, const Index& flat) {
  const Node& x = g_.node(n.inputs[0]);
  const Attrs& a = n.attrs;
  const int spatial = static_cast<int>(a.kernel.size());
  std::vector<Index> out = Unravel(flat, n.shape);
  std::vector<Index> src = {out[0], out[1]};
  int inside = -1;  // a bool value: every checked position inside x
  for (int d = 0; d < spatial; ++d) {
    const int64_t extent = x.shape[2 + d];
    Index position = IndexAdd(IndexAdd(IndexMul(out[2 + d], a.strides[d]), IndexMul(out[2 + spatial + d], a.dilations[d])),
                              IndexConst(-a.pads[d]));
    if (position->min >= 0 && position->max < extent) {
      src.push_back(position);
      continue;
    }
    src.push_back(IndexClamp(position, 0, extent - 1));
    ScalarValue at;
    at.kind = ScalarValue::Kind::kIndex;
    at.dtype = DType::kI64;
    at.index = position;
    int p = AddValue(std::move(at));
    int check = Op(OpCode::kAnd,
                   {Op(OpCode::kGreaterEqual, {p, Constant(0, DType::kI64)}, DType::kBool),
                    Op(OpCode::kLess, {p, Constant(static_cast<double>(extent), DType::kI64)}, DType::kBool)},
                   DType::kBool);
    inside = inside < 0 ? check : Op(OpCode::kAnd, {inside, check}, DType::kBool);
  }
  ASSIGN_OR_RETURN(int value, Evaluate(x.id, Ravel(src, x.shape)));
  if (inside < 0) return value;
  ASSIGN_OR_RETURN(int fill, Evaluate(n.inputs[1], IndexConst(0)));
  return Op(OpCode::kWhere, {inside, value, fill}, n.dtype);
}

StatusOr<int> Lowering::EvaluateGather(const Node& n, const Index& flat) {
  const Node& data = g_.node(n.inputs[0]);
  const Node& indices = g_.node(n.inputs[1]);
  int64_t axis = n.attrs.axis, dim = data.shape[axis];
  std::vector<Index> out = Unravel(flat, n.shape, Sizes(n.id));
  Index index_flat;
  if (n.op == OpCode::kGather) {
    std::vector<Index> at(out.begin() + axis, out.begin() + axis + indices.rank());
    index_flat = Ravel(at, indices.shape, Sizes(indices.id));
  } else {
    index_flat = flat;
  }
  ASSIGN_OR_RETURN(int raw, Evaluate(indices.id, index_flat));
  int as_i64 = Op(OpCode::kCast, {raw}, DType::kI64);
  int negative = Op(OpCode::kLess, {as_i64, Constant(0, DType::kI64)}, DType::kBool);
  // The dim's size as an index value: printed in the model's symbols where it is one (a
  // flattened [batch · sequence] mask), so the kernel's text does not hold the binding's value.
  ScalarValue size;
  size.kind = ScalarValue::Kind::kIndex;
  size.dtype = DType::kI64;
  size.index = IndexSize(dim, DimSize(data.id, axis));
  const int dim_value = size.index->size.IsConstant() ? Constant(double(dim), DType::kI64) : AddValue(std::move(size));
  int wrapped = Op(OpCode::kWhere, {negative, Op(OpCode::kAdd, {as_i64, dim_value}, DType::kI64), as_i64}, DType::kI64);
  Index position = IndexClamp(IndexValue(wrapped, -dim, dim * 2), 0, IndexSize(dim - 1, DimSize(data.id, axis) - SymExpr::Constant(1)));
  std::vector<Index> src;
  if (n.op == OpCode::kGather) {
    src.assign(out.begin(), out.begin() + axis);
    src.push_back(position);
    src.insert(src.end(), out.begin() + axis + indices.rank(), out.end());
  } else {
    src = out;
    src[axis] = position;
  }
  return Evaluate(data.id, Ravel(src, data.shape, Sizes(data.id)));
}

Index Lowering::ReducedInputIndex(const Node& r) const {
  const Shape& in = g_.node(r.inputs[0]).shape;
  Shape kept, reduced;
  std::vector<SymExpr> kept_sizes, reduced_sizes;
  for (int d = 0; d < static_cast<int>(in.size()); ++d) {
    const bool is_reduced = std::find(r.attrs.axes.begin(), r.attrs.axes.end(), d) != r.attrs.axes.end();
    (is_reduced ? reduced : kept).push_back(in[d]);
    (is_reduced ? reduced_sizes : kept_sizes).push_back(DimSize(r.inputs[0], d));
  }
  const bool sized = Sizes(r.inputs[0]) != nullptr;
  std::vector<Index> o = Unravel(IndexVar(0, k_.outer), kept, sized ? &kept_sizes : nullptr),
                     j = Unravel(IndexVar(1, k_.inner), reduced, sized ? &reduced_sizes : nullptr);
  std::vector<Index> multi;
  size_t next_kept = 0, next_reduced = 0;
  for (int d = 0; d < static_cast<int>(in.size()); ++d)
    multi.push_back(std::find(r.attrs.axes.begin(), r.attrs.axes.end(), d) != r.attrs.axes.end() ? j[next_reduced++] : o[next_kept++]);
  return Ravel(multi, in, Sizes(r.inputs[0]));
}

StatusOr<int> Lowering::EvaluateReduction(const Node& n, const Index& flat) {
  if (!SameIndex(flat, IndexVar(0, k_.outer)) && !(k_.outer == 1 && flat->kind == IndexExpr::Kind::kConst))
    return Unimplemented(fmt::format("{} %{} is needed at an offset other than its own output's", OpName(n.op), n.id));
  const Node& in = g_.node(n.inputs[0]);
  if (NumElements(n.shape) != k_.outer || NumElements(in.shape) != k_.outer * k_.inner)
    return Unimplemented(fmt::format("{} %{} does not match the kernel's {} x {} loops", OpName(n.op), n.id, k_.outer, k_.inner));
  ASSIGN_OR_RETURN(int body, Evaluate(in.id, ReducedInputIndex(n)));
  k_.reductions.push_back({n.op, body, k_.inner, n.dtype});
  ScalarValue v;
  v.kind = ScalarValue::Kind::kAccumulator;
  v.dtype = n.dtype;
  v.reduction = static_cast<int>(k_.reductions.size()) - 1;
  return AddValue(std::move(v));
}

StatusOr<Kernel> Lowering::Run() {
  if (group_.kind != GroupKind::kPointwise && group_.kind != GroupKind::kRowReduction && group_.kind != GroupKind::kReduction)
    return Unimplemented(fmt::format("{} groups are not lowered to loop kernels", GroupKindName(group_.kind)));
  // The kernels' 8-bit float conversions saturate (tf_cast_f8e4m3, ...), as ONNX's Cast does
  // by default; a cast that does not stays with the reference.
  for (int id : group_.nodes)
    if (const Node& n = g_.node(id); n.op == OpCode::kCast && IsFloat8(n.attrs.to) && !n.attrs.saturate)
      return Unimplemented(fmt::format("cast %{} to {} does not saturate: generated kernels' conversions do", id, DTypeName(n.attrs.to)));
  k_.kind = group_.kind;
  k_.nodes = group_.nodes;
  k_.name = fmt::format("tf_group{}_{}", group_.id, GroupKindName(group_.kind));
  const Node* first_reduction = nullptr;
  for (int id : group_.nodes)
    if (g_.node(id).info().kind == OpKind::Reduction && !first_reduction) first_reduction = &g_.node(id);
  if (first_reduction) {
    k_.outer = NumElements(first_reduction->shape);
    k_.inner = k_.outer ? NumElements(g_.node(first_reduction->inputs[0]).shape) / std::max<int64_t>(1, k_.outer) : 0;
  } else {
    k_.outer = NumElements(g_.node(group_.nodes.back()).shape);
  }
  if (symbolic_ && !symbolic_->empty()) {
    k_.symbols = symbolic_->values;
    k_.outer_size = symbolic_->Elements(first_reduction ? first_reduction->id : group_.nodes.back());
    k_.inner_size = SymExpr::Constant(k_.inner);
    if (first_reduction)
      if (std::optional<SymExpr> inner = symbolic_->Elements(first_reduction->inputs[0]).DividedBy(k_.outer_size)) k_.inner_size = *inner;
  }
  Index element = first_reduction ? ReducedInputIndex(*first_reduction) : IndexVar(0, k_.outer);
  for (int out : group_.outputs) {
    int64_t elements = NumElements(g_.node(out).shape);
    Index home = elements == k_.outer ? IndexVar(0, k_.outer) : element;
    if (elements != k_.outer && elements != k_.outer * k_.inner)
      return Unimplemented(fmt::format("output %{} has {} elements; the kernel loops over {} x {}", out, elements, k_.outer, k_.inner));
    if (k_.outer == 1 && elements == 1) home = IndexConst(0);
    int source = -1;
    std::optional<Index> viewed = views_at_source_ && !first_reduction ? ThroughView(out, home, &source) : std::nullopt;
    ASSIGN_OR_RETURN(int value, Evaluate(viewed ? source : out, home));
    k_.stores.push_back({BufferFor(out, true), value, viewed ? *viewed : home});
  }
  return std::move(k_);
}

std::optional<Index> Lowering::ThroughView(int out, const Index& at, int* source) const {
  std::vector<int> chain;  // from `out` back to the source
  int id = out;
  while (member_[id] && (g_.node(id).op == OpCode::kTranspose || g_.node(id).op == OpCode::kReshape)) {
    chain.push_back(id);
    id = g_.node(id).inputs[0];
  }
  if (chain.empty() || NumElements(g_.node(id).shape) != k_.outer) return std::nullopt;
  if (std::none_of(chain.begin(), chain.end(), [&](int v) { return g_.node(v).op == OpCode::kTranspose; })) return std::nullopt;
  *source = id;
  Index index = at;
  for (auto v = chain.rbegin(); v != chain.rend(); ++v) {
    const Node& view = g_.node(*v);
    if (view.op != OpCode::kTranspose) continue;  // a reshape keeps every element's offset
    const std::vector<Index> in = Unravel(index, g_.node(view.inputs[0]).shape, Sizes(view.inputs[0]));
    std::vector<Index> moved(in.size());
    for (size_t d = 0; d < in.size(); ++d) moved[d] = in[view.attrs.perm[d]];
    index = Ravel(moved, view.shape, Sizes(view.id));
  }
  return index;
}

StatusOr<LoweredValue> Lowering::RunValue(int node, const Index& at, int64_t outer, int64_t inner) {
  k_.kind = GroupKind::kPointwise;
  k_.nodes = group_.nodes;
  k_.outer = outer;
  k_.inner = inner;
  if (symbolic_ && !symbolic_->empty()) k_.symbols = symbolic_->values;
  ASSIGN_OR_RETURN(int value, Evaluate(node, at));
  return LoweredValue{std::move(k_), value};
}

}  // namespace

StatusOr<Kernel> LowerEpilogue(const Graph& graph, const FusionGroup& group, const std::vector<bool>& inlined) {
  Lowering lowering(graph, group, inlined);
  lowering.StoreViewsAtTheirSource();
  return lowering.Run();
}

StatusOr<LoweredValue> LowerValueAt(const Graph& graph, const std::vector<int>& members, const std::vector<bool>& inlined,
                                    int node, const Index& at, int64_t outer, int64_t inner, const SymbolicShapes* symbolic) {
  FusionGroup group;
  group.kind = GroupKind::kPointwise;
  group.nodes = members;
  return Lowering(graph, group, inlined, {}, symbolic).RunValue(node, at, outer, inner);
}

StatusOr<Kernel> LowerGroup(const Graph& graph, const FusionGroup& group, const std::vector<bool>& inlined,
                            const LoweringFault& fault, const SymbolicShapes* symbolic) {
  return Lowering(graph, group, inlined, fault, symbolic).Run();
}


int KernelBufferFor(Kernel& k, const Graph& g, int node) {
  for (size_t b = 0; b < k.buffers.size(); ++b)
    if (k.buffers[b].node == node) return static_cast<int>(b);
  const Node& n = g.node(node);
  k.buffers.push_back({node, n.dtype, NumElements(n.shape), false});
  return static_cast<int>(k.buffers.size()) - 1;
}

void StoreAnchorItself(Kernel& k, const Graph& g, int node) {
  const Node& n = g.node(node);
  const int64_t elements = NumElements(n.shape);
  const int buffer = KernelBufferFor(k, g, node);
  k.buffers[buffer].is_output = true;
  ScalarValue load;
  load.kind = ScalarValue::Kind::kLoad;
  load.dtype = n.dtype;
  load.buffer = buffer;
  load.index = IndexVar(0, elements);
  k.values.push_back(load);
  k.stores.push_back({buffer, static_cast<int>(k.values.size()) - 1, IndexVar(0, elements)});
}

}  // namespace tilefuse
