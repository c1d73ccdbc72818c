#include "tilefuse/builder.h"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/shape_inference.h"
#include "support/check.h"
#include "ir/verifier.h"

namespace tilefuse {

void GraphBuilder::SetLocation(std::string error_context, std::string node_name) {
  error_context_ = std::move(error_context);
  node_name_ = std::move(node_name);
}

void GraphBuilder::Fail(Status status) {
  if (!status_.ok() || status.ok()) return;
  status_ = error_context_.empty() ? status : status.WithContext(error_context_);
}

bool GraphBuilder::CheckValues(const std::vector<Value>& values) {
  if (!status_.ok()) return false;
  for (Value v : values) {
    if (!v.valid() || v.id >= graph_.num_nodes()) {
      Fail(InvalidArgument("missing or undefined input value"));
      return false;
    }
  }
  return true;
}

int64_t GraphBuilder::NormalizeAxis(int64_t axis, int rank) {
  int64_t normalized = axis < 0 ? axis + rank : axis;
  if (normalized < 0 || normalized >= std::max(rank, 1)) {
    Fail(InvalidArgument(fmt::format("axis {} out of range for rank {}", axis, rank)));
    return 0;
  }
  return normalized;
}

Value GraphBuilder::AddNode(OpCode op, std::vector<Value> inputs, Attrs attrs) {
  if (!CheckValues(inputs)) return {};
  Node node;
  node.op = op;
  for (Value v : inputs) node.inputs.push_back(v.id);
  node.attrs = std::move(attrs);
  node.name = node_name_;
  Status status = InferNodeType(graph_, node);
  if (!status.ok()) {
    Fail(status);
    return {};
  }
  return {graph_.AddNode(std::move(node))};
}

// ---- sources

Value GraphBuilder::Parameter(std::string name, DType dtype, Shape shape) {
  Attrs attrs;
  attrs.shape = std::move(shape);
  attrs.to = dtype;
  std::string saved = node_name_;
  node_name_ = std::move(name);
  Value v = AddNode(OpCode::kParameter, {}, std::move(attrs));
  node_name_ = std::move(saved);
  return v;
}

Value GraphBuilder::Constant(Tensor value) { return Constant(std::make_shared<const Tensor>(std::move(value))); }

Value GraphBuilder::Constant(std::shared_ptr<const Tensor> value) {
  Attrs attrs;
  attrs.value = std::move(value);
  return AddNode(OpCode::kConstant, {}, std::move(attrs));
}

Value GraphBuilder::Scalar(double value, DType dtype) { return Constant(Tensor::FromDoubles(dtype, {}, {value})); }

Value GraphBuilder::Iota(Shape shape, int64_t axis, DType dtype) {
  Attrs attrs;
  attrs.shape = std::move(shape);
  attrs.axis = axis;
  attrs.to = dtype;
  return AddNode(OpCode::kIota, {}, std::move(attrs));
}

Value GraphBuilder::RandomUniform(Shape shape, DType dtype, uint64_t seed) {
  Attrs attrs;
  attrs.shape = std::move(shape);
  attrs.to = dtype;
  attrs.seed = seed;
  return AddNode(OpCode::kRandomUniform, {}, std::move(attrs));
}

// ---- pointwise

Shape GraphBuilder::BroadcastShapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1) {
      Fail(InvalidArgument(fmt::format("shapes {} and {} do not broadcast", ShapeToString(a), ShapeToString(b))));
      return {};
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Value GraphBuilder::Unary(OpCode op, Value x) { return AddNode(op, {x}, {}); }

Value GraphBuilder::Binary(OpCode op, Value a, Value b) {
  if (!CheckValues({a, b})) return {};
  Shape shape = BroadcastShapes(this->shape(a), this->shape(b));
  if (!ok()) return {};
  return AddNode(op, {BroadcastTo(a, shape), BroadcastTo(b, shape)}, {});
}

Value GraphBuilder::Where(Value cond, Value x, Value y) {
  if (!CheckValues({cond, x, y})) return {};
  Shape shape = BroadcastShapes(BroadcastShapes(this->shape(cond), this->shape(x)), this->shape(y));
  if (!ok()) return {};
  return AddNode(OpCode::kWhere, {BroadcastTo(cond, shape), BroadcastTo(x, shape), BroadcastTo(y, shape)}, {});
}

Value GraphBuilder::Cast(Value x, DType to) { return Cast(x, to, /*saturate=*/true); }

Value GraphBuilder::Cast(Value x, DType to, bool saturate) {
  if (!CheckValues({x})) return {};
  if (dtype(x) == to) return x;
  Attrs attrs;
  attrs.to = to;
  attrs.saturate = saturate;
  return AddNode(OpCode::kCast, {x}, std::move(attrs));
}

// ---- broadcast and views

Value GraphBuilder::BroadcastTo(Value x, Shape shape) {
  if (!CheckValues({x})) return {};
  if (this->shape(x) == shape) return x;
  Attrs attrs;
  attrs.shape = std::move(shape);
  return AddNode(OpCode::kBroadcast, {x}, std::move(attrs));
}

Value GraphBuilder::Reshape(Value x, Shape shape) {
  if (!CheckValues({x})) return {};
  if (this->shape(x) == shape) return x;
  Attrs attrs;
  attrs.shape = std::move(shape);
  return AddNode(OpCode::kReshape, {x}, std::move(attrs));
}

Value GraphBuilder::Transpose(Value x, std::vector<int64_t> perm) {
  if (!CheckValues({x})) return {};
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
  if (identity && static_cast<int>(perm.size()) == rank(x)) return x;
  Attrs attrs;
  attrs.perm = std::move(perm);
  return AddNode(OpCode::kTranspose, {x}, std::move(attrs));
}

Value GraphBuilder::Slice(Value x, std::vector<int64_t> starts, std::vector<int64_t> ends,
                          std::vector<int64_t> axes, std::vector<int64_t> steps) {
  if (!CheckValues({x})) return {};
  int r = rank(x);
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    Fail(InvalidArgument("slice starts, ends, axes and steps differ in length"));
    return {};
  }
  Attrs attrs;
  attrs.shape = shape(x);
  attrs.starts.assign(r, 0);
  attrs.steps.assign(r, 1);
  std::vector<bool> seen(r, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = NormalizeAxis(axes[i], r);
    if (!ok()) return {};
    if (seen[axis] || steps[i] == 0) {
      Fail(InvalidArgument(fmt::format("slice axis {} repeated or with step 0", axes[i])));
      return {};
    }
    seen[axis] = true;
    int64_t dim = shape(x)[axis], step = steps[i];
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t end = ends[i] < 0 ? ends[i] + dim : ends[i];
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
    }
    int64_t size = step > 0 ? (end - start + step - 1) / step : (start - end + (-step) - 1) / (-step);
    size = std::max<int64_t>(size, 0);
    attrs.starts[axis] = size > 0 ? start : 0;
    attrs.steps[axis] = step;
    attrs.shape[axis] = size;
  }
  if (attrs.shape == shape(x) && std::all_of(attrs.steps.begin(), attrs.steps.end(), [](int64_t s) { return s == 1; }))
    return x;
  return AddNode(OpCode::kSlice, {x}, std::move(attrs));
}

