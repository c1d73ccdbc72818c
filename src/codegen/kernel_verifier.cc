#include "codegen/kernel_verifier.h"

#include <algorithm>
#include <fmt/format.h>

namespace tilefuse {

namespace {

// The largest value id an index gathers through (-1: none).
int LargestGathered(const Index& index) {
  if (!index) return -1;
  int here = index->kind == IndexExpr::Kind::kValue ? static_cast<int>(index->value) : -1;
  return std::max({here, LargestGathered(index->a), LargestGathered(index->b)});
}

// Why `v` (value `id` of `k`) breaks an invariant, or "".
std::string ValueProblem(const Kernel& k, int id) {
  const ScalarValue& v = k.values[id];
  const int buffers = static_cast<int>(k.buffers.size());
  if (LargestGathered(v.index) >= id) return "its index gathers through a later value";
  switch (v.kind) {
    case ScalarValue::Kind::kLoad:
      if (v.buffer < 0 || v.buffer >= buffers) return fmt::format("loads buffer b{} of {}", v.buffer, buffers);
      if (!v.index) return "loads without an index";
      return "";
    case ScalarValue::Kind::kOp: {
      const int arity = GetOpInfo(v.op).arity;
      if (arity >= 0 && static_cast<int>(v.args.size()) != arity)
        return fmt::format("{} takes {} arguments, has {}", OpName(v.op), arity, v.args.size());
      for (int arg : v.args)
        if (arg < 0 || arg >= id) return fmt::format("argument %v{} does not precede it", arg);
      return "";
    }
    case ScalarValue::Kind::kAccumulator:
      if (v.reduction < 0 || v.reduction >= static_cast<int>(k.reductions.size()))
        return fmt::format("reads reduction r{} of {}", v.reduction, k.reductions.size());
      if (k.reductions[v.reduction].value >= id) return "reads a reduction of a later value";
      return "";
    case ScalarValue::Kind::kIndex: case ScalarValue::Kind::kRandom:
      return v.index ? "" : "has no index";
    case ScalarValue::Kind::kConstant: return "";
  }
  return "has an unknown kind";
}

}  // namespace

Status VerifyKernel(const Kernel& k) {
  auto fail = [&](const std::string& what) { return Internal(fmt::format("kernel {} is malformed: {}", k.name, what)); };
  if (k.outer < 0 || k.inner < 1) return fail(fmt::format("loops outer {} x inner {}", k.outer, k.inner));
  const int values = static_cast<int>(k.values.size());
  for (int id = 0; id < values; ++id)
    if (std::string problem = ValueProblem(k, id); !problem.empty()) return fail(fmt::format("%v{} {}", id, problem));
  for (size_t r = 0; r < k.reductions.size(); ++r)
    if (k.reductions[r].value < 0 || k.reductions[r].value >= values)
      return fail(fmt::format("r{} reduces %v{} of {} values", r, k.reductions[r].value, values));
  std::vector<bool> written(k.buffers.size(), false);
  for (const KernelStore& s : k.stores) {
    if (s.buffer < 0 || s.buffer >= static_cast<int>(k.buffers.size())) return fail(fmt::format("a store to buffer b{}", s.buffer));
    if (!k.buffers[s.buffer].is_output) return fail(fmt::format("a store to input buffer b{}", s.buffer));
    if (s.value < 0 || s.value >= values) return fail(fmt::format("a store of %v{} of {} values", s.value, values));
    if (!s.index) return fail(fmt::format("a store to b{} without an index", s.buffer));
    written[s.buffer] = true;
  }
  for (size_t b = 0; b < k.buffers.size(); ++b)
    if (k.buffers[b].is_output && !written[b]) return fail(fmt::format("output buffer b{} (%{}) is never stored", b, k.buffers[b].node));
  return Status::Ok();
}

}  // namespace tilefuse
