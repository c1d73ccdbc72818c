#include "ir/symbolic_shapes.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "support/check.h"

namespace tilefuse {

SymExpr SymExpr::Constant(int64_t value) {
  SymExpr e;
  if (value != 0) e.terms_[{}] = value;
  return e;
}

SymExpr SymExpr::Symbol(int id) {
  SymExpr e;
  e.terms_[{id}] = 1;
  return e;
}

bool SymExpr::IsConstant() const {
  return terms_.empty() || (terms_.size() == 1 && terms_.begin()->first.empty());
}

SymExpr SymExpr::operator+(const SymExpr& other) const {
  SymExpr sum = *this;
  for (const auto& [monomial, c] : other.terms_)
    if ((sum.terms_[monomial] += c) == 0) sum.terms_.erase(monomial);
  return sum;
}

SymExpr SymExpr::operator-(const SymExpr& other) const { return *this + other * Constant(-1); }

SymExpr SymExpr::operator*(const SymExpr& other) const {
  SymExpr product;
  for (const auto& [ma, ca] : terms_)
    for (const auto& [mb, cb] : other.terms_) {
      std::vector<int> m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end());
      if ((product.terms_[m] += ca * cb) == 0) product.terms_.erase(m);
    }
  return product;
}

std::optional<SymExpr> SymExpr::DividedBy(const SymExpr& divisor) const {
  if (divisor.terms_.size() != 1) return std::nullopt;
  const auto& [dm, dc] = *divisor.terms_.begin();
  SymExpr quotient;
  for (const auto& [m, c] : terms_) {
    if (c % dc != 0 || !std::includes(m.begin(), m.end(), dm.begin(), dm.end())) return std::nullopt;
    std::vector<int> rest;
    std::set_difference(m.begin(), m.end(), dm.begin(), dm.end(), std::back_inserter(rest));
    quotient.terms_[rest] = c / dc;
  }
  return quotient;
}

int64_t SymExpr::Evaluate(const std::vector<int64_t>& values) const {
  int64_t sum = 0;
  for (const auto& [m, c] : terms_) {
    int64_t term = c;
    for (int id : m) {
      TF_CHECK(id >= 0 && id < static_cast<int>(values.size()));
      term *= values[static_cast<size_t>(id)];
    }
    sum += term;
  }
  return sum;
}

std::string SymExpr::Print(const std::string& prefix) const {
  return PrintNamed([&](int id) { return fmt::format("{}{}", prefix, id); });
}

std::string SymExpr::Print(const std::vector<std::string>& names) const {
  return PrintNamed([&](int id) { return names.at(static_cast<size_t>(id)); });
}

std::string SymExpr::PrintNamed(const std::function<std::string(int)>& name) const {
  if (terms_.empty()) return "0";
  std::string out;
  // Symbol terms first (the map orders the constant's empty monomial first).
  std::vector<std::pair<std::vector<int>, int64_t>> ordered(terms_.begin(), terms_.end());
  std::stable_partition(ordered.begin(), ordered.end(), [](const auto& t) { return !t.first.empty(); });
  for (const auto& [m, c] : ordered) {
    std::string term;
    for (int id : m) term += fmt::format("{}{}", term.empty() ? "" : " * ", name(id));
    const int64_t magnitude = std::abs(c);
    if (term.empty()) term = fmt::format("{}", magnitude);
    else if (magnitude != 1) term = fmt::format("{} * {}", term, magnitude);
    if (out.empty()) out = c < 0 ? "-" + term : term;
    else out += fmt::format(" {} {}", c < 0 ? '-' : '+', term);
  }
  return out;
}

std::set<int> SymExpr::Symbols() const {
  std::set<int> ids;
  for (const auto& [m, c] : terms_) ids.insert(m.begin(), m.end());
  return ids;
}

bool SymExpr::StandsFor(int64_t value, const std::vector<int64_t>& values) const {
  if (IsConstant()) return false;
  return *Symbols().rbegin() < static_cast<int>(values.size()) && Evaluate(values) == value;
}

bool SymExpr::Is(int64_t value, const std::vector<int64_t>& values) const {
  return IsConstant() ? Evaluate(values) == value : StandsFor(value, values);
}

SymExpr SymbolicShapes::Elements(int node) const {
  SymExpr product = SymExpr::Constant(1);
  for (const SymExpr& d : dims.at(static_cast<size_t>(node))) product = product * d;
  return product;
}