Value GraphBuilder::Squeeze(Value x, std::vector<int64_t> axes) {
  if (!CheckValues({x})) return {};
  const Shape& in = shape(x);
  std::vector<bool> drop(in.size(), false);
  if (axes.empty()) {
    for (size_t d = 0; d < in.size(); ++d) drop[d] = in[d] == 1;
  }
  for (int64_t axis : axes) {
    int64_t a = NormalizeAxis(axis, rank(x));
    if (!ok()) return {};
    if (in[a] != 1) {
      Fail(InvalidArgument(fmt::format("cannot squeeze dim {} of size {}", axis, in[a])));
      return {};
    }
    drop[a] = true;
  }
  Shape out;
  for (size_t d = 0; d < in.size(); ++d)
    if (!drop[d]) out.push_back(in[d]);
  return Reshape(x, out);
}

Value GraphBuilder::Unsqueeze(Value x, std::vector<int64_t> axes) {
  if (!CheckValues({x})) return {};
  int out_rank = rank(x) + static_cast<int>(axes.size());
  std::vector<bool> added(out_rank, false);
  for (int64_t axis : axes) {
    int64_t a = NormalizeAxis(axis, out_rank);
    if (!ok()) return {};
    if (added[a]) {
      Fail(InvalidArgument(fmt::format("unsqueeze axis {} repeated", axis)));
      return {};
    }
    added[a] = true;
  }
  Shape out;
  size_t next = 0;
  for (int d = 0; d < out_rank; ++d) out.push_back(added[d] ? 1 : shape(x)[next++]);
  return Reshape(x, out);
}

