#include "codegen/cpp/cpp_emitter.h"

#include <algorithm>
#include <set>
#include <map>
#include <string_view>
#include <fmt/format.h>

#include "codegen/cpp/cpp_kernel_config.h"
#include "codegen/cpp/cpp_prelude.h"
#include "codegen/cpp/cpp_simd_declarations.h"
#include "codegen/cpp_value_expression.h"
#include "codegen/emit_util.h"
#include "codegen/kernel_rewrites.h"
#include "codegen/row_cache_plan.h"
#include "ir/reduction_traits.h"
#include "support/check.h"

namespace tilefuse {

namespace {

// GCC's default -ffp-contract=fast fuses a product into a later addition or subtraction even
// across statements, so a value used both as x*y and through a rounded copy of it diverges:
// x*y - mean(x*y) over one element became fma(x, y, -round(x*y)), the product's rounding
// error instead of 0, which a layer norm then scaled by 1/sqrt(eps) (fuzz seed 30061). The
// loop kernels round every product as the scalar program does; explicit fmaf calls (exp's
// polynomial) stay fused, and the attention kernel keeps contraction in its dot products.
// Clang contracts only within one expression (its default), which cannot split a value so.
constexpr const char kRoundedProducts[] = R"TFRAW(
#ifndef TF_ROUNDED_PRODUCTS
#if defined(__GNUC__) && !defined(__clang__)
#define TF_ROUNDED_PRODUCTS __attribute__((optimize("fp-contract=off")))
#else
#define TF_ROUNDED_PRODUCTS
#endif
#endif
)TFRAW";

// Float sums longer than this add SIMD-lane partial sums block by block into a double
// total, so rounding error grows with the block, not with the row.
constexpr int64_t kSumBlock = 1024;
// Bytes a pipelined row kernel may keep in flight (its input rows and row buffers): a
// quarter of a typical 1 MiB L2, so the rows stay cached between their passes.
constexpr int64_t kPipelineCacheBytes = 256 * 1024;

// The OpenMP reduction operator of a reduction's combiner.
const char* OmpReductionOperator(OpCode combiner) {
  switch (combiner) {
    case OpCode::kAdd: return "+";
    case OpCode::kMul: return "*";
    case OpCode::kMax: return "max";
    case OpCode::kMin: return "min";
    default: TF_UNREACHABLE("no OpenMP reduction for this combiner");
  }
  return "";
}

bool HasInnerStores(const Kernel& k) {
  for (const KernelStore& s : k.stores)
    if (UsesVar(s.index, 1)) return true;
  return false;
}

// The rows in flight must stay in cache, the block must be long enough for the
// one-pass-at-a-time filling and draining steps to be rare, and there must be a pass
// to overlap with (a reduction, then the stores). `k` as emitted (rewritten).
PipelineShape PipelineOfRewritten(const Kernel& k, const CppKernelConfig& config) {
  if (!config.pipeline_rows || k.kind != GroupKind::kRowReduction || k.reductions.empty() || !HasInnerStores(k)) return {};
  const int passes = static_cast<int>(k.reductions.size()) + 1;
  int slots = 1;
  while (slots < passes) slots *= 2;
  const RowCachePlan cache = config.row_buffer ? PlanRowCache(k) : RecomputeRowValues(k);
  int64_t bytes_in_flight = 0;
  for (const KernelBuffer& b : k.buffers)
    if (!b.is_output && b.elements == k.outer * k.inner) bytes_in_flight += DTypeSize(b.dtype) * k.inner * passes;
  for (int v : cache.buffer_values) bytes_in_flight += (k.values[v].dtype == DType::kF64 ? 8 : 4) * k.inner * slots;
  if (bytes_in_flight > kPipelineCacheBytes) return {};
  const int64_t min_rows = 8 * passes;
  const int64_t rows = config.schedule == CppSchedule::kStatic ? std::clamp<int64_t>(k.outer / 64, min_rows, 256) : config.chunk;
  if (rows < min_rows || k.outer < 2 * rows) return {};
  return {rows, slots};
}

// Kernel shape in the generated C++:
//
//   #pragma omp parallel                      (row buffers: one per thread)
//   #pragma omp for                           for i0 in [0, outer):
//     per reduction:  #pragma omp simd reduction(...)   for i1: acc op= value(i0, i1)
//     outer stores;   #pragma omp simd                  for i1: store value(i0, i1)
//
// Pointwise kernels are one `parallel for simd` loop. Row kernels with enough rows run
// their passes pipelined over consecutive rows instead (see "Pipelined row kernels"
// below). Inner loops are OpenMP simd loops so float reductions vectorise without
// -ffast-math (the pragma permits reassociation).
class CppEmitter {
 public:
  CppEmitter(const Kernel& k, const CppKernelConfig& config)
      : k_(k), config_(config), cache_(config.row_buffer ? PlanRowCache(k) : RecomputeRowValues(k)),
        inner_(KernelSizeText(k, k.inner_size, k.inner)), emitted_(k.values.size(), false) {
    for (size_t v = 0; v < k.values.size(); ++v)
      if (k.values[v].kind == ScalarValue::Kind::kAccumulator) accumulator_value_[k.values[v].reduction] = static_cast<int>(v);
  }

