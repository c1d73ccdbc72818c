// Einsum, lowered to primitives. Every operand dim gets a label (a letter, or one of the
// dims an ellipsis stands for, right-aligned across operands as numpy broadcasts them),
// then:
//
//   1. a label repeated within one operand takes the diagonal (the two dims moved last,
//      flattened and sliced with step n + 1), so traces and "ii->i" work;
//   2. ellipsis dims of size 1 are broadcast to the size the other operands give them;
//   3. operands are contracted left to right, two at a time: labels both share and a
//      later operand or the output needs are batch dims, labels both share and nothing
//      else needs are contracted, the rest are kept —
//
//        A -> [batch, a_only, contracted] -> [B, M, K]
//        B -> [batch, contracted, b_only] -> [B, K, N]      matmul (a broadcast multiply
//                                                            when nothing is contracted)
//
//      and a label only one operand has and nothing else needs is summed out first;
//   4. labels the output lacks are summed out and the rest transposed to its order.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <string>

#include "frontend/onnx/handler_util.h"
#include "frontend/onnx/op_registry.h"
#include "frontend/onnx/tensor_proto.h"

namespace tilefuse::onnx_import {

namespace {

// Letters are labels 0..127 (their char codes); ellipsis dim e is kEllipsisLabel + e.
constexpr int kEllipsisLabel = 1000;

using Labels = std::vector<int>;

struct Operand {
  Value value;
  Labels labels;  // one per dim
};

// One term of the equation: its letters in order, and where the ellipsis sits among
// them (-1: none).
struct Term {
  std::string letters;
  int ellipsis_at = -1;
};

StatusOr<Term> ParseTerm(std::string_view text) {
  Term term;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '.') {
      if (term.ellipsis_at >= 0 || text.substr(i, 3) != "...")
        return InvalidArgument(fmt::format("term '{}' has a '.' that is not one ellipsis '...'", text));
      term.ellipsis_at = static_cast<int>(term.letters.size());
      i += 2;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      term.letters.push_back(c);
    } else {
      return InvalidArgument(fmt::format("term '{}' has '{}', which is not a letter or '...'", text, c));
    }
  }
  return term;
}

// The labels of a term over `ellipsis_rank` dims (of `max_ellipsis` in all).
Labels ExpandTerm(const Term& term, int64_t ellipsis_rank, int64_t max_ellipsis) {
  Labels labels;
  for (int i = 0; i <= static_cast<int>(term.letters.size()); ++i) {
    if (i == term.ellipsis_at)
      for (int64_t e = max_ellipsis - ellipsis_rank; e < max_ellipsis; ++e) labels.push_back(kEllipsisLabel + static_cast<int>(e));
    if (i < static_cast<int>(term.letters.size())) labels.push_back(term.letters[i]);
  }
  return labels;
}

// Parses `equation` against the operands' ranks: each operand's labels and the output's.
Status ParseEquation(std::string equation, std::vector<Operand>& operands, Labels& output) {
  equation.erase(std::remove(equation.begin(), equation.end(), ' '), equation.end());
  size_t arrow = equation.find("->");
  std::string inputs = equation.substr(0, arrow);
  std::vector<Term> terms;
  for (size_t start = 0;;) {
    size_t comma = inputs.find(',', start);
    ASSIGN_OR_RETURN(Term term, ParseTerm(std::string_view(inputs).substr(start, comma - start)));
    terms.push_back(term);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != operands.size())
    return InvalidArgument(fmt::format("the equation has {} input terms for {} inputs", terms.size(), operands.size()));
  int64_t max_ellipsis = 0;
  std::vector<int64_t> ellipsis_ranks;
  for (size_t i = 0; i < terms.size(); ++i) {
    auto rank = static_cast<int64_t>(operands[i].labels.size()), letters = static_cast<int64_t>(terms[i].letters.size());
    if (terms[i].ellipsis_at < 0 ? rank != letters : rank < letters)
      return InvalidArgument(fmt::format("term {} has {} labels for an input of rank {}", i, letters, rank));
    ellipsis_ranks.push_back(rank - letters);
    max_ellipsis = std::max(max_ellipsis, rank - letters);
  }
  for (size_t i = 0; i < terms.size(); ++i) operands[i].labels = ExpandTerm(terms[i], ellipsis_ranks[i], max_ellipsis);
  if (arrow != std::string::npos) {
    ASSIGN_OR_RETURN(Term out, ParseTerm(std::string_view(equation).substr(arrow + 2)));
    output = ExpandTerm(out, max_ellipsis, max_ellipsis);
  } else {  // implicit: ellipsis dims, then the letters used once, in alphabetical order
    std::map<int, int> uses;
    for (const Term& t : terms)
      for (char c : t.letters) ++uses[c];
    output = ExpandTerm(Term{"", 0}, max_ellipsis, max_ellipsis);
    for (auto [label, count] : uses)
      if (count == 1) output.push_back(label);
  }
  for (size_t i = 0; i < output.size(); ++i) {
    bool in_inputs = std::any_of(operands.begin(), operands.end(), [&](const Operand& o) {
      return std::count(o.labels.begin(), o.labels.end(), output[i]) > 0;
    });
    if (std::count(output.begin(), output.end(), output[i]) > 1 || !in_inputs)
      return InvalidArgument("each output label must appear once in the output and in some input");
  }
  return Status::Ok();
}