Value GraphBuilder::Concat(const std::vector<Value>& xs, int64_t axis) {
  if (!CheckValues(xs)) return {};
  if (xs.empty()) {
    Fail(InvalidArgument("concat of nothing"));
    return {};
  }
  if (xs.size() == 1) return xs[0];
  Attrs attrs;
  attrs.axis = NormalizeAxis(axis, rank(xs[0]));
  return AddNode(OpCode::kConcat, xs, std::move(attrs));
}

std::vector<Value> GraphBuilder::Split(Value x, int64_t axis, const std::vector<int64_t>& sizes) {
  if (!CheckValues({x})) return {};
  int64_t a = NormalizeAxis(axis, rank(x));
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (ok() && (total != shape(x)[a] || std::any_of(sizes.begin(), sizes.end(), [](int64_t s) { return s < 0; })))
    Fail(InvalidArgument(fmt::format("split sizes {} do not add up to dim {} of size {}", sizes, axis, shape(x)[a])));
  if (!ok()) return {};
  std::vector<Value> parts;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    parts.push_back(Slice(x, {offset}, {offset + s}, {a}, {1}));
    offset += s;
  }
  return parts;
}

Value GraphBuilder::Gather(Value data, Value indices, int64_t axis) {
  if (!CheckValues({data, indices})) return {};
  Attrs attrs;
  attrs.axis = NormalizeAxis(axis, rank(data));
  return AddNode(OpCode::kGather, {data, indices}, std::move(attrs));
}

Value GraphBuilder::GatherElements(Value data, Value indices, int64_t axis) {
  if (!CheckValues({data, indices})) return {};
  Attrs attrs;
  attrs.axis = NormalizeAxis(axis, rank(data));
  return AddNode(OpCode::kGatherElements, {data, indices}, std::move(attrs));
}

namespace {
Attrs WindowAttrs(const PoolParams& p) {
  Attrs attrs;
  attrs.kernel = p.kernel;
  attrs.strides = p.strides;
  attrs.pads = p.pads;
  attrs.dilations = p.dilations;
  attrs.group = p.group;
  attrs.count_include_pad = p.count_include_pad;
  attrs.tf32 = p.tf32;
  return attrs;
}
}  // namespace

Value GraphBuilder::Window(Value x, Value fill, const PoolParams& p) {
  if (!CheckValues({x, fill})) return {};
  Attrs attrs = WindowAttrs(p);
  attrs.group = 1;
  attrs.count_include_pad = false;
  attrs.tf32 = false;
  return AddNode(OpCode::kWindow, {x, fill}, std::move(attrs));
}

// ---- reductions and contraction

Value GraphBuilder::Reduce(OpCode op, Value x, std::vector<int64_t> axes, bool keepdims) {
  if (!CheckValues({x})) return {};
  if (axes.empty())
    for (int d = 0; d < rank(x); ++d) axes.push_back(d);
  for (int64_t& a : axes) a = NormalizeAxis(a, rank(x));
  if (!ok()) return {};
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) {
    Fail(InvalidArgument("reduction axes repeated"));
    return {};
  }
  Attrs attrs;
  attrs.axes = std::move(axes);
  attrs.keepdims = keepdims;
  return AddNode(op, {x}, std::move(attrs));
}