  std::string Run() {
    out_ = CppConfigErrorDirective(config_) + CppSimdDeclarations();
    out_ += kRoundedProducts;
    out_ += fmt::format("\nextern \"C\" TF_ROUNDED_PRODUCTS void {}(void* const* buffers) {{\n", k_.name);
    const std::vector<int> symbols = CppPrintedSymbols(k_);
    out_ += CppBufferDeclarations(k_.buffers, symbols.empty());
    // The sizes printed over the model's symbols: their values follow the buffers.
    for (int id : symbols)
      out_ += fmt::format("  const int64_t tf_sym{} = static_cast<const int64_t*>(buffers[{}])[{}];\n", id, k_.buffers.size(), id);
    bool pointwise = k_.reductions.empty() && !HasInnerStores();
    const PipelineShape pipeline = PipelineOfRewritten(k_, config_);
    pipeline_rows_ = pipeline.block_rows, pipeline_slots_ = pipeline.slots;
    if (pipeline_rows_ > 0) {
      EmitPipelinedKernel();
    } else if (cache_.buffer_values.empty()) {
      out_ += fmt::format("#pragma omp parallel for {}{}{}\n", pointwise ? "simd " : "", CppScheduleClause(config_), CppTeamClause(config_));
      EmitOuterLoop();
    } else {
      out_ += fmt::format("#pragma omp parallel{}\n  {{\n", CppTeamClause(config_));
      EmitRowBufferAllocations(1);
      out_ += fmt::format("#pragma omp for {}\n", CppScheduleClause(config_));
      EmitOuterLoop();
      EmitRowBufferFrees();
      out_ += "  }\n";
    }
    out_ += "}\n";
    return out_;
  }

 private:
  std::string Name(int v) const { return fmt::format("v{}", v); }
  const char* RowType(int buffer) const { return ComputeType(k_.values[cache_.buffer_values[buffer]].dtype); }

  // exp and sigmoid computed in float through the prelude's inline tf_exp_f32 (see there
  // why not libmvec). The target-neutral cheaper forms (powers, row-invariant divisors)
  // are already in the kernel (codegen/kernel_rewrites.h).
  std::string Expression(const ScalarValue& v) {
    if (v.kind == ScalarValue::Kind::kOp && (v.op == OpCode::kExp || v.op == OpCode::kSigmoid) &&
        std::string_view(ComputeType(v.dtype)) == "float")
      return fmt::format("tf_{}_f32({})", v.op == OpCode::kExp ? "exp" : "sigmoid", Name(v.args[0]));
    return CppValueExpression(v, {"i0", "i1"});
  }

