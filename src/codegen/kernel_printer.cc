#include "codegen/kernel_printer.h"

#include <fmt/format.h>

namespace tilefuse {

namespace {

const std::vector<std::string> kVars = {"i0", "i1"};

// The right-hand side of value `v`'s line, without its type.
std::string Definition(const ScalarValue& v) {
  switch (v.kind) {
    case ScalarValue::Kind::kLoad: return fmt::format("load b{}[{}]", v.buffer, PrintIndex(v.index, kVars));
    case ScalarValue::Kind::kConstant: return fmt::format("constant {}", v.constant);
    case ScalarValue::Kind::kIndex: return fmt::format("index {}", PrintIndex(v.index, kVars));
    case ScalarValue::Kind::kRandom: return fmt::format("random seed {} at {}", v.seed, PrintIndex(v.index, kVars));
    case ScalarValue::Kind::kAccumulator: return fmt::format("accumulator r{}", v.reduction);
    case ScalarValue::Kind::kOp: break;
  }
  std::string text(OpName(v.op));
  for (size_t a = 0; a < v.args.size(); ++a) text += fmt::format("{}%v{}", a ? ", " : " ", v.args[a]);
  return text;
}

}  // namespace

std::string PrintKernel(const Kernel& k) {
  std::string out = fmt::format("kernel {} {}: outer {} x inner {}\n", k.name, GroupKindName(k.kind), k.outer, k.inner);
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    const KernelBuffer& buffer = k.buffers[b];
    out += fmt::format("b{} = %{} {}[{}] {}\n", b, buffer.node, DTypeName(buffer.dtype), buffer.elements, buffer.is_output ? "out" : "in");
  }
  for (size_t id = 0; id < k.values.size(); ++id) {
    const ScalarValue& v = k.values[id];
    out += fmt::format("%v{} = {} : {}{}\n", id, Definition(v), DTypeName(v.dtype), v.inner ? " [inner]" : "");
  }
  for (size_t r = 0; r < k.reductions.size(); ++r) {
    const KernelReduction& red = k.reductions[r];
    out += fmt::format("r{} = {} %v{} over {} : {}\n", r, OpName(red.op), red.value, red.count, DTypeName(red.dtype));
  }
  for (const KernelStore& s : k.stores) out += fmt::format("store b{}[{}] = %v{}\n", s.buffer, PrintIndex(s.index, kVars), s.value);
  return out;
}

}  // namespace tilefuse