Value GraphBuilder::MatMul(Value a, Value b, bool tf32) {
  if (!CheckValues({a, b})) return {};
  if (rank(a) == 0 || rank(b) == 0) {
    Fail(InvalidArgument("matmul of a scalar"));
    return {};
  }
  bool vector_a = rank(a) == 1, vector_b = rank(b) == 1;
  Value a2 = vector_a ? Reshape(a, {1, shape(a)[0]}) : a;
  Value b2 = vector_b ? Reshape(b, {shape(b)[0], 1}) : b;
  Attrs attrs;
  attrs.tf32 = tf32;
  Value product = AddNode(OpCode::kMatMul, {a2, b2}, std::move(attrs));
  if (!ok() || (!vector_a && !vector_b)) return product;
  Shape out = shape(product);
  if (vector_b) out.erase(out.end() - 1);
  if (vector_a) out.erase(out.end() - (vector_b ? 1 : 2));
  return Reshape(product, out);
}

// ---- opaque

Value GraphBuilder::Conv(Value x, Value w, Value bias, const PoolParams& p) {
  std::vector<Value> inputs = {x, w};
  if (bias.valid()) inputs.push_back(bias);
  return AddNode(OpCode::kConv, inputs, WindowAttrs(p));
}

Value GraphBuilder::MaxPool(Value x, const PoolParams& p) { return AddNode(OpCode::kMaxPool, {x}, WindowAttrs(p)); }

Value GraphBuilder::AveragePool(Value x, const PoolParams& p) {
  return AddNode(OpCode::kAveragePool, {x}, WindowAttrs(p));
}

Value GraphBuilder::AttentionGrad(OpCode op, Value dout, Value q, Value k, Value v, Value out, Value logsumexp, double scale,
                                  bool causal) {
  TF_CHECK(IsAttentionGrad(op));
  Attrs attrs;
  attrs.scale = scale;
  attrs.causal = causal;
  return AddNode(op, {dout, q, k, v, out, logsumexp}, std::move(attrs));
}

// ---- composites

Value GraphBuilder::Softmax(Value x, int64_t axis) {
  if (!CheckValues({x})) return {};
  Attrs attrs;
  attrs.axis = NormalizeAxis(axis, rank(x));
  return AddNode(OpCode::kSoftmax, {x}, std::move(attrs));
}

Value GraphBuilder::LogSoftmax(Value x, int64_t axis) {
  if (!CheckValues({x})) return {};
  Attrs attrs;
  attrs.axis = NormalizeAxis(axis, rank(x));
  return AddNode(OpCode::kLogSoftmax, {x}, std::move(attrs));
}

Value GraphBuilder::LayerNorm(Value x, Value scale, Value bias, int64_t axis, double epsilon) {
  if (!CheckValues({x, scale})) return {};
  Attrs attrs;
  attrs.axis = NormalizeAxis(axis, rank(x));
  attrs.epsilon = epsilon;
  std::vector<Value> inputs = {x, scale};
  if (bias.valid()) inputs.push_back(bias);
  return AddNode(OpCode::kLayerNorm, inputs, std::move(attrs));
}

Value GraphBuilder::Gelu(Value x, bool approximate_tanh) {
  Attrs attrs;
  attrs.approximate_tanh = approximate_tanh;
  return AddNode(OpCode::kGelu, {x}, std::move(attrs));
}

// ---- outputs

void GraphBuilder::Output(Value v, std::string name) {
  if (!CheckValues({v})) return;
  graph_.AddOutput(v.id, std::move(name));
}

StatusOr<Graph> GraphBuilder::Build() {
  RETURN_IF_ERROR(status_);
  Graph graph = std::move(graph_);
  graph_ = Graph();
  RETURN_IF_ERROR(VerifyGraph(graph));
  return graph;
}

}  // namespace tilefuse