  bool HasInnerStores() const { return tilefuse::HasInnerStores(k_); }

  bool HasOuterStores() const {
    for (const KernelStore& s : k_.stores)
      if (!UsesVar(s.index, 1)) return true;
    return false;
  }

  bool HasPrefills() const {
    for (int v : cache_.buffer_values)
      if (cache_.Prefilled(v)) return true;
    return false;
  }

  int NumPasses() const { return static_cast<int>(k_.reductions.size()) + 1; }

  void EmitRowBufferAllocations(int slots) {
    for (size_t b = 0; b < cache_.buffer_values.size(); ++b) {
      const char* type = RowType(static_cast<int>(b));
      out_ += fmt::format("  {0}* __restrict__ row{1} = static_cast<{0}*>(__builtin_malloc(sizeof({0}) * {2}));\n"
                          "  if (!row{1}) __builtin_trap();\n", type, b, RowBufferLength(slots));
    }
  }
  // `slots` rows: a number where the row's length is one.
  std::string RowBufferLength(int slots) const {
    if (slots == 1) return inner_;
    return PrintsSymbolically(k_, k_.inner_size, k_.inner) ? fmt::format("{} * {}", inner_, slots)
                                                           : fmt::format("{}", k_.inner * slots);
  }
  void EmitRowBufferFrees() {
    for (size_t b = 0; b < cache_.buffer_values.size(); ++b) out_ += fmt::format("  __builtin_free(row{});\n", b);
  }

  void EmitOuterLoop() {
    out_ += fmt::format("  for (int64_t i0 = 0; i0 < {}; ++i0) {{\n", KernelSizeText(k_, k_.outer_size, k_.outer));
    EmitPrefills("    ");
    for (size_t r = 0; r < k_.reductions.size(); ++r) EmitReduction(static_cast<int>(r));
    EmitStores(false);
    EmitStores(true);
    out_ += "  }\n";
  }

  // Where a pass reads or writes value `v`'s row buffer at element i1: the thread's
  // buffer, or in a pipelined kernel the slot of the pass's row.
  std::string RowElement(int v, const std::string& at = "i1") const {
    int b = cache_.buffer_of_value[v];
    if (pipeline_rows_ == 0) return fmt::format("row{}[{}]", b, at);
    return fmt::format("row{}[(i0 & {}) * {} + {}]", b, pipeline_slots_ - 1, inner_, at);
  }

  // Fills the row buffers of the prefilled random values for row i0, four elements per
  // Philox block (codegen/row_cache_plan.h); before the row's first pass.
  void EmitPrefills(const std::string& indent) {
    for (int v : cache_.buffer_values) {
      if (!cache_.Prefilled(v)) continue;
      const ScalarValue& value = k_.values[v];
      out_ += fmt::format("#pragma omp simd\n{}for (int64_t q = 0; q < {}; ++q)\n"
                          "{}  tf_philox_uniform4({}ull, (uint64_t)({}) / 4 + q, &{});\n",
                          indent, k_.inner / 4, indent, value.seed, PrintIndex(value.index, {"i0", "0"}), RowElement(v, "4 * q"));
    }
  }

