#include "codegen/cpp_emitter.h"

#include <map>
#include <fmt/format.h>

#include "codegen/cpp_prelude.h"
#include "codegen/cpp_value_expression.h"
#include "codegen/emit_util.h"

namespace tilefuse {

namespace {

class CppEmitter {
 public:
  explicit CppEmitter(const Kernel& k) : k_(k), emitted_(k.values.size(), false) {
    for (size_t v = 0; v < k.values.size(); ++v)
      if (k.values[v].kind == ScalarValue::Kind::kAccumulator) accumulator_value_[k.values[v].reduction] = static_cast<int>(v);
  }

  std::string Run() {
    out_ = fmt::format("\nextern \"C\" void {}(void* const* buffers) {{\n", k_.name);
    for (size_t b = 0; b < k_.buffers.size(); ++b) {
      const KernelBuffer& buf = k_.buffers[b];
      out_ += fmt::format("  {0}{1}* __restrict__ b{2} = static_cast<{0}{1}*>(buffers[{2}]);  // %{3} {4}[{5}]\n",
                          buf.is_output ? "" : "const ", StorageType(buf.dtype), b, buf.node, DTypeName(buf.dtype), buf.elements);
    }
    out_ += fmt::format("#pragma omp parallel for schedule(static)\n  for (int64_t i0 = 0; i0 < {}; ++i0) {{\n", k_.outer);
    for (size_t r = 0; r < k_.reductions.size(); ++r) EmitReduction(static_cast<int>(r));
    EmitStores(false);
    EmitStores(true);
    out_ += "  }\n}\n";
    return out_;
  }

 private:
  std::string Name(int v) const { return fmt::format("v{}", v); }

  std::string Expression(const ScalarValue& v) { return CppValueExpression(v, {"i0", "i1"}); }

  // Emits `v` and, first, everything it needs at the current scope. Outer values
  // (no inner-loop dependence) are emitted once per outer iteration; inner values are
  // emitted afresh in each inner loop (`inner_emitted` is that loop's set).
  void Emit(int v, std::vector<bool>* inner_emitted, const std::string& indent) {
    const ScalarValue& value = k_.values[v];
    std::vector<bool>& done = value.inner ? *inner_emitted : emitted_;
    if (done[v]) return;
    for (int a : value.args) Emit(a, inner_emitted, indent);
    if (value.index) EmitIndexValues(value.index, inner_emitted, indent);
    done[v] = true;
    out_ += fmt::format("{}const {} {} = {};\n", indent, ComputeType(value.dtype), Name(v), Expression(value));
  }

  // Gather indices are SSA values used inside index expressions.
  void EmitIndexValues(const Index& index, std::vector<bool>* inner_emitted, const std::string& indent) {
    if (!index) return;
    if (index->kind == IndexExpr::Kind::kValue) Emit(static_cast<int>(index->value), inner_emitted, indent);
    EmitIndexValues(index->a, inner_emitted, indent);
    EmitIndexValues(index->b, inner_emitted, indent);
  }

  // Outer values a set of inner values depends on, emitted before the inner loop opens.
  void EmitOuterDeps(int v, std::vector<bool>& seen) {
    if (seen[v]) return;
    seen[v] = true;
    const ScalarValue& value = k_.values[v];
    if (!value.inner) {
      Emit(v, nullptr, "    ");
      return;
    }
    for (int a : value.args) EmitOuterDeps(a, seen);
    std::vector<const IndexExpr*> stack = {value.index.get()};
    while (!stack.empty()) {
      const IndexExpr* e = stack.back();
      stack.pop_back();
      if (!e) continue;
      if (e->kind == IndexExpr::Kind::kValue) EmitOuterDeps(static_cast<int>(e->value), seen);
      stack.push_back(e->a.get());
      stack.push_back(e->b.get());
    }
  }

  void EmitReduction(int r) {
    const KernelReduction& red = k_.reductions[r];
    bool wide = IsFloat(red.dtype) && red.dtype != DType::kF64 && red.op != OpCode::kReduceMax && red.op != OpCode::kReduceMin;
    std::string acc_type = wide ? "double" : ComputeType(red.dtype);
    std::vector<bool> seen(k_.values.size(), false);
    EmitOuterDeps(red.value, seen);
    std::string init;
    switch (red.op) {
      case OpCode::kReduceMax: init = IsInteger(red.dtype) ? "std::numeric_limits<int64_t>::min()" : "-INFINITY"; break;
      case OpCode::kReduceMin: init = IsInteger(red.dtype) ? "std::numeric_limits<int64_t>::max()" : "INFINITY"; break;
      case OpCode::kReduceProd: init = "1"; break;
      default: init = "0";
    }
    out_ += fmt::format("    {} acc{} = {};\n    for (int64_t i1 = 0; i1 < {}; ++i1) {{\n", acc_type, r, init, red.count);
    std::vector<bool> inner(k_.values.size(), false);
    Emit(red.value, &inner, "      ");
    std::string v = Name(red.value);
    switch (red.op) {
      case OpCode::kReduceMax: out_ += fmt::format("      acc{0} = max_nan(acc{0}, ({1}){2});\n", r, acc_type, v); break;
      case OpCode::kReduceMin: out_ += fmt::format("      acc{0} = min_nan(acc{0}, ({1}){2});\n", r, acc_type, v); break;
      case OpCode::kReduceProd: out_ += fmt::format("      acc{} *= {};\n", r, v); break;
      default: out_ += fmt::format("      acc{} += {};\n", r, v);
    }
    out_ += "    }\n";
    int value = accumulator_value_.at(r);
    std::string finished = red.op == OpCode::kReduceMean ? fmt::format("acc{} / {}", r, red.count) : fmt::format("acc{}", r);
    out_ += fmt::format("    const {} {} = ({})({});\n", ComputeType(red.dtype), Name(value), ComputeType(red.dtype), finished);
    emitted_[value] = true;
  }

  void EmitStores(bool inner) {
    std::vector<const KernelStore*> stores;
    for (const KernelStore& s : k_.stores)
      if (UsesVar(s.index, 1) == inner) stores.push_back(&s);
    if (stores.empty()) return;
    const std::vector<std::string> vars = {"i0", "i1"};
    if (!inner) {
      for (const KernelStore* s : stores) {
        Emit(s->value, nullptr, "    ");
        out_ += fmt::format("    tf_store_{}(b{}, {}, {});\n", DTypeName(k_.buffers[s->buffer].dtype), s->buffer,
                            PrintIndex(s->index, vars), Name(s->value));
      }
      return;
    }
    std::vector<bool> seen(k_.values.size(), false);
    for (const KernelStore* s : stores) EmitOuterDeps(s->value, seen);
    out_ += fmt::format("    for (int64_t i1 = 0; i1 < {}; ++i1) {{\n", k_.inner);
    std::vector<bool> inner_done(k_.values.size(), false);
    for (const KernelStore* s : stores) {
      Emit(s->value, &inner_done, "      ");
      out_ += fmt::format("      tf_store_{}(b{}, {}, {});\n", DTypeName(k_.buffers[s->buffer].dtype), s->buffer,
                          PrintIndex(s->index, vars), Name(s->value));
    }
    out_ += "    }\n";
  }

  const Kernel& k_;
  std::string out_;
  std::vector<bool> emitted_;
  std::map<int, int> accumulator_value_;
};

}  // namespace

std::string EmitCppFunction(const Kernel& kernel) { return CppEmitter(kernel).Run(); }

std::string EmitCpp(const Kernel& kernel) { return CppPrelude() + EmitCppFunction(kernel); }

}  // namespace tilefuse
