#include "ir/shape_inference.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tilefuse {

namespace {

std::string Describe(const Node& n) { return ShapeToString(n.shape) + " " + std::string(DTypeName(n.dtype)); }

Status InferPointwise(const Graph& g, Node& n) {
  const OpInfo& info = n.info();
  if (n.op == OpCode::kIota || n.op == OpCode::kRandomUniform) {
    if (n.op == OpCode::kRandomUniform && !IsFloat(n.attrs.to))
      return InvalidArgument("random_uniform needs a float dtype");
    if (n.op == OpCode::kIota && (n.attrs.axis < 0 || n.attrs.axis >= static_cast<int64_t>(n.attrs.shape.size())))
      return InvalidArgument(fmt::format("iota axis {} out of range for shape {}", n.attrs.axis, ShapeToString(n.attrs.shape)));
    n.shape = n.attrs.shape;
    n.dtype = n.attrs.to;
    return Status::Ok();
  }
  const Node& first = g.node(n.inputs[0]);
  for (int input : n.inputs) {
    const Node& in = g.node(input);
    if (in.shape != first.shape)
      return InvalidArgument(fmt::format("{} needs inputs of one shape, got {} and {}", info.name,
                                         ShapeToString(first.shape), ShapeToString(in.shape)));
  }
  // The data inputs whose dtypes must agree: all of them, except where's condition.
  size_t data_begin = n.op == OpCode::kWhere ? 1 : 0;
  const Node& data = g.node(n.inputs[data_begin]);
  for (size_t i = data_begin; i < n.inputs.size(); ++i) {
    const Node& in = g.node(n.inputs[i]);
    if (in.dtype != data.dtype)
      return InvalidArgument(fmt::format("{} needs inputs of one dtype, got {} and {}", info.name,
                                         DTypeName(data.dtype), DTypeName(in.dtype)));
  }
  if (n.op == OpCode::kWhere && first.dtype != DType::kBool)
    return InvalidArgument(fmt::format("where needs a bool condition, got {}", DTypeName(first.dtype)));
  bool logical = n.op == OpCode::kAnd || n.op == OpCode::kOr || n.op == OpCode::kXor || n.op == OpCode::kNot;
  if (logical && data.dtype != DType::kBool)
    return InvalidArgument(fmt::format("{} needs bool inputs, got {}", info.name, DTypeName(data.dtype)));
  n.shape = first.shape;
  switch (info.result) {
    case ResultDType::Same: n.dtype = data.dtype; break;
    case ResultDType::Bool: n.dtype = DType::kBool; break;
    case ResultDType::To: n.dtype = n.attrs.to; break;
  }
  return Status::Ok();
}

Status InferBroadcast(const Node& in, Node& n) {
  const Shape& to = n.attrs.shape;
  if (in.shape.size() > to.size())
    return InvalidArgument(fmt::format("cannot broadcast {} to {}", ShapeToString(in.shape), ShapeToString(to)));
  size_t offset = to.size() - in.shape.size();
  for (size_t i = 0; i < in.shape.size(); ++i)
    if (in.shape[i] != 1 && in.shape[i] != to[offset + i])
      return InvalidArgument(fmt::format("cannot broadcast {} to {}", ShapeToString(in.shape), ShapeToString(to)));
  n.shape = to;
  n.dtype = in.dtype;
  return Status::Ok();
}

Status InferSlice(const Node& in, Node& n) {
  const Attrs& a = n.attrs;
  size_t rank = in.shape.size();
  if (a.starts.size() != rank || a.steps.size() != rank || a.shape.size() != rank)
    return InvalidArgument("slice needs one start, step and size per dim");
  for (size_t d = 0; d < rank; ++d) {
    int64_t size = a.shape[d];
    if (size < 0 || a.steps[d] == 0) return InvalidArgument("slice has a negative size or a zero step");
    if (size == 0) continue;
    int64_t last = a.starts[d] + (size - 1) * a.steps[d];
    if (a.starts[d] < 0 || a.starts[d] >= in.shape[d] || last < 0 || last >= in.shape[d])
      return InvalidArgument(fmt::format("slice dim {} reads outside [0, {})", d, in.shape[d]));
  }
  n.shape = a.shape;
  n.dtype = in.dtype;
  return Status::Ok();
}

Status InferConcat(const Graph& g, Node& n) {
  const Node& first = g.node(n.inputs[0]);
  int64_t axis = n.attrs.axis;
  if (axis < 0 || axis >= first.rank()) return InvalidArgument(fmt::format("concat axis {} out of range", axis));
  Shape out = first.shape;
  out[axis] = 0;
  for (int input : n.inputs) {
    const Node& in = g.node(input);
    bool same = in.rank() == first.rank() && in.dtype == first.dtype;
    for (int d = 0; same && d < in.rank(); ++d) same = d == axis || in.shape[d] == first.shape[d];
    if (!same)
      return InvalidArgument(fmt::format("concat inputs disagree: {} vs {} on axis {}", Describe(first), Describe(in), axis));
    out[axis] += in.shape[axis];
  }
  n.shape = out;
  n.dtype = first.dtype;
  return Status::Ok();
}

Status InferGather(const Node& data, const Node& indices, Node& n) {
  int64_t axis = n.attrs.axis;
  if (axis < 0 || axis >= data.rank()) return InvalidArgument(fmt::format("gather axis {} out of range", axis));
  if (!IsInteger(indices.dtype)) return InvalidArgument("gather indices must be integers");
  if (n.op == OpCode::kGather) {
    Shape out(data.shape.begin(), data.shape.begin() + axis);
    out.insert(out.end(), indices.shape.begin(), indices.shape.end());
    out.insert(out.end(), data.shape.begin() + axis + 1, data.shape.end());
    n.shape = out;
  } else {
    if (indices.rank() != data.rank()) return InvalidArgument("gather_elements needs indices of the data's rank");
    n.shape = indices.shape;
  }
  n.dtype = data.dtype;
  return Status::Ok();
}

Status InferReduction(const Node& in, Node& n) {
  Shape out;
  const auto& axes = n.attrs.axes;
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] < 0 || axes[i] >= in.rank() || (i > 0 && axes[i] <= axes[i - 1]))
      return InvalidArgument(fmt::format("reduction axes {} must be sorted, unique and in [0, {})", axes, in.rank()));
  for (int d = 0; d < in.rank(); ++d) {
    bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!reduced) out.push_back(in.shape[d]);
    else if (n.attrs.keepdims) out.push_back(1);
  }
  n.shape = out;
  n.dtype = in.dtype;
  return Status::Ok();
}