  // Emits `v` and, first, everything it needs at the current scope. Outer values
  // (no inner-loop dependence) are emitted once per outer iteration; inner values are
  // emitted afresh in each inner loop (`inner_emitted` is that loop's set), or read
  // from the row buffer an earlier pass wrote. In a pipelined kernel a finished
  // reduction is read from the slot of the scope's row.
  void Emit(int v, std::vector<bool>* inner_emitted, const std::string& indent) {
    const ScalarValue& value = k_.values[v];
    std::vector<bool>& done = value.inner ? *inner_emitted : emitted_;
    if (done[v]) return;
    done[v] = true;
    if (value.kind == ScalarValue::Kind::kAccumulator) {
      TF_CHECK_MSG(pipeline_rows_ > 0, "a reduction used before its loop finished it");
      out_ += fmt::format("{}const {} {} = finished{}[i0 & {}];\n", indent, ComputeType(value.dtype), Name(v), value.reduction,
                          pipeline_slots_ - 1);
      return;
    }
    if (value.inner && cache_.ReadsCache(v, pass_)) {
      out_ += fmt::format("{}const {} {} = {};\n", indent, ComputeType(value.dtype), Name(v), RowElement(v));
      return;
    }
    for (int d : ValueDependencies(value)) Emit(d, inner_emitted, indent);
    out_ += fmt::format("{}const {} {} = {};\n", indent, ComputeType(value.dtype), Name(v), Expression(value));
    if (value.inner && cache_.WritesCache(v, pass_)) out_ += fmt::format("{}{} = {};\n", indent, RowElement(v), Name(v));
  }

  // Outer values a set of inner values depends on, emitted before the inner loop opens.
  void EmitOuterDeps(int v, std::vector<bool>& seen, const std::string& indent = "    ") {
    if (seen[v]) return;
    seen[v] = true;
    const ScalarValue& value = k_.values[v];
    if (!value.inner) {
      Emit(v, nullptr, indent);
      return;
    }
    if (cache_.ReadsCache(v, pass_)) return;
    for (int d : ValueDependencies(value)) EmitOuterDeps(d, seen, indent);
  }

  // How reduction r accumulates: its per-lane variable partR, the OpenMP clauses, and
  // whether a float sum is blocked (lanes add block by block into a double accR).
  //
  // Max and min use OpenMP's built-in clauses with a plain comparison per lane, which
  // skips NaN; for floats a second sum counts the NaNs (nanR, in the lanes' type) and a
  // row that held one comes out NaN, as in the reference and numpy. (A user-declared
  // reduction with a NaN-propagating combiner did this in one variable, but GCC 12 stops
  // vectorising a loop with two reductions when the function has another loop with that
  // user-declared reduction: a pipelined kernel's steady loop.)
  struct ReductionForm {
    const char* type = "";
    std::string init, part, acc, nan, clauses, update;
    bool blocked = false;
  };
  ReductionForm FormOf(int r) const {
    const KernelReduction& red = k_.reductions[r];
    const OpCode combiner = GetReductionTraits(red.op).combiner;
    ReductionForm f;
    f.type = ComputeType(red.dtype);
    f.init = ReductionIdentity(red);
    f.part = fmt::format("part{}", r), f.acc = fmt::format("acc{}", r);
    std::string v = fmt::format("({}){}", f.type, Name(red.value));
    const char* clause = OmpReductionOperator(combiner);
    if (combiner == OpCode::kMax || combiner == OpCode::kMin) {
      f.update = fmt::format("{0} = {1} {2} {0} ? {1} : {0};", f.part, v, combiner == OpCode::kMax ? ">" : "<");
      if (IsFloat(red.dtype)) {
        f.nan = fmt::format("nan{}", r);
        f.update += fmt::format(" {} += {} != {} ? {}(1) : {}(0);", f.nan, Name(red.value), Name(red.value), f.type, f.type);
      }
    } else {
      f.update = fmt::format("{0} = {0} {1} {2};", f.part, clause, v);
    }
    f.clauses = fmt::format(" reduction({} : {})", clause, f.part);
    if (!f.nan.empty()) f.clauses += fmt::format(" reduction(+ : {})", f.nan);
    f.blocked = IsFloat(red.dtype) && combiner == OpCode::kAdd && red.count > kSumBlock;
    return f;
  }
  // Declarations of the loop's accumulators (a blocked sum's partR is per block).
  std::string Declarations(const ReductionForm& f, const std::string& indent) const {
    std::string text = f.blocked ? "" : fmt::format("{}{} {} = {};\n", indent, f.type, f.part, f.init);
    if (!f.nan.empty()) text += fmt::format("{}{} {} = 0;\n", indent, f.type, f.nan);
    return text;
  }
  // The reduction's result once its loop is done (a mean divides by the count).
  std::string Finished(int r) const {
    const ReductionForm f = FormOf(r);
    std::string total = f.blocked ? f.acc : f.part;
    if (!f.nan.empty()) return fmt::format("{} != 0 ? {}(NAN) : {}", f.nan, f.type, total);
    const KernelReduction& red = k_.reductions[r];
    if (!GetReductionTraits(red.op).divides_by_count) return total;
    return fmt::format("{} / {}", total, red.count == k_.inner ? inner_ : fmt::format("{}", red.count));
  }

