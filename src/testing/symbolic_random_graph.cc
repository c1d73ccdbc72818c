#include "testing/symbolic_random_graph.h"

#include <cmath>
#include <map>
#include <random>

#include <fmt/format.h>

#include "tilefuse/builder.h"

namespace tilefuse {

std::string SymbolicBinding::ToString() const { return fmt::format("batch={},seq={},past={}", batch, seq, past); }

namespace {

// The generator's randomness: one std::mt19937_64 and no std:: distributions (their output
// is implementation-defined), as random_graph.h.
class Dice {
 public:
  explicit Dice(uint64_t seed) : rng_(seed) {}
  uint64_t Below(uint64_t n) { return rng_() % n; }
  int64_t Between(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(Below(hi - lo + 1)); }
  bool Chance(double p) { return static_cast<double>(rng_() >> 11) * 0x1.0p-53 < p; }
  template <typename T> T PickFrom(const std::vector<T>& items) { return items[Below(items.size())]; }

 private:
  std::mt19937_64 rng_;
};

// Builds the graph of one seed at one binding. Every draw of dice_ happens in the same order
// at every binding (no draw depends on a size), so the op sequence is the binding's only
// difference.
class SymbolicGraphGenerator {
 public:
  SymbolicGraphGenerator(uint64_t seed, const SymbolicBinding& at, DType dtype)
      : dice_(seed * 0x9E3779B97F4A7C15ull + 17), at_(at), dtype_(dtype) {}

  StatusOr<Graph> Generate() {
    channels_ = RandomChannels();
    x_ = Input({at_.batch, at_.seq, channels_}, {"batch", "seq", ""});
    bound_ = 1;
    Value summary;
    int steps = static_cast<int>(dice_.Between(3, 9));
    for (int s = 0; s < steps; ++s) {
      Step();
      if (bound_ > 4) Squash();
      if (s == steps / 2 && dice_.Chance(0.5)) summary = b_.Reduce(OpCode::kReduceMean, x_, {1}, false);  // [batch, C]
    }
    b_.Output(x_, "y");
    if (summary.valid()) b_.Output(summary, "summary");
    ASSIGN_OR_RETURN(Graph graph, b_.Build());
    SymbolicInputs symbolic;
    symbolic.dims = dims_;
    for (const auto& [name, dims] : dims_)
      for (const std::string& symbol : dims)
        if (!symbol.empty()) symbolic.values[symbol] = symbol == "batch" ? at_.batch : symbol == "seq" ? at_.seq : at_.past;
    graph.set_symbolic_inputs(std::move(symbolic));
    return graph;
  }

 private:
  Value Input(Shape shape, std::vector<std::string> dims) {
    std::string name = fmt::format("in{}", dims_.size());
    dims_[name] = std::move(dims);
    return b_.Parameter(name, dtype_, std::move(shape));
  }
  Value Weight(Shape shape) { return Input(shape, std::vector<std::string>(shape.size())); }
  int64_t RandomChannels() {  // C; a linear's K stays <= 64
    static const std::vector<int64_t> kChoices = {8, 16, 24, 32, 48, 64};
    return dice_.PickFrom(kChoices);
  }
  void Squash() {
    x_ = b_.Unary(OpCode::kTanh, x_);
    bound_ = 1;
  }

  void Step() {
    switch (dice_.Below(10)) {
      case 0: return Unary();
      case 1: return BroadcastPartner();
      case 2: return ReduceAndSubtract();
      case 3: return SoftmaxAlong(dice_.Chance(0.5) ? 1 : 2);
      case 4: return LayerNorm();
      case 5: return Linear();
      case 6: return Transposed();
      case 7: return ConcatPastAndSliceBack();
      case 8: return Attention();
      default: return PositionIota();
    }
  }

  void Unary() {
    static const std::vector<OpCode> kOps = {OpCode::kTanh, OpCode::kSigmoid, OpCode::kRelu, OpCode::kNeg, OpCode::kAbs,
                                             OpCode::kExp};
    OpCode op = dice_.PickFrom(kOps);
    if (op == OpCode::kExp) Squash();  // exp of at most e
    x_ = b_.Unary(op, x_);
    if (op == OpCode::kExp) bound_ = std::exp(1.0);
  }