Status InferMatMul(const Node& a, const Node& b, Node& n) {
  if (a.rank() < 2 || b.rank() < 2) return InvalidArgument("matmul needs operands of rank >= 2");
  // Products of 8-bit floats (e4m3 and e5m2, mixed as Hopper's tensor cores take them)
  // accumulate and return f32, as integer products return int32 in ONNX's MatMulInteger: an
  // 8-bit result would lose everything the accumulation kept. Products of int8 return f32 too:
  // their exact sum (the tensor cores' int32) rounded to f32, what their scales multiply next.
  // passes/fp8_products.h makes both.
  const bool float8 = IsFloat8(a.dtype) && IsFloat8(b.dtype);
  if (a.dtype != b.dtype && !float8)
    return InvalidArgument(fmt::format("matmul operands differ in dtype: {} and {}", DTypeName(a.dtype), DTypeName(b.dtype)));
  int64_t k = a.shape[a.rank() - 1];
  if (b.shape[b.rank() - 2] != k)
    return InvalidArgument(fmt::format("matmul inner dims differ: {} x {}", ShapeToString(a.shape), ShapeToString(b.shape)));
  Shape batch_a(a.shape.begin(), a.shape.end() - 2), batch_b(b.shape.begin(), b.shape.end() - 2);
  size_t rank = std::max(batch_a.size(), batch_b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i + batch_a.size() >= rank ? batch_a[i + batch_a.size() - rank] : 1;
    int64_t db = i + batch_b.size() >= rank ? batch_b[i + batch_b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1)
      return InvalidArgument(fmt::format("matmul batch dims do not broadcast: {} x {}", ShapeToString(a.shape), ShapeToString(b.shape)));
    out[i] = da == 1 ? db : da;  // 1 broadcasts to any size, 0 included
  }
  out.push_back(a.shape[a.rank() - 2]);
  out.push_back(b.shape[b.rank() - 1]);
  n.shape = out;
  n.dtype = float8 || a.dtype == DType::kI8 ? DType::kF32 : a.dtype;
  return Status::Ok();
}