std::string LabelName(int label) {
  return label >= kEllipsisLabel ? fmt::format("ellipsis dim {}", label - kEllipsisLabel)
                                 : fmt::format("'{}'", static_cast<char>(label));
}

Value Permute(GraphBuilder& b, Value x, const std::vector<int64_t>& perm) {
  std::vector<int64_t> identity(perm.size());
  std::iota(identity.begin(), identity.end(), 0);
  return perm == identity ? x : b.Transpose(x, perm);
}

// Moves the dims with `labels` (in that order) to the end, the others keeping theirs.
Operand MoveLast(GraphBuilder& b, const Operand& x, const Labels& labels) {
  std::vector<int64_t> perm;
  Operand moved;
  for (size_t d = 0; d < x.labels.size(); ++d) {
    if (std::find(labels.begin(), labels.end(), x.labels[d]) != labels.end()) continue;
    perm.push_back(static_cast<int64_t>(d));
    moved.labels.push_back(x.labels[d]);
  }
  for (int label : labels) {
    perm.push_back(std::find(x.labels.begin(), x.labels.end(), label) - x.labels.begin());
    moved.labels.push_back(label);
  }
  moved.value = Permute(b, x.value, perm);
  return moved;
}

// Takes the diagonal of the first label repeated within the operand; false when none is.
// (LabelSizes has checked that the repeated dims have one size.)
bool TakeOneDiagonal(GraphBuilder& b, Operand& x) {
  for (size_t d = 0; d < x.labels.size(); ++d) {
    auto again = std::find(x.labels.begin() + static_cast<int64_t>(d) + 1, x.labels.end(), x.labels[d]);
    if (again == x.labels.end()) continue;
    int label = x.labels[d];
    auto first = static_cast<int64_t>(d), second = static_cast<int64_t>(again - x.labels.begin());
    std::vector<int64_t> perm;
    Labels rest;
    for (int64_t e = 0; e < static_cast<int64_t>(x.labels.size()); ++e) {
      if (e == first || e == second) continue;
      perm.push_back(e);
      rest.push_back(x.labels[e]);
    }
    perm.push_back(first);
    perm.push_back(second);
    Shape shape = b.shape(x.value);
    int64_t n = shape[d];
    Shape flat;
    for (size_t e = 0; e < rest.size(); ++e) flat.push_back(shape[perm[e]]);
    flat.push_back(n * n);
    auto last = static_cast<int64_t>(rest.size());
    x.value = b.Slice(b.Reshape(Permute(b, x.value, perm), flat), {0}, {n * n}, {last}, {n + 1});
    rest.push_back(label);
    x.labels = rest;
    return true;
  }
  return false;
}

Operand SumOut(GraphBuilder& b, const Operand& x, const std::function<bool(int)>& needed) {
  std::vector<int64_t> axes;
  Operand kept;
  for (size_t d = 0; d < x.labels.size(); ++d) {
    if (needed(x.labels[d])) kept.labels.push_back(x.labels[d]);
    else axes.push_back(static_cast<int64_t>(d));
  }
  kept.value = axes.empty() ? x.value : b.Reduce(OpCode::kReduceSum, x.value, axes, false);
  return kept;
}

bool Has(const Labels& labels, int label) { return std::find(labels.begin(), labels.end(), label) != labels.end(); }

int64_t SizeOf(GraphBuilder& b, const Operand& x, const Labels& labels) {
  Shape shape = b.shape(x.value);
  int64_t size = 1;
  for (int label : labels) size *= shape[std::find(x.labels.begin(), x.labels.end(), label) - x.labels.begin()];
  return size;
}