  void EmitReduction(int r) {
    EmitPassLoop(r, "    ");
    const ReductionForm f = FormOf(r);
    int value = accumulator_value_.at(r);
    out_ += fmt::format("    const {0} {1} = ({0})({2});\n", f.type, Name(value), Finished(r));
    emitted_[value] = true;
  }

  // Pass p alone in its own inner loop over the row i0: the outer values it needs first,
  // then the loop (a blocked sum's double total declared ahead of it).
  void EmitPassLoop(int p, const std::string& indent) {
    pass_ = p;
    std::vector<bool> seen(k_.values.size(), false);
    std::vector<int> reductions;
    if (p < NumPasses() - 1) {
      reductions.push_back(p);
      EmitOuterDeps(k_.reductions[p].value, seen, indent);
      if (FormOf(p).blocked) out_ += fmt::format("{}double {} = 0;\n", indent, FormOf(p).acc);
    } else {
      for (const KernelStore& s : k_.stores)
        if (UsesVar(s.index, 1)) EmitOuterDeps(s.value, seen, indent);
    }
    // Each i1 of the store pass stores its own elements, so the lanes are independent.
    EmitPassBody(p, EmitInnerLoopHead(reductions, indent));
    EmitInnerLoopTail(reductions, indent);
  }

  // The statements of pass p inside its inner loop: reduction p's update, or (the last
  // pass) the per-element stores. Each pass computes its own values afresh.
  void EmitPassBody(int p, const std::string& indent) {
    pass_ = p;
    std::vector<bool> inner(k_.values.size(), false);
    if (p < static_cast<int>(k_.reductions.size())) {
      Emit(k_.reductions[p].value, &inner, indent);
      out_ += fmt::format("{}{}\n", indent, FormOf(p).update);
      return;
    }
    const std::vector<std::string> vars = {"i0", "i1"};
    for (const KernelStore& s : k_.stores) {
      if (!UsesVar(s.index, 1)) continue;
      Emit(s.value, &inner, indent);
      out_ += fmt::format("{}tf_store_{}(b{}, {}, {});\n", indent, DTypeName(k_.buffers[s.buffer].dtype), s.buffer,
                          PrintIndex(s.index, vars), Name(s.value));
    }
  }

  void EmitOuterStores(const std::string& indent) {
    pass_ = NumPasses() - 1;
    const std::vector<std::string> vars = {"i0", "i1"};
    for (const KernelStore& s : k_.stores) {
      if (UsesVar(s.index, 1)) continue;
      Emit(s.value, nullptr, indent);
      out_ += fmt::format("{}tf_store_{}(b{}, {}, {});\n", indent, DTypeName(k_.buffers[s.buffer].dtype), s.buffer,
                          PrintIndex(s.index, vars), Name(s.value));
    }
  }

  void EmitStores(bool inner) {
    if (!inner) return EmitOuterStores("    ");
    if (HasInnerStores()) EmitPassLoop(NumPasses() - 1, "    ");
  }