namespace {

class Inference {
 public:
  explicit Inference(const Graph& g) : g_(g) {
    for (const auto& [name, value] : g.symbolic_inputs().values) {
      id_of_[name] = static_cast<int>(out_.names.size());
      out_.names.push_back(name);
      out_.values.push_back(value);
    }
    // The sizes the model's inputs fix, their static dims (a hidden size of 64 is no batch of
    // 64). Not constants' dims: constant folding bakes tensors of the binding's shape into the
    // graph (position embeddings gathered [1, seq, 64]).
    for (const Node& n : g.nodes()) {
      if (n.op != OpCode::kParameter) continue;
      auto named = g.symbolic_inputs().dims.find(n.name);
      for (size_t d = 0; d < n.shape.size(); ++d)
        if (named == g.symbolic_inputs().dims.end() || d >= named->second.size() || named->second[d].empty())
          static_sizes_.insert(n.shape[d]);
    }
  }

  SymbolicShapes Run() {
    if (out_.names.empty()) return out_;
    out_.dims.resize(static_cast<size_t>(g_.num_nodes()));
    guessed_.resize(static_cast<size_t>(g_.num_nodes()));
    for (const Node& n : g_.nodes()) {
      guessing_.assign(n.shape.size(), false);
      std::vector<SymExpr> dims = DimsOf(n);
      if (dims.size() != n.shape.size()) dims = Constants(n.shape);
      guessed_[static_cast<size_t>(n.id)] = guessing_;
      // Only what holds at this binding: an expression that is not the dim is a constant.
      for (size_t d = 0; d < dims.size(); ++d)
        if (dims[d].Evaluate(out_.values) != n.shape[d]) dims[d] = SymExpr::Constant(n.shape[d]);
      out_.dims[static_cast<size_t>(n.id)] = std::move(dims);
    }
    RefineBroadcasts();
    return std::move(out_);
  }

 private:
  const std::vector<SymExpr>& In(const Node& n, size_t i) const { return out_.dims[static_cast<size_t>(n.inputs[i])]; }

  // A broadcast's new dims are guessed by their size; a pointwise op of its shape that reads
  // it knows them from its other inputs (a mask's [batch, 1, 1, seq] broadcast to the scores'
  // [batch, heads, seq, seq]): the broadcast takes those, as its kernels index by them.
  void RefineBroadcasts() {
    std::vector<std::vector<int>> users(static_cast<size_t>(g_.num_nodes()));
    for (const Node& n : g_.nodes())
      for (int input : n.inputs) users[static_cast<size_t>(input)].push_back(n.id);
    for (const Node& n : g_.nodes()) {
      if (n.op != OpCode::kBroadcast) continue;
      std::vector<SymExpr>& dims = out_.dims[static_cast<size_t>(n.id)];
      for (int user : users[static_cast<size_t>(n.id)]) {
        const Node& u = g_.node(user);
        if (u.info().kind != OpKind::Pointwise || u.shape != n.shape) continue;
        for (size_t d = 0; d < dims.size(); ++d)
          if (guessed_[static_cast<size_t>(n.id)][d] && !guessed_[static_cast<size_t>(user)][d]) {
            dims[d] = out_.dims[static_cast<size_t>(user)][d];
            guessed_[static_cast<size_t>(n.id)][d] = false;
          }
      }
    }
  }

  std::vector<SymExpr> Constants(const Shape& shape) const {
    std::vector<SymExpr> dims;
    for (int64_t d : shape) dims.push_back(SymExpr::Constant(d));
    return dims;
  }

