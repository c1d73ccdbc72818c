#include "codegen/cpp_emitter.h"

#include <map>
#include <string_view>
#include <fmt/format.h>

#include "codegen/cpp_kernel_config.h"
#include "codegen/cpp_prelude.h"
#include "codegen/cpp_simd_declarations.h"
#include "codegen/cpp_value_expression.h"
#include "codegen/emit_util.h"
#include "codegen/row_cache_plan.h"

namespace tilefuse {

namespace {

// Float sums longer than this add SIMD-lane partial sums block by block into a double
// total, so rounding error grows with the block, not with the row.
constexpr int64_t kSumBlock = 1024;

// Kernel shape in the generated C++:
//
//   #pragma omp parallel                      (row buffers: one per thread)
//   #pragma omp for                           for i0 in [0, outer):
//     per reduction:  #pragma omp simd reduction(...)   for i1: acc op= value(i0, i1)
//     outer stores;   #pragma omp simd                  for i1: store value(i0, i1)
//
// Pointwise kernels are one `parallel for simd` loop. Inner loops are OpenMP simd loops
// so float reductions vectorise without -ffast-math (the pragma permits reassociation).
class CppEmitter {
 public:
  CppEmitter(const Kernel& k, const CppKernelConfig& config)
      : k_(k), config_(config), cache_(config.row_buffer ? PlanRowCache(k) : RecomputeRowValues(k)), emitted_(k.values.size(), false) {
    for (size_t v = 0; v < k.values.size(); ++v)
      if (k.values[v].kind == ScalarValue::Kind::kAccumulator) accumulator_value_[k.values[v].reduction] = static_cast<int>(v);
  }

  std::string Run() {
    out_ = CppConfigErrorDirective(config_) + CppSimdDeclarations();
    out_ += fmt::format("\nextern \"C\" void {}(void* const* buffers) {{\n", k_.name);
    out_ += CppBufferDeclarations(k_.buffers);
    bool pointwise = k_.reductions.empty() && !HasInnerStores();
    if (cache_.buffer_values.empty()) {
      out_ += fmt::format("#pragma omp parallel for {}{}{}\n", pointwise ? "simd " : "", CppScheduleClause(config_), CppTeamClause(config_));
      EmitOuterLoop();
    } else {
      out_ += fmt::format("#pragma omp parallel{}\n  {{\n", CppTeamClause(config_));
      for (size_t b = 0; b < cache_.buffer_values.size(); ++b) {
        const char* type = RowType(static_cast<int>(b));
        out_ += fmt::format("  {0}* __restrict__ row{1} = static_cast<{0}*>(__builtin_malloc(sizeof({0}) * {2}));\n"
                            "  if (!row{1}) __builtin_trap();\n", type, b, k_.inner);
      }
      out_ += fmt::format("#pragma omp for {}\n", CppScheduleClause(config_));
      EmitOuterLoop();
      for (size_t b = 0; b < cache_.buffer_values.size(); ++b) out_ += fmt::format("  __builtin_free(row{});\n", b);
      out_ += "  }\n";
    }
    out_ += "}\n";
    return out_;
  }

 private:
  std::string Name(int v) const { return fmt::format("v{}", v); }
  const char* RowType(int buffer) const { return ComputeType(k_.values[cache_.buffer_values[buffer]].dtype); }

  // Cheaper forms with the same meaning at the value's precision:
  //  - x^2 and x^3 (GELU's cube) as products: a pow call would keep the loop scalar (pow
  //    has no SIMD declaration, see cpp_simd_declarations.cc). x*x*x rounds twice, within
  //    2 ulp of pow;
  //  - a division of a per-element value by a per-row one (softmax's sum, layer norm's
  //    deviation) as a product with its reciprocal, which the compiler hoists out of the
  //    inner loop: one division per row, not per element (vdivps is ~10x a multiply).
  //    Two roundings instead of one, within 1.5 ulp;
  //  - exp and sigmoid computed in float through the prelude's inline tf_exp_f32 (see
  //    there why not libmvec).
  std::string Expression(const ScalarValue& v) {
    if (v.kind == ScalarValue::Kind::kOp && v.op == OpCode::kDiv && IsFloat(v.dtype) && v.inner &&
        !k_.values[v.args[1]].inner)
      return fmt::format("{0}({1} * ({0}(1) / {2}))", ComputeType(v.dtype), Name(v.args[0]), Name(v.args[1]));
    if (v.kind == ScalarValue::Kind::kOp && v.op == OpCode::kPow) {
      const ScalarValue& exponent = k_.values[v.args[1]];
      if (exponent.kind == ScalarValue::Kind::kConstant && (exponent.constant == 2 || exponent.constant == 3) &&
          IsFloat(v.dtype)) {
        std::string x = Name(v.args[0]);
        return exponent.constant == 2 ? fmt::format("{0} * {0}", x) : fmt::format("{0} * {0} * {0}", x);
      }
    }
    if (v.kind == ScalarValue::Kind::kOp && (v.op == OpCode::kExp || v.op == OpCode::kSigmoid) &&
        std::string_view(ComputeType(v.dtype)) == "float")
      return fmt::format("tf_{}_f32({})", v.op == OpCode::kExp ? "exp" : "sigmoid", Name(v.args[0]));
    return CppValueExpression(v, {"i0", "i1"});
  }

  bool HasInnerStores() const {
    for (const KernelStore& s : k_.stores)
      if (UsesVar(s.index, 1)) return true;
    return false;
  }

  void EmitOuterLoop() {
    out_ += fmt::format("  for (int64_t i0 = 0; i0 < {}; ++i0) {{\n", k_.outer);
    for (size_t r = 0; r < k_.reductions.size(); ++r) EmitReduction(static_cast<int>(r));
    EmitStores(false);
    EmitStores(true);
    out_ += "  }\n";
  }