  // x with a value of a smaller shape (a channel vector, a [1, seq, 1] or [batch, 1, 1]
  // input) or another [batch, seq, C] input.
  void BroadcastPartner() {
    Value other;
    switch (dice_.Below(4)) {
      case 0: other = Weight({channels_}); break;
      case 1: other = Input({1, at_.seq, 1}, {"", "seq", ""}); break;
      case 2: other = Input({at_.batch, 1, 1}, {"batch", "", ""}); break;
      default: other = Input({at_.batch, at_.seq, channels_}, {"batch", "seq", ""}); break;
    }
    static const std::vector<OpCode> kOps = {OpCode::kAdd, OpCode::kSub, OpCode::kMul, OpCode::kMax};
    OpCode op = dice_.PickFrom(kOps);
    x_ = b_.Binary(op, x_, other);
    bound_ = op == OpCode::kMul ? bound_ : bound_ + 1;
  }

  void ReduceAndSubtract() {
    static const std::vector<OpCode> kOps = {OpCode::kReduceMean, OpCode::kReduceMax, OpCode::kReduceMin};
    OpCode op = dice_.PickFrom(kOps);
    int64_t axis = dice_.Chance(0.6) ? 1 : 2;
    x_ = b_.Sub(x_, b_.Reduce(op, x_, {axis}, true));
    bound_ *= 2;
  }

  void SoftmaxAlong(int64_t axis) {
    x_ = b_.Softmax(x_, axis);
    bound_ = 1;
  }

  void LayerNorm() {
    Squash();  // well-conditioned rows: no layer norm of rounding noise
    x_ = b_.LayerNorm(x_, Weight({channels_}), dice_.Chance(0.5) ? Weight({channels_}) : Value(), 2, 1e-5);
    bound_ = std::sqrt(static_cast<double>(channels_)) + 1;
  }

  // x · W [C, C2] / C, rows merged into [batch·seq, C] or batched, then a bias and GELU or
  // not: the GEMM path with its rows a product of symbols.
  void Linear() {
    int64_t out = RandomChannels();
    bool merge = dice_.Chance(0.5), bias = dice_.Chance(0.6), gelu = dice_.Chance(0.5);
    Value in = merge ? b_.Reshape(x_, {at_.batch * at_.seq, channels_}) : x_;
    Value y = b_.MulScalar(b_.MatMul(in, Weight({channels_, out})), 1.0 / static_cast<double>(channels_));
    if (bias) y = b_.Add(y, Weight({out}));
    if (gelu) y = b_.Gelu(y, false);
    channels_ = out;
    x_ = merge ? b_.Reshape(y, {at_.batch, at_.seq, channels_}) : y;
    bound_ = bound_ + 1;
  }

  // An op on the transposed value ([seq, batch, C], or [batch, C, seq] with a softmax or a
  // reduction along seq as the last dim), transposed back.
  void Transposed() {
    if (dice_.Chance(0.5)) {
      Value t = b_.Transpose(x_, {1, 0, 2});
      t = b_.Mul(b_.Unary(OpCode::kSigmoid, t), t);
      x_ = b_.Transpose(t, {1, 0, 2});
      return;
    }
    Value t = b_.Transpose(x_, {0, 2, 1});
    t = dice_.Chance(0.5) ? b_.Softmax(t, 2) : b_.Sub(t, b_.Reduce(OpCode::kReduceMax, t, {2}, true));
    x_ = b_.Transpose(t, {0, 2, 1});
    bound_ *= 2;
  }

  // [past-sized input; x] along seq, normalised over the whole length, then x's part
  // sliced back: a part start and a slice start that are the past length.
  void ConcatPastAndSliceBack() {
    Value past = Input({at_.batch, at_.past, channels_}, {"batch", "past", ""});
    Value joined = b_.Concat({past, x_}, 1);
    if (dice_.Chance(0.5)) joined = b_.Softmax(joined, 1);
    else joined = b_.Sub(joined, b_.Reduce(OpCode::kReduceMean, joined, {1}, true));
    x_ = b_.Slice(joined, {at_.past}, {at_.past + at_.seq}, {1}, {});
    bound_ += 1;
  }