  // ---- Pipelined row kernels ----------------------------------------------------------
  //
  // A row kernel's passes alternate between memory (the first pass streams the row in
  // from DRAM, the store pass streams the result out) and arithmetic (exp on a row in
  // L1), and a core does one after the other: softmax on the development machine spent
  // ~3 ms reading, ~5 computing and ~3 writing, never at once. Pipelined, a block of rows
  // runs pass p on row t - p at step t, all passes in ONE inner loop: the first pass's
  // loads of row t, the exp of row t - 1 and the stores of row t - 2 interleave, and the
  // out-of-order core overlaps them. Softmax of f32[16384,1024] on 2 cores: 10.2-11.4 ->
  // 6.4-7.8 ms; layer norm 6.3-7.2 -> 5.0-5.6 ms.
  //
  //   for block of B rows [lo, hi):                      (the OpenMP loop)
  //     filling, t in [lo, lo + P - 1):     each pass with a row, its own loop
  //     steady, t in [lo + P - 1, hi):      for i1: {pass 0, row t} {pass 1, row t-1} ...
  //     draining, t up to hi + P - 1:       each pass with a row, its own loop
  //
  // Rows in flight keep their finished reductions (finishedR[slot]) and row buffers
  // (rowB[slot * inner ...]) in one of S >= P slots, slot = row & (S - 1).

  void EmitPipelinedKernel() {
    const int passes = NumPasses(), reductions = passes - 1;
    const int64_t rows = pipeline_rows_, blocks = (k_.outer + rows - 1) / rows;
    out_ += fmt::format("  // pipelined rows: {} passes, blocks of {} rows, {} slots\n", passes, rows, pipeline_slots_);
    out_ += fmt::format("#pragma omp parallel{}\n  {{\n", CppTeamClause(config_));
    EmitRowBufferAllocations(pipeline_slots_);
    // One block per OpenMP iteration; a chunked schedule's chunk is the block.
    std::string schedule = config_.schedule == CppSchedule::kStatic ? "schedule(static)"
                           : config_.schedule == CppSchedule::kDynamic ? "schedule(dynamic, 1)" : "schedule(static, 1)";
    out_ += fmt::format("#pragma omp for {}\n", schedule);
    // (Over the model's symbols where the rows are a size they give: the blocks' count too.)
    const bool symbolic = PrintsSymbolically(k_, k_.outer_size, k_.outer);
    const std::string outer = KernelSizeText(k_, k_.outer_size, k_.outer);
    out_ += fmt::format("  for (int64_t block = 0; block < {}; ++block) {{\n",
                        symbolic ? fmt::format("({} + {}) / {}", outer, rows - 1, rows) : fmt::format("{}", blocks));
    out_ += fmt::format("    const int64_t lo = block * {0}, hi = lo + {0} < {1} ? lo + {0} : {1};\n", rows, outer);
    for (int r = 0; r < reductions; ++r) out_ += fmt::format("    {} finished{}[{}];\n", FormOf(r).type, r, pipeline_slots_);
    // Three loops over the steps, not one with a branch: with the one-pass loops in the
    // same loop body, GCC 12 no longer if-converts (so vectorises) the steady loop.
    out_ += fmt::format("    for (int64_t t = lo; t < lo + {}; ++t) {{  // filling\n", passes - 1);
    for (int p = 0; p < passes; ++p) EmitPipelinedSinglePass(p);
    out_ += fmt::format("    }}\n    for (int64_t t = lo + {}; t < hi; ++t) {{  // steady\n", passes - 1);
    EmitPipelinedSteadyStep();
    out_ += fmt::format("    }}\n    for (int64_t t = hi > lo + {0} ? hi : lo + {0}; t < hi + {0}; ++t) {{  // draining\n", passes - 1);
    for (int p = 0; p < passes; ++p) EmitPipelinedSinglePass(p);
    out_ += "    }\n  }\n";
    EmitRowBufferFrees();
    out_ += "  }\n";
  }