  // Emits `v` and, first, everything it needs at the current scope. Outer values
  // (no inner-loop dependence) are emitted once per outer iteration; inner values are
  // emitted afresh in each inner loop (`inner_emitted` is that loop's set), or read
  // from the row buffer an earlier pass wrote.
  void Emit(int v, std::vector<bool>* inner_emitted, const std::string& indent) {
    const ScalarValue& value = k_.values[v];
    std::vector<bool>& done = value.inner ? *inner_emitted : emitted_;
    if (done[v]) return;
    done[v] = true;
    if (value.inner && cache_.ReadsCache(v, pass_)) {
      out_ += fmt::format("{}const {} {} = row{}[i1];\n", indent, ComputeType(value.dtype), Name(v), cache_.buffer_of_value[v]);
      return;
    }
    for (int d : ValueDependencies(value)) Emit(d, inner_emitted, indent);
    out_ += fmt::format("{}const {} {} = {};\n", indent, ComputeType(value.dtype), Name(v), Expression(value));
    if (value.inner && cache_.WritesCache(v, pass_)) out_ += fmt::format("{}row{}[i1] = {};\n", indent, cache_.buffer_of_value[v], Name(v));
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
    if (cache_.ReadsCache(v, pass_)) return;
    for (int d : ValueDependencies(value)) EmitOuterDeps(d, seen);
  }

  void EmitReduction(int r) {
    pass_ = r;
    const KernelReduction& red = k_.reductions[r];
    std::string type = ComputeType(red.dtype);
    std::vector<bool> seen(k_.values.size(), false);
    EmitOuterDeps(red.value, seen);
    std::string part = fmt::format("part{}", r), acc = fmt::format("acc{}", r);
    std::string v = fmt::format("({}){}", type, Name(red.value));
    std::string init = "0", clause = "+", update = fmt::format("{} + {}", part, v);
    switch (red.op) {
      case OpCode::kReduceMax:
        init = IsInteger(red.dtype) ? "std::numeric_limits<int64_t>::min()" : "-INFINITY";
        clause = "tf_max", update = fmt::format("max_nan({}, {})", part, v);
        break;
      case OpCode::kReduceMin:
        init = IsInteger(red.dtype) ? "std::numeric_limits<int64_t>::max()" : "INFINITY";
        clause = "tf_min", update = fmt::format("min_nan({}, {})", part, v);
        break;
      case OpCode::kReduceProd: init = "1", clause = "*", update = fmt::format("{} * {}", part, v); break;
      default: break;
    }
    bool blocked = IsFloat(red.dtype) && clause == "+" && red.count > kSumBlock;
    std::string indent = "      ";
    if (blocked) {
      // The double total costs one add per block; the lanes stay float.
      out_ += fmt::format("    double {0} = 0;\n    for (int64_t i1_block = 0; i1_block < {1}; i1_block += {2}) {{\n"
                          "      const int64_t i1_end = i1_block + {2} < {1} ? i1_block + {2} : {1};\n"
                          "      {3} {4} = 0;\n#pragma omp simd reduction(+ : {4})\n"
                          "      for (int64_t i1 = i1_block; i1 < i1_end; ++i1) {{\n",
                          acc, red.count, kSumBlock, type, part);
      indent = "        ";
    } else {
      out_ += fmt::format("    {0} {1} = {2};\n#pragma omp simd reduction({3} : {1})\n    for (int64_t i1 = 0; i1 < {4}; ++i1) {{\n",
                          type, part, init, clause, red.count);
    }
    std::vector<bool> inner(k_.values.size(), false);
    Emit(red.value, &inner, indent);
    out_ += fmt::format("{}{} = {};\n", indent, part, update);
    if (blocked) {
      out_ += fmt::format("      }}\n      {} += {};\n    }}\n", acc, part);
    } else {
      out_ += "    }\n";
      acc = part;
    }
    int value = accumulator_value_.at(r);
    std::string finished = red.op == OpCode::kReduceMean ? fmt::format("{} / {}", acc, red.count) : acc;
    out_ += fmt::format("    const {0} {1} = ({0})({2});\n", type, Name(value), finished);
    emitted_[value] = true;
  }

  void EmitStores(bool inner) {
    pass_ = static_cast<int>(k_.reductions.size());
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
    // Each i1 stores its own elements, so the lanes are independent.
    out_ += fmt::format("#pragma omp simd\n    for (int64_t i1 = 0; i1 < {}; ++i1) {{\n", k_.inner);
    std::vector<bool> inner_done(k_.values.size(), false);
    for (const KernelStore* s : stores) {
      Emit(s->value, &inner_done, "      ");
      out_ += fmt::format("      tf_store_{}(b{}, {}, {});\n", DTypeName(k_.buffers[s->buffer].dtype), s->buffer,
                          PrintIndex(s->index, vars), Name(s->value));
    }
    out_ += "    }\n";
  }

  const Kernel& k_;
  const CppKernelConfig config_;
  const RowCachePlan cache_;
  int pass_ = 0;  // the inner-loop pass being emitted (RowCachePlan numbering)
  std::string out_;
  std::vector<bool> emitted_;
  std::map<int, int> accumulator_value_;
};

}  // namespace

std::string EmitCppFunction(const Kernel& kernel, const CppKernelConfig& config) { return CppEmitter(kernel, config).Run(); }

std::string EmitCpp(const Kernel& kernel, const CppKernelConfig& config) { return CppPrelude() + EmitCppFunction(kernel, config); }

}  // namespace tilefuse
