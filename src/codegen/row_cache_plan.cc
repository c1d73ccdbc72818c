#include "codegen/row_cache_plan.h"

#include <functional>

namespace tilefuse {

namespace {

bool IsTranscendental(OpCode op) {
  switch (op) {
    case OpCode::kExp: case OpCode::kLog: case OpCode::kTanh: case OpCode::kSigmoid: case OpCode::kErf:
    case OpCode::kSin: case OpCode::kCos: case OpCode::kAsin: case OpCode::kAcos: case OpCode::kAtan: case OpCode::kAtan2:
    case OpCode::kPow: case OpCode::kMod: case OpCode::kFMod:
      return true;
    default:
      return false;
  }
}

void CollectIndexValues(const Index& index, std::vector<int>& out) {
  if (!index) return;
  if (index->kind == IndexExpr::Kind::kValue) out.push_back(static_cast<int>(index->value));
  CollectIndexValues(index->a, out);
  CollectIndexValues(index->b, out);
}

// The values a pass computes per element, from its roots; marks values an earlier pass
// computed and that are expensive as cached (and stops there: the buffer has them).
class Planner {
 public:
  explicit Planner(const Kernel& k) : k_(k), first_pass_(k.values.size(), -1) {
    plan_.num_passes = static_cast<int>(k.reductions.size()) + 1;
    plan_.buffer_of_value.assign(k.values.size(), -1);
    plan_.writer_pass.assign(k.values.size(), -1);
  }

  RowCachePlan Run() {
    for (size_t v = 0; v < k_.values.size(); ++v)
      if (FillsInPhiloxBlocks(k_, static_cast<int>(v))) {
        plan_.buffer_of_value[v] = static_cast<int>(plan_.buffer_values.size());
        plan_.buffer_values.push_back(static_cast<int>(v));
      }
    for (int pass = 0; pass < plan_.num_passes; ++pass) {
      std::vector<bool> visited(k_.values.size(), false);
      for (int root : Roots(pass)) Visit(root, pass, visited);
    }
    return std::move(plan_);
  }

 private:
  std::vector<int> Roots(int pass) const {
    if (pass < static_cast<int>(k_.reductions.size())) return {k_.reductions[pass].value};
    std::vector<int> roots;
    for (const KernelStore& s : k_.stores)
      if (UsesVar(s.index, 1)) roots.push_back(s.value);
    return roots;
  }

  void Visit(int v, int pass, std::vector<bool>& visited) {
    if (!k_.values[v].inner || visited[v]) return;
    visited[v] = true;
    if (plan_.ReadsCache(v, pass)) return;
    int first = first_pass_[v];
    if (first >= 0 && first < pass && IsExpensiveToRecompute(k_, v, plan_.buffer_of_value)) {
      plan_.buffer_of_value[v] = static_cast<int>(plan_.buffer_values.size());
      plan_.buffer_values.push_back(v);
      plan_.writer_pass[v] = first;
      return;
    }
    if (first < 0) first_pass_[v] = pass;
    for (int d : ValueDependencies(k_.values[v])) Visit(d, pass, visited);
  }

  const Kernel& k_;
  RowCachePlan plan_;
  std::vector<int> first_pass_;  // the first pass that computes each value
};

}  // namespace

std::vector<int> ValueDependencies(const ScalarValue& value) {
  std::vector<int> deps = value.args;
  CollectIndexValues(value.index, deps);
  return deps;
}

bool IsExpensiveToRecompute(const Kernel& kernel, int value, const std::vector<int>& buffer_of_value) {
  // Memoised per call: values are SSA, so a value's arguments have smaller ids.
  std::vector<int8_t> expensive(value + 1, -1);
  std::function<bool(int)> check = [&](int v) -> bool {
    if (expensive[v] >= 0) return expensive[v];
    if (!buffer_of_value.empty() && buffer_of_value[v] >= 0) return (expensive[v] = false);  // a buffer load
    const ScalarValue& sv = kernel.values[v];
    bool result = sv.kind == ScalarValue::Kind::kRandom || (sv.kind == ScalarValue::Kind::kOp && IsTranscendental(sv.op));
    if (sv.inner)
      for (int d : ValueDependencies(sv))
        if (!result && kernel.values[d].inner) result = check(d);
    expensive[v] = result;
    return result;
  };
  if (check(value)) return true;
  // Or simply long: a depthwise convolution written tap by tap (25 taps, each an activation
  // of the value it reads and a bounds test) costs hundreds of operations per element, which
  // a layer norm's or a pooled squeeze's second pass would repeat (MobileNetV3's fused
  // depthwise + squeeze kernels spent most of their time recomputing it).
  constexpr int kLongComputation = 48;
  std::vector<bool> seen(value + 1, false);
  std::vector<int> stack = {value};
  int ops = 0;
  while (!stack.empty() && ops <= kLongComputation) {
    int v = stack.back();
    stack.pop_back();
    if (seen[v] || (!buffer_of_value.empty() && buffer_of_value[v] >= 0)) continue;
    seen[v] = true;
    const ScalarValue& sv = kernel.values[v];
    if (!sv.inner) continue;
    if (sv.kind == ScalarValue::Kind::kOp || sv.kind == ScalarValue::Kind::kLoad) ++ops;
    for (int d : ValueDependencies(sv)) stack.push_back(d);
  }
  return ops > kLongComputation;
}

bool FillsInPhiloxBlocks(const Kernel& kernel, int value) {
  const ScalarValue& v = kernel.values[value];
  AffineIndex a;
  return v.kind == ScalarValue::Kind::kRandom && kernel.inner % 4 == 0 && AsAffine(v.index, &a) && a.c1 == 1 &&
         a.c0 % 4 == 0 && a.offset % 4 == 0;
}

RowCachePlan PlanRowCache(const Kernel& kernel) { return Planner(kernel).Run(); }

RowCachePlan RecomputeRowValues(const Kernel& kernel) {
  RowCachePlan plan;
  plan.num_passes = static_cast<int>(kernel.reductions.size()) + 1;
  plan.buffer_of_value.assign(kernel.values.size(), -1);
  plan.writer_pass.assign(kernel.values.size(), -1);
  return plan;
}

}  // namespace tilefuse