  // Opens a scope for pass p's row: i0 = t - p, nothing of another pass's row visible.
  // Returns the scope's indent.
  std::string OpenRowScope(int p, const std::string& indent, const std::string& condition = "") {
    out_ += fmt::format("{}{}{{\n{}  const int64_t i0 = t - {};\n", indent, condition, indent, p);
    std::fill(emitted_.begin(), emitted_.end(), false);
    return fmt::format("{}  ", indent);
  }

  void EmitFinish(int r, const std::string& indent) {
    out_ += fmt::format("{}finished{}[i0 & {}] = ({})({});\n", indent, r, pipeline_slots_ - 1, FormOf(r).type, Finished(r));
  }

  // Filling or draining the pipeline: pass p alone on its row t - p.
  void EmitPipelinedSinglePass(int p) {
    const std::string indent = OpenRowScope(p, "      ", fmt::format("if (t - {0} >= lo && t - {0} < hi) ", p));
    if (p == 0) EmitPrefills(indent);
    EmitPassLoop(p, indent);
    if (p < NumPasses() - 1) EmitFinish(p, indent);
    else EmitOuterStores(indent);
    out_ += "      }\n";
  }

  // The outer values pass p's per-element computation reads directly (through no other
  // outer value): what must be in scope when its inner loop opens.
  std::vector<int> OuterFrontier(int p) {
    pass_ = p;
    std::vector<int> frontier, stack;
    std::vector<bool> seen(k_.values.size(), false);
    if (p < NumPasses() - 1) stack.push_back(k_.reductions[p].value);
    for (const KernelStore& s : k_.stores)
      if (p == NumPasses() - 1 && UsesVar(s.index, 1)) stack.push_back(s.value);
    while (!stack.empty()) {
      int v = stack.back();
      stack.pop_back();
      if (seen[v]) continue;
      seen[v] = true;
      if (!k_.values[v].inner) {
        frontier.push_back(v);
        continue;
      }
      if (cache_.ReadsCache(v, p)) continue;
      for (int d : ValueDependencies(k_.values[v])) stack.push_back(d);
    }
    return frontier;
  }

  // Every pass on its own row in one inner loop; each pass's statements in a scope of
  // its own (the same value names, another row). The outer values each pass needs are
  // computed before the loop, in the pass's row scope, and handed in as passP_vK: GCC
  // would not vectorise a loop with their computation inside (sqrt's errno branch).
  void EmitPipelinedSteadyStep() {
    const int passes = NumPasses();
    const std::string indent = "      ";
    if (HasPrefills()) {
      EmitPrefills(OpenRowScope(0, indent));
      out_ += fmt::format("{}}}\n", indent);
    }
    std::vector<std::vector<int>> frontier(passes);
    for (int p = 0; p < passes; ++p) {
      frontier[p] = OuterFrontier(p);
      if (frontier[p].empty()) continue;
      for (int v : frontier[p]) out_ += fmt::format("{}{} pass{}_{};\n", indent, ComputeType(k_.values[v].dtype), p, Name(v));
      const std::string scope = OpenRowScope(p, indent);
      pass_ = p;
      for (int v : frontier[p]) {
        Emit(v, nullptr, scope);
        out_ += fmt::format("{}pass{}_{} = {};\n", scope, p, Name(v), Name(v));
      }
      out_ += fmt::format("{}}}\n", indent);
    }
    std::vector<int> reductions;
    for (int r = 0; r + 1 < passes; ++r) reductions.push_back(r);
    for (int r : reductions)
      if (FormOf(r).blocked) out_ += fmt::format("{}double {} = 0;\n", indent, FormOf(r).acc);
    const std::string body = EmitInnerLoopHead(reductions, indent);
    for (int p = 0; p < passes; ++p) {
      const std::string scope = OpenRowScope(p, body);
      for (int v : frontier[p]) {
        out_ += fmt::format("{}const {} {} = pass{}_{};\n", scope, ComputeType(k_.values[v].dtype), Name(v), p, Name(v));
        emitted_[v] = true;
      }
      EmitPassBody(p, scope);
      out_ += fmt::format("{}}}\n", body);
    }
    EmitInnerLoopTail(reductions, indent);
    for (int r : reductions) {
      EmitFinish(r, OpenRowScope(r, indent));
      out_ += fmt::format("{}}}\n", indent);
    }
    if (HasOuterStores()) {
      EmitOuterStores(OpenRowScope(passes - 1, indent));
      out_ += fmt::format("{}}}\n", indent);
    }
  }

