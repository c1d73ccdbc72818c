#include "backend/cpu/conv_epilogue.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <optional>
#include <set>

#include "ir/scalar_eval.h"

namespace tilefuse {

namespace {

using Kind = ConvEltwise::Kind;

std::string Label(const Node& n) { return fmt::format("{} %{}", OpName(n.op), n.id); }

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

double Apply(const ConvEltwise& e, double x) {
  switch (e.kind) {
    case Kind::kRelu: return x > 0 ? x : e.alpha * x;
    case Kind::kClip: return std::min(std::max(x, e.alpha), e.beta);
    case Kind::kLinear: return e.alpha * x + e.beta;
    case Kind::kHardswish: return x * std::min(std::max(x / 6 + 0.5, 0.0), 1.0);
    case Kind::kLogistic: return Sigmoid(x);
    case Kind::kTanh: return std::tanh(x);
    case Kind::kSwish: return x * Sigmoid(e.alpha * x);
    case Kind::kGeluErf: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Kind::kGeluTanh: return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  }
  return x;
}

std::string Name(const ConvEltwise& e) {
  switch (e.kind) {
    case Kind::kRelu: return e.alpha == 0 ? "relu" : fmt::format("leaky_relu({:g})", e.alpha);
    case Kind::kClip: return fmt::format("clip({:g}, {:g})", e.alpha, e.beta);
    case Kind::kLinear: return fmt::format("linear({:g}x{:+g})", e.alpha, e.beta);
    case Kind::kHardswish: return "hardswish";
    case Kind::kLogistic: return "sigmoid";
    case Kind::kTanh: return "tanh";
    case Kind::kSwish: return "swish";
    case Kind::kGeluErf: return "gelu_erf";
    case Kind::kGeluTanh: return "gelu_tanh";
  }
  return "?";
}

using ScalarFunction = std::function<std::optional<double>(double)>;

// Probe values: both sides of every kink and saturation point of the candidates (0, ±3, 6).
constexpr double kProbes[] = {-40, -9.5, -6, -4.25, -3, -2.5, -1, -0.61, -0.125, -1e-3, 0,   1e-3,
                              0.3, 0.77, 1.5, 2.9,  3,  4.5,   6,  7.25, 11,     40};

// Does `chain` compute f at every probe? To f32 constants' rounding (the graph's 1/6 is a
// float), far below any difference between the candidates.
bool Computes(const ScalarFunction& f, const std::vector<ConvEltwise>& chain) {
  for (double x : kProbes) {
    std::optional<double> got = f(x);
    double expected = x;
    for (const ConvEltwise& e : chain) expected = Apply(e, expected);
    if (!got || !(std::fabs(*got - expected) <= 1e-6 + 1e-6 * std::fabs(expected))) return false;
  }
  return true;
}

// The oneDNN eltwise chain f is, parameters fitted from a few values of f, then checked at
// every probe.
StatusOr<std::vector<ConvEltwise>> IdentifyActivation(const ScalarFunction& f, const std::string& where) {
  auto at = [&](double x) { return f(x).value_or(std::nan("")); };
  const double lo = at(-1e4), hi = at(1e4), slope = (at(0.25) - at(-0.25)) / 0.5;
  std::vector<std::vector<ConvEltwise>> candidates = {
      {},
      {{Kind::kRelu, 0, 0}},
      {{Kind::kRelu, -at(-1), 0}},
      {{Kind::kClip, lo, hi}},
      {{Kind::kLinear, at(1) - at(0), at(0)}},
      {{Kind::kLinear, slope, at(0)}, {Kind::kClip, lo, hi}},
      {{Kind::kHardswish, 0, 0}},
      {{Kind::kLogistic, 0, 0}},
      {{Kind::kTanh, 0, 0}},
      {{Kind::kSwish, 1, 0}},
      {{Kind::kGeluErf, 0, 0}},
      {{Kind::kGeluTanh, 0, 0}},
  };
  for (const std::vector<ConvEltwise>& chain : candidates) {
    bool finite = std::all_of(chain.begin(), chain.end(), [](const ConvEltwise& e) {
      return std::isfinite(e.alpha) && std::isfinite(e.beta);
    });
    if (finite && Computes(f, chain)) return chain;
  }
  return Unimplemented(fmt::format("{} is none of oneDNN's eltwise post-ops", where));
}

// Per output channel values of constant `value` broadcast to the conv output's shape, or
// nullopt when it varies along another axis.
std::optional<std::vector<double>> PerChannel(const Tensor& value, const Shape& out) {
  const Shape& shape = value.shape();
  const int rank = static_cast<int>(out.size()), offset = rank - static_cast<int>(shape.size());
  if (offset < 0) return std::nullopt;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d)
    if (shape[d] != 1 && shape[d] != out[offset + d]) return std::nullopt;
  const int channel_axis = 1 - offset;  // in `shape`; out of range: broadcast along channels
  std::vector<double> values = value.ToDoubles();
  std::vector<double> per_channel(out[1], std::nan(""));
  std::vector<int64_t> index(shape.size(), 0);
  for (double v : values) {
    int64_t c = channel_axis >= 0 && channel_axis < static_cast<int>(shape.size()) ? index[channel_axis] : -1;
    for (int64_t k = c < 0 ? 0 : c; k < (c < 0 ? out[1] : c + 1); ++k) {
      if (std::isnan(per_channel[k])) per_channel[k] = v;
      else if (per_channel[k] != v) return std::nullopt;
    }
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0 && ++index[d] == shape[d]; --d) index[d] = 0;
  }
  if (channel_axis >= 0 && channel_axis < static_cast<int>(shape.size()) && shape[channel_axis] == 1)
    std::fill(per_channel.begin(), per_channel.end(), per_channel[0]);
  if (std::any_of(per_channel.begin(), per_channel.end(), [](double v) { return std::isnan(v); })) return std::nullopt;
  return per_channel;
}