  std::vector<SymExpr> DimsOf(const Node& n) const {
    switch (n.op) {
      case OpCode::kParameter: return ParameterDims(n);
      // A constant of a symbol's size is a tensor folded at this binding (positions [1, seq, 1],
      // indices gathering a flattened mask back into [batch, 1, 1, seq]); a weight's dims are
      // taken for a symbol only where they coincide with its value.
      case OpCode::kConstant: return BySymbolValue(n.shape);
      case OpCode::kReshape: return ReshapeDims(n);
      case OpCode::kTranspose: {
        std::vector<SymExpr> dims;
        for (int64_t p : n.attrs.perm) {
          guessing_[dims.size()] = guessed_[static_cast<size_t>(n.inputs[0])].at(static_cast<size_t>(p));
          dims.push_back(In(n, 0).at(static_cast<size_t>(p)));
        }
        return dims;
      }
      case OpCode::kConcat: {
        std::vector<SymExpr> dims = In(n, 0);  // every other dim is the first input's
        SymExpr axis;
        for (size_t i = 0; i < n.inputs.size(); ++i) axis = axis + In(n, i).at(static_cast<size_t>(n.attrs.axis));
        dims.at(static_cast<size_t>(n.attrs.axis)) = axis;
        return dims;
      }
      case OpCode::kMatMul: case OpCode::kBlockScaledMatMul: {
        // Batch dims broadcast, then A's rows and B's columns.
        std::vector<SymExpr> dims = Aligned(n);
        const size_t rank = n.shape.size();
        if (rank >= 2 && In(n, 0).size() >= 2) {
          dims[rank - 2] = In(n, 0)[In(n, 0).size() - 2];
          guessing_[rank - 2] = guessed_[static_cast<size_t>(n.inputs[0])][In(n, 0).size() - 2];
        }
        if (rank >= 1 && !In(n, 1).empty()) {
          dims[rank - 1] = In(n, 1).back();
          guessing_[rank - 1] = guessed_[static_cast<size_t>(n.inputs[1])].back();
        }
        return dims;
      }
      case OpCode::kSlice: {  // a dim sliced whole is the input's
        std::vector<SymExpr> dims = Matched(n);
        for (size_t d = 0; d < dims.size(); ++d)
          if (g_.node(n.inputs[0]).shape[d] == n.shape[d]) {
            dims[d] = In(n, 0)[d];
            guessing_[d] = guessed_[static_cast<size_t>(n.inputs[0])][d];
          }
        return dims;
      }
      case OpCode::kGather: {  // data's dims before the axis, the indices', data's after
        const std::vector<SymExpr>& data = In(n, 0);
        const size_t axis = static_cast<size_t>(n.attrs.axis);
        std::vector<SymExpr> dims(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(axis));
        dims.insert(dims.end(), In(n, 1).begin(), In(n, 1).end());
        dims.insert(dims.end(), data.begin() + static_cast<std::ptrdiff_t>(axis) + 1, data.end());
        if (dims.size() == n.shape.size()) return dims;
        break;
      }
      default: break;
    }
    if (n.info().kind == OpKind::Reduction) {
      std::vector<SymExpr> dims;
      const std::vector<SymExpr>& in = In(n, 0);
      for (size_t d = 0; d < in.size(); ++d) {
        const bool reduced = std::find(n.attrs.axes.begin(), n.attrs.axes.end(), static_cast<int64_t>(d)) != n.attrs.axes.end();
        if (!reduced) dims.push_back(in[d]);
        else if (n.attrs.keepdims) dims.push_back(SymExpr::Constant(1));
      }
      if (dims.size() == n.shape.size()) return dims;
    }
    if (n.info().kind == OpKind::Pointwise || n.op == OpCode::kBroadcast) return Aligned(n);
    return Matched(n);
  }

  std::vector<SymExpr> BySymbolValue(const Shape& shape) const {
    std::vector<SymExpr> dims;
    for (int64_t size : shape) dims.push_back(OneSymbolOfValue(size).value_or(SymExpr::Constant(size)));
    return dims;
  }

  std::vector<SymExpr> ParameterDims(const Node& n) const {
    std::vector<SymExpr> dims = Constants(n.shape);
    auto named = g_.symbolic_inputs().dims.find(n.name);
    if (named == g_.symbolic_inputs().dims.end() || named->second.size() != n.shape.size()) return dims;
    for (size_t d = 0; d < dims.size(); ++d)
      if (auto id = id_of_.find(named->second[d]); id != id_of_.end()) dims[d] = SymExpr::Symbol(id->second);
    return dims;
  }

  // Broadcasting (aligned at the last dim): an output dim is an input's dim of the same size
  // at its place — one an input derives rather than guessed by its size (a scalar broadcast to
  // the scores' shape guesses a head count of 4 is the batch of 4; the scores know better), a
  // symbolic one before a constant — and one broadcast from 1 is found by size.
  std::vector<SymExpr> Aligned(const Node& n) const {
    std::vector<SymExpr> dims;
    const size_t rank = n.shape.size();
    for (size_t d = 0; d < rank; ++d) {
      std::optional<SymExpr> found;
      int found_rank = -1;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const std::vector<SymExpr>& in = In(n, i);
        if (in.size() > rank || d < rank - in.size()) continue;
        const size_t at = d - (rank - in.size());
        if (g_.node(n.inputs[i]).shape[at] != n.shape[d]) continue;
        const bool guessed = guessed_[static_cast<size_t>(n.inputs[i])].at(at);
        const int rank_of_this = (guessed ? 0 : 2) + (in[at].IsConstant() ? 0 : 1);
        if (rank_of_this > found_rank) {
          found = in[at];
          found_rank = rank_of_this;
          guessing_[d] = guessed;
        }
      }
      if (!found) guessing_[d] = true;
      dims.push_back(found ? *found : BySize(n, n.shape[d]));
    }
    return dims;
  }