  // An inner loop over [0, inner) accumulating `reductions`; blocked float sums add
  // their lanes into their double total after every block (the others carry across).
  std::string EmitInnerLoopHead(const std::vector<int>& reductions, const std::string& indent) {
    bool blocked = false;
    std::string clauses;
    for (int r : reductions) {
      const ReductionForm f = FormOf(r);
      blocked = blocked || f.blocked;
      out_ += Declarations(f, indent);
      clauses += f.clauses;
    }
    if (blocked) {
      out_ += fmt::format("{0}for (int64_t i1_block = 0; i1_block < {1}; i1_block += {2}) {{\n"
                          "{0}  const int64_t i1_end = i1_block + {2} < {1} ? i1_block + {2} : {1};\n", indent, inner_, kSumBlock);
      for (int r : reductions)
        if (FormOf(r).blocked) out_ += fmt::format("{}  {} {} = 0;\n", indent, FormOf(r).type, FormOf(r).part);
      out_ += fmt::format("#pragma omp simd{}\n{}  for (int64_t i1 = i1_block; i1 < i1_end; ++i1) {{\n", clauses, indent);
      return fmt::format("{}    ", indent);
    }
    out_ += fmt::format("#pragma omp simd{}\n{}for (int64_t i1 = 0; i1 < {}; ++i1) {{\n", clauses, indent, inner_);
    return fmt::format("{}  ", indent);
  }
  void EmitInnerLoopTail(const std::vector<int>& reductions, const std::string& indent) {
    bool blocked = false;
    for (int r : reductions) blocked = blocked || FormOf(r).blocked;
    if (!blocked) {
      out_ += fmt::format("{}}}\n", indent);
      return;
    }
    out_ += fmt::format("{}  }}\n", indent);
    for (int r : reductions)
      if (FormOf(r).blocked) out_ += fmt::format("{}  {} += {};\n", indent, FormOf(r).acc, FormOf(r).part);
    out_ += fmt::format("{}}}\n", indent);
  }

  const Kernel& k_;
  const CppKernelConfig config_;
  const RowCachePlan cache_;
  // The row's length: over the model's symbols where it is a size in them (loop bounds, row
  // buffers and a mean's divisor read it), so one text serves every length.
  const std::string inner_;
  int pass_ = 0;  // the inner-loop pass being emitted (RowCachePlan numbering)
  int64_t pipeline_rows_ = 0;  // rows per pipelined block; 0: one row at a time
  int pipeline_slots_ = 1;     // rows in flight a pipelined block keeps state for
  std::string out_;
  std::vector<bool> emitted_;
  std::map<int, int> accumulator_value_;
};

}  // namespace

PipelineShape PipelinedRows(const Kernel& kernel, const CppKernelConfig& config) {
  return PipelineOfRewritten(RewriteForEmission(kernel), config);
}

std::vector<int> CppPrintedSymbols(const Kernel& kernel) { return PrintedSymbols(kernel, /*inner=*/true); }

std::string EmitCppFunction(const Kernel& kernel, const CppKernelConfig& config) {
  const Kernel rewritten = RewriteForEmission(kernel);
  return CppEmitter(rewritten, config).Run();
}

std::string EmitCpp(const Kernel& kernel, const CppKernelConfig& config) { return CppPrelude() + EmitCppFunction(kernel, config); }

}  // namespace tilefuse