class Matcher {
 public:
  Matcher(const Graph& g, int conv, const FusionGroup& epilogue, const std::vector<bool>& is_constant, const ConstantValue& value_of)
      : g_(g), conv_(conv), members_(epilogue.nodes), outputs_(epilogue.outputs), is_constant_(is_constant), value_of_(value_of) {}

  StatusOr<ConvEpilogue> Run() {
    const Node& conv = g_.node(conv_);
    ConvEpilogue e;
    if (members_.empty()) {
      e.output = conv_;
      return e;
    }
    if (outputs_.size() != 1)
      return Unimplemented(fmt::format("the group writes {} values (the convolution writes one)", outputs_.size()));
    e.output = outputs_[0];
    const Node& out = g_.node(e.output);
    if (out.dtype != DType::kF32 || out.shape != conv.shape)
      return Unimplemented(fmt::format("the output {} is {}{}, the convolution {}{}", Label(out), DTypeName(out.dtype),
                                       ShapeToString(out.shape), DTypeName(conv.dtype), ShapeToString(conv.shape)));
    RETURN_IF_ERROR(FoldAffine(e));
    RETURN_IF_ERROR(FindResidual(e));
    const int before_end = e.residual >= 0 ? residual_other_ : e.output;
    ASSIGN_OR_RETURN(e.before_residual, IdentifyActivation(Segment(cur_, before_end), "the activation before the residual"));
    if (e.residual >= 0) {
      ASSIGN_OR_RETURN(e.after_residual, IdentifyActivation(Segment(residual_add_, e.output), "the activation after the residual"));
    }
    for (int id : members_)
      if (!visited_.count(id)) return Unimplemented(fmt::format("{} is not part of the post-op chain", Label(g_.node(id))));
    return e;
  }

 private:
  bool IsMember(int id) const { return std::binary_search(members_.begin(), members_.end(), id); }

  std::vector<int> UsersInGroup(int id) const {
    std::vector<int> users;
    for (int m : members_)
      for (int input : g_.node(m).inputs)
        if (input == id) users.push_back(m);
    return users;
  }

  // Bias adds and batch-norm scales and shifts right after the convolution.
  Status FoldAffine(ConvEpilogue& e) {
    const Shape& shape = g_.node(conv_).shape;
    const int64_t channels = shape[1];
    e.scale.assign(channels, 1.0);
    e.shift.assign(channels, 0.0);
    cur_ = conv_;
    while (cur_ != e.output) {
      std::vector<int> users = UsersInGroup(cur_);
      if (users.size() != 1) break;
      const Node& u = g_.node(users[0]);
      bool affine = u.op == OpCode::kAdd || u.op == OpCode::kSub || u.op == OpCode::kMul || u.op == OpCode::kDiv;
      if (!affine || u.shape != shape || u.inputs.size() != 2) break;
      const bool cur_first = u.inputs[0] == cur_;
      const int other = u.inputs[cur_first ? 1 : 0];
      if (other == cur_ || !is_constant_[other]) break;
      if (u.op == OpCode::kDiv && !cur_first) break;
      ASSIGN_OR_RETURN(Tensor value, value_of_(other));
      std::optional<std::vector<double>> v = PerChannel(value, shape);
      if (!v) break;
      for (int64_t c = 0; c < channels; ++c) {
        double x = (*v)[c];
        switch (u.op) {
          case OpCode::kAdd: e.shift[c] += x; break;
          case OpCode::kSub:
            if (cur_first) e.shift[c] -= x;
            else e.scale[c] = -e.scale[c], e.shift[c] = x - e.shift[c];
            break;
          case OpCode::kMul: e.scale[c] *= x, e.shift[c] *= x; break;
          default: e.scale[c] /= x, e.shift[c] /= x; break;
        }
      }
      visited_.insert(u.id);
      cur_ = u.id;
    }
    const bool identity = std::all_of(e.scale.begin(), e.scale.end(), [](double s) { return s == 1; }) &&
                          std::all_of(e.shift.begin(), e.shift.end(), [](double s) { return s == 0; });
    if (identity) e.scale.clear(), e.shift.clear();
    return Status::Ok();
  }