// block_scaled_matmul's scales: sa [..., M, KB] as A's batch and rows, sb [KB, N], f32, KB
// dividing K; its operands 8-bit floats, B shared by every batch entry.
Status CheckBlockScales(const Graph& g, const Node& n) {
  const Node &a = g.node(n.inputs[0]), &b = g.node(n.inputs[1]), &sa = g.node(n.inputs[2]), &sb = g.node(n.inputs[3]);
  if (!IsFloat8(a.dtype) || !IsFloat8(b.dtype) || b.rank() != 2)
    return InvalidArgument("block_scaled_matmul multiplies 8-bit floats by a 2-D B");
  const int64_t k = a.shape.back(), blocks = sb.rank() == 2 ? sb.shape[0] : 0;
  Shape expected_sa = a.shape;
  expected_sa.back() = blocks;
  if (sa.dtype != DType::kF32 || sb.dtype != DType::kF32 || blocks <= 0 || k % blocks != 0 || sa.shape != expected_sa ||
      sb.shape != Shape{blocks, b.shape[1]})
    return InvalidArgument(fmt::format("block_scaled_matmul's scales {} and {} do not fit {} x {} in blocks of K", ShapeToString(sa.shape),
                                       ShapeToString(sb.shape), ShapeToString(a.shape), ShapeToString(b.shape)));
  return Status::Ok();
}

// The output spatial sizes of a sliding window (conv, pools, window) over input x.
StatusOr<Shape> WindowOutputSizes(const Node& x, const Node& n) {
  const Attrs& a = n.attrs;
  size_t spatial = a.kernel.size();
  if (x.rank() != static_cast<int>(spatial) + 2 || a.strides.size() != spatial || a.dilations.size() != spatial ||
      a.pads.size() != 2 * spatial)
    return InvalidArgument(fmt::format("{} attributes do not match input {}", OpName(n.op), ShapeToString(x.shape)));
  Shape sizes;
  for (size_t i = 0; i < spatial; ++i) {
    if (a.kernel[i] <= 0 || a.strides[i] <= 0 || a.dilations[i] <= 0)
      return InvalidArgument(fmt::format("{} needs positive kernel, strides and dilations", OpName(n.op)));
    int64_t size = PooledSize(x.shape[2 + i], a.kernel[i], a.strides[i], a.pads[i], a.pads[spatial + i], a.dilations[i]);
    if (size <= 0) return InvalidArgument(fmt::format("{} window larger than its padded input", OpName(n.op)));
    sizes.push_back(size);
  }
  return sizes;
}

// window: [N, C, out..., kernel...] of x, the fill a scalar of x's dtype.
Status InferSlidingWindow(const Graph& g, Node& n) {
  const Node& x = g.node(n.inputs[0]);
  const Node& fill = g.node(n.inputs[1]);
  if (NumElements(fill.shape) != 1 || fill.dtype != x.dtype)
    return InvalidArgument(fmt::format("window fill must be one {} value, got {}", DTypeName(x.dtype), Describe(fill)));
  ASSIGN_OR_RETURN(Shape sizes, WindowOutputSizes(x, n));
  n.shape = {x.shape[0], x.shape[1]};
  n.shape.insert(n.shape.end(), sizes.begin(), sizes.end());
  n.shape.insert(n.shape.end(), n.attrs.kernel.begin(), n.attrs.kernel.end());
  n.dtype = x.dtype;
  return Status::Ok();
}