// Contracts two operands; `keep` says which labels a later operand or the output needs.
// InvalidArgument when the result would be too large (the operands are not).
StatusOr<Operand> Contract(GraphBuilder& b, Operand x, Operand y, const std::function<bool(int)>& keep) {
  x = SumOut(b, x, [&](int l) { return keep(l) || Has(y.labels, l); });
  y = SumOut(b, y, [&](int l) { return keep(l) || Has(x.labels, l); });
  if (!b.ok()) return x;
  Labels batch, contracted, x_only, y_only;
  for (int l : x.labels) (Has(y.labels, l) ? (keep(l) ? batch : contracted) : x_only).push_back(l);
  for (int l : y.labels)
    if (!Has(x.labels, l)) y_only.push_back(l);
  Labels x_order = batch, y_order = batch;
  x_order.insert(x_order.end(), x_only.begin(), x_only.end());
  x_order.insert(x_order.end(), contracted.begin(), contracted.end());
  y_order.insert(y_order.end(), contracted.begin(), contracted.end());
  y_order.insert(y_order.end(), y_only.begin(), y_only.end());
  int64_t batches = SizeOf(b, x, batch), m = SizeOf(b, x, x_only), k = SizeOf(b, x, contracted), n = SizeOf(b, y, y_only);
  Shape x_shape = {m, k}, y_shape = {k, n};
  if (!batch.empty()) x_shape.insert(x_shape.begin(), batches), y_shape.insert(y_shape.begin(), batches);
  Operand out;
  out.labels = batch;
  out.labels.insert(out.labels.end(), x_only.begin(), x_only.end());
  out.labels.insert(out.labels.end(), y_only.begin(), y_only.end());
  Shape out_shape;
  for (int l : out.labels) out_shape.push_back(Has(x.labels, l) ? SizeOf(b, x, {l}) : SizeOf(b, y, {l}));
  RETURN_IF_ERROR(CheckShapeSize(out_shape, kMaxValueElements, "an intermediate product"));
  Value x_matrix = b.Reshape(MoveLast(b, x, x_order).value, x_shape);
  Value y_matrix = b.Reshape(MoveLast(b, y, y_order).value, y_shape);
  Value product = contracted.empty() ? b.Mul(x_matrix, y_matrix) : b.MatMul(x_matrix, y_matrix);
  out.value = b.Reshape(product, out_shape);
  return out;
}

// The size of every label; ellipsis dims of size 1 broadcast, letters must agree.
StatusOr<std::map<int, int64_t>> LabelSizes(GraphBuilder& b, const std::vector<Operand>& operands) {
  std::map<int, int64_t> sizes;
  for (size_t i = 0; i < operands.size(); ++i) {
    Shape shape = b.shape(operands[i].value);
    for (size_t d = 0; d < shape.size(); ++d) {
      int label = operands[i].labels[d];
      auto [it, added] = sizes.emplace(label, shape[d]);
      if (added || it->second == shape[d]) continue;
      bool broadcasts = label >= kEllipsisLabel && (it->second == 1 || shape[d] == 1);
      if (!broadcasts)
        return InvalidArgument(fmt::format("label {} has size {} in input {} but {} elsewhere", LabelName(label), shape[d],
                                           i, it->second));
      if (it->second == 1) it->second = shape[d];  // 1 broadcasts to any size, 0 included
    }
  }
  return sizes;
}

Status ImportEinsum(NodeContext& ctx) {
  GraphBuilder& b = ctx.b();
  if (!ctx.HasAttr("equation")) return InvalidArgument("attribute 'equation' is missing");
  std::vector<Operand> operands;
  for (Value v : ctx.Inputs()) {
    if (b.dtype(v) != b.dtype(ctx.Input(0)) || b.dtype(v) == DType::kBool)
      return InvalidArgument(fmt::format("inputs must share one numeric dtype, got {} and {}", DTypeName(b.dtype(ctx.Input(0))),
                                         DTypeName(b.dtype(v))));
    operands.push_back({v, Labels(b.rank(v))});
  }
  Labels output;
  RETURN_IF_ERROR(ParseEquation(ctx.String("equation", ""), operands, output));
  ASSIGN_OR_RETURN(auto sizes, LabelSizes(b, operands));
  for (Operand& x : operands)
    while (b.ok() && TakeOneDiagonal(b, x)) {
    }
  if (!b.ok()) return Status::Ok();  // the builder's error names the node
  for (Operand& x : operands) {
    Shape target;
    for (int l : x.labels) target.push_back(sizes.at(l));
    RETURN_IF_ERROR(CheckShapeSize(target, kMaxValueElements, "an input broadcast over the ellipsis"));
    x.value = b.BroadcastTo(x.value, target);
  }
  if (!b.ok()) return Status::Ok();
  auto needed_after = [&](size_t first, int label) {
    if (Has(output, label)) return true;
    for (size_t i = first; i < operands.size(); ++i)
      if (Has(operands[i].labels, label)) return true;
    return false;
  };
  Operand acc = operands[0];
  for (size_t i = 1; i < operands.size() && b.ok(); ++i) {
    ASSIGN_OR_RETURN(acc, Contract(b, acc, operands[i], [&](int l) { return needed_after(i + 1, l); }));
  }
  acc = SumOut(b, acc, [&](int l) { return Has(output, l); });
  if (!b.ok()) return Status::Ok();
  std::vector<int64_t> perm;
  for (int l : output) perm.push_back(std::find(acc.labels.begin(), acc.labels.end(), l) - acc.labels.begin());
  ctx.SetOutput(0, Permute(b, acc.value, perm));
  return Status::Ok();
}

}  // namespace

void RegisterEinsumOps(OpRegistry& r) { r.Add("Einsum", ImportEinsum, 1, -1); }

}  // namespace tilefuse::onnx_import