  // A tensor computed outside the group, added once to a value of the chain.
  Status FindResidual(ConvEpilogue& e) {
    for (int m : members_)
      for (int input : g_.node(m).inputs) {
        if (input == conv_ || IsMember(input) || is_constant_[input]) continue;
        if (e.residual >= 0 && e.residual != input)
          return Unimplemented(fmt::format("the epilogue reads two tensors, %{} and %{} (oneDNN adds one)", e.residual, input));
        e.residual = input;
      }
    if (e.residual < 0) return Status::Ok();
    const Node& r = g_.node(e.residual);
    if (r.shape != g_.node(conv_).shape || r.dtype != DType::kF32)
      return Unimplemented(fmt::format("{} is read as {}{}, not at the output's positions", Label(r), DTypeName(r.dtype), ShapeToString(r.shape)));
    std::vector<int> users = UsersInGroup(e.residual);
    const Node& add = g_.node(users[0]);
    if (users.size() != 1 || add.op != OpCode::kAdd || add.inputs[0] == add.inputs[1])
      return Unimplemented(fmt::format("{} is used other than by one add", Label(r)));
    residual_add_ = add.id;
    residual_other_ = add.inputs[add.inputs[0] == e.residual ? 1 : 0];
    if (!IsMember(residual_other_) && residual_other_ != conv_)
      return Unimplemented(fmt::format("{} adds {} to a value outside the group", Label(add), Label(r)));
    visited_.insert(add.id);
    return Status::Ok();
  }

  // `to` as a function of the value `from`, evaluated by the ops' scalar expressions; nullopt
  // where it reads anything else than `from` and scalar constants.
  ScalarFunction Segment(int from, int to) {
    // The members the segment runs through count as part of the chain.
    Mark(from, to);
    return [this, from, to](double x) { return Evaluate(to, from, x); };
  }

  void Mark(int from, int id) {
    if (id == from || !IsMember(id) || visited_.count(id)) return;
    visited_.insert(id);
    for (int input : g_.node(id).inputs) Mark(from, input);
  }

  std::optional<double> Evaluate(int id, int from, double x) {
    if (id == from) return x;
    const Node& n = g_.node(id);
    if (is_constant_[id]) {
      StatusOr<Tensor> value = value_of_(id);
      if (!value.ok()) return std::nullopt;
      std::vector<double> v = value->ToDoubles();
      if (v.empty() || std::any_of(v.begin(), v.end(), [&](double e) { return e != v[0]; })) return std::nullopt;
      return v[0];
    }
    if (!IsMember(id) || NumElements(n.shape) != NumElements(g_.node(conv_).shape)) return std::nullopt;
    const OpKind kind = n.info().kind;
    if (kind == OpKind::View || kind == OpKind::Broadcast) {
      if (n.op != OpCode::kReshape) return std::nullopt;  // the same element at the same position
      return Evaluate(n.inputs[0], from, x);
    }
    if (kind != OpKind::Pointwise || n.inputs.size() > 3) return std::nullopt;
    if (n.op == OpCode::kCast && n.dtype != DType::kF32 && n.dtype != DType::kF64) return std::nullopt;
    double args[3] = {0, 0, 0};
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      std::optional<double> a = Evaluate(n.inputs[i], from, x);
      if (!a) return std::nullopt;
      args[i] = *a;
    }
    return n.op == OpCode::kCast ? args[0] : EvaluateScalarOp(n.op, args[0], args[1], args[2]);
  }

  const Graph& g_;
  const int conv_;
  const std::vector<int>& members_;
  const std::vector<int>& outputs_;
  const std::vector<bool>& is_constant_;
  const ConstantValue& value_of_;
  int cur_ = -1;             // the end of the folded affine ops
  int residual_add_ = -1;    // the add of the residual
  int residual_other_ = -1;  // its other operand
  std::set<int> visited_;
};

}  // namespace

std::string DescribeConvEpilogue(const ConvEpilogue& e) {
  std::vector<std::string> parts;
  if (!e.scale.empty()) parts.push_back("scale/shift folded");
  for (const ConvEltwise& x : e.before_residual) parts.push_back(Name(x));
  if (e.residual >= 0) parts.push_back(fmt::format("add %{}", e.residual));
  for (const ConvEltwise& x : e.after_residual) parts.push_back(Name(x));
  if (parts.empty()) return "none";
  std::string text;
  for (const std::string& p : parts) text += (text.empty() ? "" : ", ") + p;
  return text;
}

StatusOr<ConvEpilogue> MatchConvEpilogue(const Graph& graph, int conv, const FusionGroup& epilogue,
                                         const std::vector<bool>& is_constant, const ConstantValue& value_of) {
  return Matcher(graph, conv, epilogue, is_constant, value_of).Run();
}

}  // namespace tilefuse