  // Multi-head attention of x over itself (causal or not) or over [past; x] (a decode step
  // when seq is 1): the attention pattern the planner fuses, its lengths symbols.
  void Attention() {
    std::vector<int64_t> heads_choices;
    for (int64_t h : {1, 2, 4})
      if (channels_ % h == 0 && channels_ / h >= 4) heads_choices.push_back(h);
    int64_t heads = dice_.PickFrom(heads_choices), depth = channels_ / heads;
    bool with_past = dice_.Chance(0.4), causal = !with_past && dice_.Chance(0.5);
    Squash();
    Value keys = x_;
    int64_t n = at_.seq;
    if (with_past) {
      keys = b_.Concat({b_.Unary(OpCode::kTanh, Input({at_.batch, at_.past, channels_}, {"batch", "past", ""})), x_}, 1);
      n = at_.past + at_.seq;
    }
    auto split_heads = [&](Value v, int64_t length) {
      return b_.Transpose(b_.Reshape(v, {at_.batch, length, heads, depth}), {0, 2, 1, 3});
    };
    Value q = split_heads(x_, at_.seq), k = split_heads(keys, n), v = split_heads(keys, n);
    Value scores = b_.MulScalar(b_.MatMul(q, b_.Transpose(k, {0, 1, 3, 2})), 1.0 / std::sqrt(static_cast<double>(depth)));
    if (causal) {
      Value row = b_.Iota({at_.seq, n}, 0, DType::kI64), column = b_.Iota({at_.seq, n}, 1, DType::kI64);
      scores = b_.Where(b_.Binary(OpCode::kLessEqual, column, row), scores, b_.Scalar(-1e4, dtype_));
    }
    Value out = b_.MatMul(b_.Softmax(scores, 3), v);
    x_ = b_.Reshape(b_.Transpose(out, {0, 2, 1, 3}), {at_.batch, at_.seq, channels_});
    bound_ = 1;
  }

  // x plus its position along seq, scaled (an iota whose extent is the symbol).
  void PositionIota() {
    Value position = b_.Iota({1, at_.seq, 1}, 1, dtype_);
    x_ = b_.Add(x_, b_.MulScalar(position, 1.0 / 64));
    bound_ += 1;  // seq <= 64 (never a size: the graph's squashes must not depend on the binding)
  }

  Dice dice_;
  SymbolicBinding at_;
  DType dtype_;
  GraphBuilder b_;
  std::map<std::string, std::vector<std::string>> dims_;  // per input, its dims' symbols
  Value x_;
  int64_t channels_ = 0;
  double bound_ = 1;
};

}  // namespace

std::vector<SymbolicBinding> SymbolicBindingsFor(uint64_t seed) {
  Dice dice(seed * 0xD1B54A32D192ED03ull + 5);
  static const std::vector<int64_t> kSeq = {1, 3, 7, 8, 13, 16, 29, 33, 40};
  std::vector<SymbolicBinding> bindings;
  while (bindings.size() < 3) {
    SymbolicBinding b{dice.Between(1, 4), dice.PickFrom(kSeq), dice.Between(1, 37)};
    bool seen = false;
    for (const SymbolicBinding& other : bindings) seen = seen || other.seq == b.seq;
    if (!seen) bindings.push_back(b);
  }
  return bindings;
}

StatusOr<Graph> GenerateSymbolicGraph(uint64_t seed, const SymbolicBinding& at, DType dtype) {
  if (dtype != DType::kF32 && dtype != DType::kF64)
    return InvalidArgument(fmt::format("symbolic random graphs are f32 or f64, not {}", DTypeName(dtype)));
  return SymbolicGraphGenerator(seed, at, dtype).Generate();
}

}  // namespace tilefuse