  // Any other op: an output dim takes the first input dim of its size that is symbolic, else
  // the one symbol of its value (an iota of the sequence's length, a slice of a constant mask
  // to it), else its value — its value wherever an input has a static dim of that size.
  std::vector<SymExpr> Matched(const Node& n) const {
    std::vector<SymExpr> dims;
    for (int64_t size : n.shape) dims.push_back(BySize(n, size));
    guessing_.assign(dims.size(), true);
    return dims;
  }

  SymExpr BySize(const Node& n, int64_t size) const {
    if (static_sizes_.count(size)) return SymExpr::Constant(size);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const Node& input = g_.node(n.inputs[i]);
      for (size_t d = 0; d < input.shape.size(); ++d)
        if (input.shape[d] == size && !In(n, i)[d].IsConstant()) return In(n, i)[d];
    }
    return OneSymbolOfValue(size).value_or(SymExpr::Constant(size));
  }

  // The one symbol of this value, where no input has a static dim of it.
  std::optional<SymExpr> OneSymbolOfValue(int64_t size) const {
    if (size <= 1 || static_sizes_.count(size) || std::count(out_.values.begin(), out_.values.end(), size) != 1) return std::nullopt;
    return SymExpr::Symbol(static_cast<int>(std::find(out_.values.begin(), out_.values.end(), size) - out_.values.begin()));
  }

  // A reshape keeps the element order: the output's dims are runs whose product is the
  // product of a run of the input's ([B·T, 768] -> [B, T, 12, 64]: B·T, then 768). A run of
  // one dim takes the input run's product; a run of several takes symbols by value, checked
  // against the product.
  std::vector<SymExpr> ReshapeDims(const Node& n) const {
    const Node& input = g_.node(n.inputs[0]);
    std::vector<int64_t> in_prefix = {1};
    std::vector<SymExpr> in_sym_prefix = {SymExpr::Constant(1)};
    for (size_t d = 0; d < input.shape.size(); ++d) {
      in_prefix.push_back(in_prefix.back() * input.shape[d]);
      in_sym_prefix.push_back(in_sym_prefix.back() * In(n, 0)[d]);
    }
    std::vector<SymExpr> dims = Constants(n.shape);
    int64_t out_prefix = 1;
    SymExpr run_start_prefix = SymExpr::Constant(1);
    size_t run_start = 0;
    for (size_t d = 0; d < n.shape.size(); ++d) {
      out_prefix *= n.shape[d];
      // The longest input prefix of this size (input dims of 1 join the run before them).
      size_t k = in_prefix.size();
      while (k-- > 1)
        if (in_prefix[k] == out_prefix) break;
      if (k == 0 || out_prefix == 0) continue;
      std::optional<SymExpr> run = in_sym_prefix[k].DividedBy(run_start_prefix);
      if (run) AssignRun(n, run_start, d + 1, *run, dims);
      run_start_prefix = in_sym_prefix[k];
      run_start = d + 1;
    }
    return dims;
  }

  void AssignRun(const Node& n, size_t begin, size_t end, const SymExpr& product, std::vector<SymExpr>& dims) const {
    if (end - begin == 1) {
      dims[begin] = product;
      return;
    }
    std::vector<SymExpr> guess(dims.begin() + static_cast<std::ptrdiff_t>(begin), dims.begin() + static_cast<std::ptrdiff_t>(end));
    SymExpr guessed = SymExpr::Constant(1);
    for (size_t d = 0; d < guess.size(); ++d) {
      if (std::optional<SymExpr> s = OneSymbolOfValue(n.shape[begin + d])) guess[d] = *s;
      guessed = guessed * guess[d];
    }
    if (guessed == product) std::copy(guess.begin(), guess.end(), dims.begin() + static_cast<std::ptrdiff_t>(begin));
  }

  const Graph& g_;
  std::map<std::string, int> id_of_;
  std::set<int64_t> static_sizes_;  // the inputs' static dims: sizes a guess by value leaves constant
  SymbolicShapes out_;
  // Per node, per dim: taken by its size from whatever had that size, not derived through
  // the op; and the same for the node being inferred.
  std::vector<std::vector<bool>> guessed_;
  mutable std::vector<bool> guessing_;
};

}  // namespace

SymbolicShapes InferSymbolicShapes(const Graph& graph) { return Inference(graph).Run(); }

}  // namespace tilefuse