Status InferWindow(const Graph& g, Node& n) {
  const Node& x = g.node(n.inputs[0]);
  const Attrs& a = n.attrs;
  size_t spatial = a.kernel.size();
  ASSIGN_OR_RETURN(Shape sizes, WindowOutputSizes(x, n));
  Shape out = {x.shape[0], x.shape[1]};
  if (n.op == OpCode::kConv) {
    const Node& w = g.node(n.inputs[1]);
    int64_t channels = 0;  // the weight's input channels times the groups (checked: a fuzzed group was 2^62)
    if (w.rank() != x.rank() || a.group <= 0 || __builtin_mul_overflow(w.shape[1], a.group, &channels) ||
        x.shape[1] != channels || w.shape[0] % a.group != 0)
      return InvalidArgument(fmt::format("conv weight {} does not fit input {} with group {}", ShapeToString(w.shape),
                                         ShapeToString(x.shape), a.group));
    for (size_t i = 0; i < spatial; ++i)
      if (w.shape[2 + i] != a.kernel[i]) return InvalidArgument("conv kernel_shape disagrees with the weight");
    if (n.inputs.size() == 3 && g.node(n.inputs[2]).shape != Shape{w.shape[0]})
      return InvalidArgument("conv bias must have one value per output channel");
    out[1] = w.shape[0];
  }
  out.insert(out.end(), sizes.begin(), sizes.end());
  n.shape = out;
  n.dtype = x.dtype;
  return Status::Ok();
}

// attention_grad_q/k/v over (dout, q, k, v, out, logsumexp): see ops.def.
Status InferAttentionGrad(const Graph& g, Node& n) {
  const Node& dout = g.node(n.inputs[0]);
  const Node& q = g.node(n.inputs[1]);
  const Node& k = g.node(n.inputs[2]);
  const Node& v = g.node(n.inputs[3]);
  const Node& out = g.node(n.inputs[4]);
  const Node& lse = g.node(n.inputs[5]);
  auto fail = [&](std::string_view why) {
    return InvalidArgument(fmt::format("{}: {} (dout {}, q {}, k {}, v {}, out {}, logsumexp {})", OpName(n.op), why, Describe(dout),
                                       Describe(q), Describe(k), Describe(v), Describe(out), Describe(lse)));
  };
  if (!IsFloat(q.dtype)) return fail("needs float operands");
  for (const Node* t : {&dout, &k, &v, &out})
    if (t->dtype != q.dtype) return fail("operands of different dtypes");
  if (!IsFloat(lse.dtype)) return fail("needs a float logsumexp");
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4) return fail("takes [batch, heads, rows, d] operands");
  if (k.shape[0] != q.shape[0] || v.shape[0] != q.shape[0] || k.shape[1] != v.shape[1] || k.shape[2] != v.shape[2] ||
      k.shape[3] != q.shape[3] || k.shape[1] < 1 || q.shape[1] % k.shape[1] != 0)
    return fail("q, k and v do not fit (k and v [batch, kv_heads, keys, d], heads a multiple of kv_heads)");
  const Shape out_shape = {q.shape[0], q.shape[1], q.shape[2], v.shape[3]};
  if (out.shape != out_shape || dout.shape != out_shape) return fail("out and dout must be [batch, heads, queries, v's d]");
  if (lse.shape != Shape{q.shape[0], q.shape[1], q.shape[2]}) return fail("logsumexp must be [batch, heads, queries]");
  if (!std::isfinite(n.attrs.scale)) return fail("the scale is not finite");
  n.shape = n.op == OpCode::kAttentionGradQ ? q.shape : n.op == OpCode::kAttentionGradK ? k.shape : v.shape;
  n.dtype = q.dtype;
  return Status::Ok();
}

Status InferComposite(const Graph& g, Node& n) {
  const Node& x = g.node(n.inputs[0]);
  if (!IsFloat(x.dtype)) return InvalidArgument(fmt::format("{} needs a float input", OpName(n.op)));
  if ((n.op == OpCode::kSoftmax || n.op == OpCode::kLogSoftmax || n.op == OpCode::kLayerNorm) &&
      (n.attrs.axis < 0 || n.attrs.axis >= std::max(1, x.rank())))
    return InvalidArgument(fmt::format("{} axis {} out of range", OpName(n.op), n.attrs.axis));
  if (n.op == OpCode::kLayerNorm) {
    Shape normalized(x.shape.begin() + n.attrs.axis, x.shape.end());
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      const Node& p = g.node(n.inputs[i]);
      if (p.shape != normalized || p.dtype != x.dtype)
        return InvalidArgument(fmt::format("layer_norm scale/bias {} must be {} {}", Describe(p),
                                           ShapeToString(normalized), DTypeName(x.dtype)));
    }
  }
  n.shape = x.shape;
  n.dtype = x.dtype;
  return Status::Ok();
}

}  // namespace

int64_t PooledSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin, int64_t pad_end, int64_t dilation) {
  int64_t effective = (kernel - 1) * dilation + 1;
  return (in + pad_begin + pad_end - effective) / stride + 1;
}

Status InferNodeType(const Graph& g, Node& n) {
  const OpInfo& info = n.info();
  if (info.arity >= 0 && static_cast<int>(n.inputs.size()) != info.arity)
    return InvalidArgument(fmt::format("{} takes {} inputs, got {}", info.name, info.arity, n.inputs.size()));
  if (info.arity < 0 && n.inputs.empty()) return InvalidArgument(fmt::format("{} needs at least one input", info.name));
  if (n.shape.size() > 8 && n.op != OpCode::kParameter) return InvalidArgument("rank above 8");
  switch (info.kind) {
    case OpKind::Source:
      if (n.op == OpCode::kConstant) {
        if (!n.attrs.value) return InvalidArgument("constant without a value");
        n.shape = n.attrs.value->shape();
        n.dtype = n.attrs.value->dtype();
      } else {
        n.shape = n.attrs.shape;
        n.dtype = n.attrs.to;
      }
      break;
    case OpKind::Pointwise: RETURN_IF_ERROR(InferPointwise(g, n)); break;
    case OpKind::Broadcast: RETURN_IF_ERROR(InferBroadcast(g.node(n.inputs[0]), n)); break;
    case OpKind::Reduction: RETURN_IF_ERROR(InferReduction(g.node(n.inputs[0]), n)); break;
    case OpKind::Contraction:
      RETURN_IF_ERROR(InferMatMul(g.node(n.inputs[0]), g.node(n.inputs[1]), n));
      if (n.op == OpCode::kBlockScaledMatMul) RETURN_IF_ERROR(CheckBlockScales(g, n));
      break;
    case OpKind::Opaque:
      RETURN_IF_ERROR(IsAttentionGrad(n.op) ? InferAttentionGrad(g, n) : InferWindow(g, n));
      break;
    case OpKind::Composite: RETURN_IF_ERROR(InferComposite(g, n)); break;
    case OpKind::View: {
      const Node& in = g.node(n.inputs[0]);
      switch (n.op) {
        case OpCode::kReshape:
          if (NumElements(n.attrs.shape) != NumElements(in.shape))
            return InvalidArgument(fmt::format("cannot reshape {} to {}", ShapeToString(in.shape), ShapeToString(n.attrs.shape)));
          n.shape = n.attrs.shape;
          n.dtype = in.dtype;
          break;
        case OpCode::kTranspose: {
          std::vector<int64_t> sorted = n.attrs.perm;
          std::sort(sorted.begin(), sorted.end());
          bool ok = static_cast<int>(sorted.size()) == in.rank();
          for (size_t i = 0; ok && i < sorted.size(); ++i) ok = sorted[i] == static_cast<int64_t>(i);
          if (!ok) return InvalidArgument(fmt::format("transpose perm {} is not a permutation of {} dims", n.attrs.perm, in.rank()));
          n.shape.clear();
          for (int64_t p : n.attrs.perm) n.shape.push_back(in.shape[p]);
          n.dtype = in.dtype;
          break;
        }
        case OpCode::kSlice: RETURN_IF_ERROR(InferSlice(in, n)); break;
        case OpCode::kConcat: RETURN_IF_ERROR(InferConcat(g, n)); break;
        case OpCode::kWindow: RETURN_IF_ERROR(InferSlidingWindow(g, n)); break;
        default: RETURN_IF_ERROR(InferGather(in, g.node(n.inputs[1]), n)); break;
      }
      break;
    }
  }
  for (int64_t d : n.shape)
    if (d < 0) return InvalidArgument(fmt::format("negative dimension in {}", ShapeToString(n.shape)));
  return Status::Ok();
}

}  // namespace tilefuse
