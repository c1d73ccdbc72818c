#include "codegen/cpp/cpp_attention_emitter.h"

#include <fmt/format.h>
#include <set>

#include "codegen/cpp/cpp_kernel_config.h"
#include "codegen/cpp/cpp_simd_declarations.h"
#include "codegen/cpp_value_expression.h"
#include "codegen/emit_util.h"

namespace tilefuse {

namespace {

// Tile sizes: a score tile is 32 × 64 values and the accumulators 32 × dv; both stay
// in L1/L2 with the key block of V they are combined with.
constexpr int64_t kQueryBlock = kCppAttentionQueryBlock;
constexpr int64_t kKeyBlock = kCppAttentionKeyBlock;
constexpr int kTileRows = 8;  // query rows per register tile

// Values `result` needs (itself included): arguments and gathered indices.
std::vector<bool> Needed(const Kernel& program, int result) {
  std::vector<bool> needed(program.values.size(), false);
  needed[result] = true;
  for (int v = result; v >= 0; --v) {
    if (!needed[v]) continue;
    for (int a : program.values[v].args) needed[a] = true;
    std::vector<const IndexExpr*> stack = {program.values[v].index.get()};
    while (!stack.empty()) {
      const IndexExpr* e = stack.back();
      stack.pop_back();
      if (!e) continue;
      if (e->kind == IndexExpr::Kind::kValue) needed[e->value] = true;
      stack.push_back(e->a.get());
      stack.push_back(e->b.get());
    }
  }
  return needed;
}

// Values that change with loop variable 1 (the key), directly or through their inputs;
// the dot product always does.
std::vector<bool> PerKey(const Kernel& program) {
  std::vector<bool> per_key(program.values.size(), false);
  for (size_t v = 0; v < program.values.size(); ++v) {
    const ScalarValue& value = program.values[v];
    per_key[v] = UsesVar(value.index, 1) || (value.kind == ScalarValue::Kind::kLoad && value.buffer < 0);
    for (int a : value.args) per_key[v] = per_key[v] || per_key[a];
    std::vector<const IndexExpr*> stack = {value.index.get()};
    while (!stack.empty()) {
      const IndexExpr* e = stack.back();
      stack.pop_back();
      if (!e) continue;
      if (e->kind == IndexExpr::Kind::kValue) per_key[v] = per_key[v] || per_key[e->value];
      stack.push_back(e->a.get());
      stack.push_back(e->b.get());
    }
  }
  return per_key;
}

// `const T vN = ...;` for the selected values, in SSA order. Loads of buffer -1 are the
// Q·Kᵀ dot product, held in `score`.
std::string ProgramText(const Kernel& program, const std::vector<bool>& selected, const std::vector<std::string>& vars,
                        const std::string& indent) {
  std::string text;
  for (size_t v = 0; v < program.values.size(); ++v) {
    if (!selected[v]) continue;
    const ScalarValue& value = program.values[v];
    bool score = value.kind == ScalarValue::Kind::kLoad && value.buffer < 0;
    text += fmt::format("{}const {} v{} = {};\n", indent, ComputeType(value.dtype), v,
                        score ? fmt::format("{}(score)", ComputeType(value.dtype)) : CppValueExpression(value, vars));
  }
  return text;
}

class AttentionEmitter {
 public:
  AttentionEmitter(const AttentionKernel& a, const std::vector<KeyBlockRange>& key_blocks)
      : a_(a), key_blocks_(key_blocks), t_(ComputeType(a.compute)), lanes_(a.compute == DType::kF64 ? 8 : 16),
        nk_padded_(RoundUp(a.nk, lanes_)), dv_padded_(RoundUp(a.dv, lanes_)), at_launch_(a.SizesAtLaunch() && !SkipsKeyBlocks()) {}

  std::string Run() {
    // libmvec SIMD exp for double (guarded: once per translation unit); float uses the
    // prelude's inline tf_exp_f32.
    std::string head = CppSimdDeclarations();
    head += fmt::format("\n#include <omp.h>\n\n#include <algorithm>\n#include <memory>\n\nextern \"C\" void {}(void* const* buffers) {{\n",
                        a_.name);
    head += CppBufferDeclarations(a_.buffers, !at_launch_);  // (no element counts where they follow the symbols)
    out_.clear();
    EmitTasks();
    Note(a_.score_batch_index);
    for (const AttentionOperand* operand : {&a_.q, &a_.k, &a_.v}) Note(operand->batch_index);
    for (const ScalarValue& v : a_.logits.values) Note(v.index);
    // The model's symbols (their values after the buffers), then the sizes: literals, or with
    // the sizes at launch expressions over the symbols (one shared object for every binding).
    SymExpr batch_size = SymExpr::Constant(1);
    for (const SymExpr& d : a_.batch_sizes) batch_size = batch_size * d;
    const std::string sizes = fmt::format("  const int64_t tf_nq = {}, tf_nk = {}, tf_batches = {};\n", SizeText(a_.nq_size, a_.nq),
                                          SizeText(a_.nk_size, a_.nk), SizeText(batch_size, a_.batch));
    for (int id : symbols_)
      head += fmt::format("  const int64_t tf_sym{} = static_cast<const int64_t*>(buffers[{}])[{}];\n", id, a_.buffers.size(), id);
    head += sizes;
    head += fmt::format("  const int64_t tf_nk_padded = (tf_nk + {0}) / {1} * {1};  // Kᵀ's keys, whole vectors\n", lanes_ - 1, lanes_);
    return head + out_ + "}\n";
  }

  // The symbols the kernel's text names, in id order (its parameters after the buffers).
  std::vector<int> Symbols() const { return {symbols_.begin(), symbols_.end()}; }

 private:
  static int64_t RoundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

  // A size as the kernel's text has it: the symbols' expression at launch, else the value.
  std::string SizeText(const SymExpr& size, int64_t value) {
    if (!at_launch_ || size.IsConstant()) return std::to_string(value);
    for (int id : size.Symbols()) AddSymbol(id);
    return "(" + size.Print("tf_sym") + ")";
  }
  void AddSymbol(int id) { symbols_.insert(id); }
  // The symbols an index prints with.
  void Note(const Index& index) {
    for (int id : IndexSymbols(index)) AddSymbol(id);
  }

  // The statements that copy rows [row_begin, row_end) of an operand matrix ([.., rows,
  // columns], batch `batch_var`) into `dest[row * stride + column]` (row counted from
  // row_begin): from its buffer when read in place, else through its program, whose flat
  // offset is rewritten as (batch, row, column) so the view's index arithmetic folds
  // ((b·R + r)·C + c) / C → b·R + r). Columns walk in blocks of 64 inside each row block so
  // that a transposing view (Kᵀ) re-reads the same few cache lines.
  // `rows` and `columns` are the matrix's dims, with their sizes in the model's symbols.
  std::string CopyRows(const AttentionOperand& operand, int64_t rows, const SymExpr& rows_size, int64_t columns, const SymExpr& columns_size,
                       const std::string& batch_var, const std::string& row_begin, const std::string& row_end, const std::string& dest,
                       const std::string& stride, const std::string& indent) {
    const std::string row = row_begin == "0" ? "i1" : fmt::format("(i1 - {})", row_begin);
    const std::string at = fmt::format("{}[{} * {} + i2]", dest, row, stride);
    const std::string columns_text = SizeText(columns_size, columns);
    std::string body;
    if (operand.pack_value < 0) {
      body = fmt::format("{}    {} = b{}[({} * {} + i1) * {} + i2];\n", indent, at, operand.buffer, batch_var, SizeText(rows_size, rows), columns_text);
    } else {
      const int64_t batches = operand.elements / (rows * columns);
      const Index matrix = at_launch_ ? IndexSize(rows * columns, rows_size * columns_size) : IndexConst(rows * columns);
      const Index width = at_launch_ ? IndexSize(columns, columns_size) : IndexConst(columns);
      Index flat = IndexAdd(IndexMul(IndexVar(0, batches), matrix), IndexAdd(IndexMul(IndexVar(1, rows), width), IndexVar(2, columns)));
      Kernel program = operand.pack;
      for (ScalarValue& value : program.values)
        if (value.index) {
          value.index = SubstituteVar(value.index, 0, flat);
          Note(value.index);
        }
      body = ProgramText(program, Needed(program, operand.pack_value), {batch_var, "i1", "i2"}, indent + "    ");
      body += fmt::format("{}    {} = ({})v{};\n", indent, at, t_, operand.pack_value);
    }
    return fmt::format(
        "{0}for (int64_t j0 = 0; j0 < {1}; j0 += 64)\n"
        "{0}  for (int64_t i1 = {2}; i1 < {3}; ++i1)\n"
        "{0}    for (int64_t i2 = j0; i2 < std::min<int64_t>(j0 + 64, {1}); ++i2) {{\n{4}{0}    }}\n",
        indent, columns_text, row_begin, row_end, body);
  }

  std::string OperandBatch(const AttentionOperand& operand) const { return PrintIndex(operand.batch_index, {"batch"}); }

  bool SkipsKeyBlocks() const {
    const int64_t key_blocks = (a_.nk + kKeyBlock - 1) / kKeyBlock;
    for (const KeyBlockRange& r : key_blocks_)
      if (r.first > 0 || r.last < key_blocks - 1) return true;
    return false;
  }

  // The keys each query block walks: all, or the blocks its mask leaves (tables).
  std::string KeyLoop() {
    if (!SkipsKeyBlocks()) return fmt::format("      for (int64_t first_key = 0; first_key < tf_nk; first_key += {}) {{\n", kKeyBlock);
    std::string first, last;
    for (size_t i = 0; i < key_blocks_.size(); ++i) {
      first += fmt::format("{}{}", i ? ", " : "", key_blocks_[i].first);
      last += fmt::format("{}{}", i ? ", " : "", key_blocks_[i].last);
    }
    out_ += fmt::format("  // Per query block, the key blocks its mask leaves (the others add nothing).\n"
                        "  static const int16_t first_key_block[] = {{{}}};\n  static const int16_t last_key_block[] = {{{}}};\n",
                        first, last);
    return fmt::format(
        "      const int64_t keys_end = std::min<int64_t>(tf_nk, (last_key_block[query_block] + 1) * {0});\n"
        "      for (int64_t first_key = first_key_block[query_block] * {0}; first_key < keys_end; first_key += {0}) {{\n",
        kKeyBlock);
  }

  // Q·Kᵀ and P·V's flops and the buffers' bytes under the threshold: no team (RunsOnCallingThread).
  bool OnCallingThread() const {
    double bytes = 0;
    for (const KernelBuffer& b : a_.buffers) bytes += static_cast<double>(b.elements) * DTypeSize(b.dtype);
    return RunsOnCallingThread(2.0 * a_.batch * a_.nq * a_.nk * (a_.d + a_.dv), bytes);
  }

  // Tasks are (batch, query block) pairs, dealt to the threads in runs of consecutive
  // tasks (dynamic, about four runs per thread) so that a thread mostly stays on one
  // batch: it packs that batch's Kᵀ and V once into its own buffers (they stay in its L2
  // for the next query block) instead of all of them first in passes over whole tensors
  // (21-29 of a BERT 8x512 kernel's 75 ms on 2 cores). Q's block is copied per task.
  void EmitTasks() {
    const std::string query_blocks = fmt::format("(tf_nq + {}) / {}", kQueryBlock - 1, kQueryBlock);
    const std::string key_loop = KeyLoop();
    // (With the keys given at launch Kᵀ's padding is always zero-filled: one text for every count.)
    const bool pad_k = nk_padded_ != a_.nk || at_launch_, pad_v = dv_padded_ != a_.dv;
    out_ += fmt::format(
        "  const int64_t tasks = tf_batches * {1};\n"
        "  const int64_t run = std::max<int64_t>(1, tasks / (4 * (int64_t)omp_get_max_threads()));\n"
        "#pragma omp parallel{14}\n"
        "  {{\n"
        "    // Padding (Kᵀ's keys, V's columns past the last) is zero-filled once here.\n"
        "    std::unique_ptr<{2}[]> q_pack(new {2}[{3}]()), k_pack(new {2}[{4} * tf_nk_padded]{5}), v_pack(new {2}[tf_nk * {6}]{7});\n"
        "    int64_t k_batch_packed = -1, v_batch_packed = -1;\n"
        "#pragma omp for collapse(2) schedule(dynamic, run)\n"
        "    for (int64_t batch = 0; batch < tf_batches; ++batch) {{\n"
        "      for (int64_t query_block = 0; query_block < {1}; ++query_block) {{\n"
        "      const int64_t first_query = query_block * {8}, rows = std::min<int64_t>({8}, tf_nq - first_query);\n"
        "      const int64_t first_score_row = {10} * tf_nq + first_query;\n"
        "      const int64_t k_batch = {11}, v_batch = {12}, q_batch = {13};\n"
        "      if (k_batch != k_batch_packed) {{\n",
        "", query_blocks, t_, kQueryBlock * a_.d, a_.d, pad_k ? "()" : "", dv_padded_, pad_v ? "()" : "",
        kQueryBlock, "", PrintIndex(a_.score_batch_index, {"batch"}), OperandBatch(a_.k), OperandBatch(a_.v), OperandBatch(a_.q),
        OnCallingThread() ? " num_threads(1)" : "");
    out_ += CopyRows(a_.k, a_.d, SymExpr::Constant(a_.d), a_.nk, a_.nk_size, "k_batch", "0", std::to_string(a_.d), "k_pack", "tf_nk_padded",
                     "        ");
    out_ += "        k_batch_packed = k_batch;\n      }\n      if (v_batch != v_batch_packed) {\n";
    out_ += CopyRows(a_.v, a_.nk, a_.nk_size, a_.dv, SymExpr::Constant(a_.dv), "v_batch", "0", "tf_nk", "v_pack", std::to_string(dv_padded_),
                     "        ");
    out_ += "        v_batch_packed = v_batch;\n      }\n";
    out_ += "      // Rows past `rows` (up to a whole register tile) hold zeros or an earlier block's rows:\n"
            "      // computed, never stored, and no other row reads them.\n";
    out_ += CopyRows(a_.q, a_.nq, a_.nq_size, a_.d, SymExpr::Constant(a_.d), "q_batch", "first_query", "first_query + rows", "q_pack",
                     std::to_string(a_.d), "      ");
    out_ += fmt::format(
        "      const {0}* __restrict__ q_rows = q_pack.get();\n"
        "      const {0}* __restrict__ k_columns = k_pack.get();\n"
        "      const {0}* __restrict__ v_rows = v_pack.get();\n"
        "      {0} running_max[{1}], running_sum[{1}], acc[{1}][{2}] = {{}}, scores[{1}][{3}];\n"
        "      for (int64_t r = 0; r < rows; ++r) {{\n"
        "        running_max[r] = -INFINITY;\n"
        "        running_sum[r] = 0;\n"
        "      }}\n"
        "{4}"
        "        const int64_t keys = std::min<int64_t>({3}, tf_nk - first_key);\n",
        t_, kQueryBlock, dv_padded_, kKeyBlock, key_loop);
    EmitScoreTile();
    EmitSoftmaxRows();
    EmitValueProduct();
    out_ += "      }\n";
    // The safe softmax's rows of NaN probabilities (a sum of 0: every key masked; or NaN)
    // come out 0, as where(isnan(p), 0, p) makes them.
    const std::string normalised = a_.zero_nan_rows ? fmt::format("(running_sum[r] > 0 ? acc[r][c] / running_sum[r] : {}(0))", t_)
                                                    : std::string("acc[r][c] / running_sum[r]");
    out_ += fmt::format(
        "      for (int64_t r = 0; r < rows; ++r)\n"
        "        for (int64_t c = 0; c < {0}; ++c)\n"
        "          tf_store_{1}(b{2}, ((batch * tf_nq + first_query + r) * {0} + c), {3});\n",
        a_.dv, DTypeName(a_.buffers[a_.output].dtype), a_.output, normalised);
    // The rows' logsumexp: max + log(sum) of the logits; a row whose every logit is -inf gets
    // -inf + log(0) = -inf, as the graph's max + log(sum(exp(x - max))) gives NaN: NaN then.
    if (a_.logsumexp >= 0)
      out_ += fmt::format(
          "      for (int64_t r = 0; r < rows; ++r)\n"
          "        b{0}[first_score_row + r] = running_max[r] == -INFINITY ? NAN : running_max[r] + std::log(running_sum[r]);\n",
          a_.logsumexp);
    out_ += "      }\n    }\n  }\n";
  }

  // One line per register-tile row: `pattern` with {0} the row's number.
  static std::string PerTileRow(const std::string& pattern) {
    std::string text;
    for (int t = 0; t < kTileRows; ++t) text += fmt::format(fmt::runtime(pattern), t);
    return text;
  }
  static std::string ListPerTileRow(const std::string& pattern) {
    std::string text;
    for (int t = 0; t < kTileRows; ++t) text += (t ? ", " : "") + fmt::format(fmt::runtime(pattern), t);
    return text;
  }

  // scores[r][j] = Q[r]·Kᵀ[:, j] in 8-row × `lanes_`-key register tiles: each Kᵀ vector
  // loaded feeds eight rows, and the sums never leave registers over the head dim. Eight
  // independent accumulators keep both FMA pipes busy (four left them half idle, waiting
  // on each FMA's latency: 75 → 63 ms for a BERT 8x512 kernel on 2 cores). Keys past the
  // last are Kᵀ's zero padding.
  void EmitScoreTile() {
    static_assert(kQueryBlock % kTileRows == 0 && kKeyBlock % 16 == 0);
    out_ += fmt::format("        for (int64_t r = 0; r < rows; r += {}) {{\n", kTileRows);
    out_ += PerTileRow(fmt::format("          const {}* __restrict__ q{{0}} = q_rows + (r + {{0}}) * {};\n", t_, a_.d));
    out_ += fmt::format(
        "          for (int64_t j0 = 0; j0 < keys; j0 += {1}) {{\n"
        "            {0} {4};\n"
        "            for (int64_t c = 0; c < {2}; ++c) {{\n"
        "              const {0}* __restrict__ k_row = k_columns + c * tf_nk_padded + first_key + j0;\n"
        "              const {0} {5};\n"
        "              for (int u = 0; u < {1}; ++u) {{\n",
        t_, lanes_, a_.d, nk_padded_, ListPerTileRow(fmt::format("tile{{0}}[{}] = {{{{}}}}", lanes_)), ListPerTileRow("a{0} = q{0}[c]"));
    out_ += PerTileRow("                tile{0}[u] += a{0} * k_row[u];\n");
    out_ += fmt::format("              }}\n            }}\n            for (int u = 0; u < {}; ++u) {{\n", lanes_);
    out_ += PerTileRow("              scores[r + {0}][j0 + u] = tile{0}[u];\n");
    out_ += "            }\n          }\n        }\n";
  }

  // Per row: the logits (the group's scalar program), the new running max, the rescale
  // of the running sum and accumulator, and the unnormalised probabilities in place.
  void EmitSoftmaxRows() {
    std::vector<bool> needed = Needed(a_.logits, a_.logit), per_key = PerKey(a_.logits);
    std::vector<bool> per_row_values(needed.size()), per_key_values(needed.size());
    for (size_t v = 0; v < needed.size(); ++v) {
      per_row_values[v] = needed[v] && !per_key[v];
      per_key_values[v] = needed[v] && per_key[v];
    }
    const std::vector<std::string> vars = {"row", "key"};
    out_ += "        for (int64_t r = 0; r < rows; ++r) {\n"
            "          const int64_t row = first_score_row + r;\n";
    out_ += ProgramText(a_.logits, per_row_values, vars, "          ");
    // The block max ignores NaN logits (x > m ? x : m is one vector max instruction; the
    // NaN-propagating max_nan kept this loop scalar: 18 of a BERT 8x512 kernel's 68 ms on 2
    // cores). A NaN logit still makes the row NaN: its exp, the sum and the output are NaN.
    out_ += fmt::format("          {} block_max = -INFINITY;\n", t_);
    out_ += "#pragma omp simd reduction(max : block_max)\n"
            "          for (int64_t j = 0; j < keys; ++j) {\n"
            "            const int64_t key = first_key + j;\n";
    out_ += fmt::format("            const {} score = scores[r][j];\n", ComputeType(a_.score_dtype));
    out_ += ProgramText(a_.logits, per_key_values, vars, "            ");
    out_ += fmt::format(
        "            scores[r][j] = ({0})v{1};\n"
        "            block_max = scores[r][j] > block_max ? scores[r][j] : block_max;\n"
        "          }}\n"
        "          const {0} new_max = max_nan(running_max[r], block_max);\n"
        "          // exp(-inf - -inf) would be NaN: while every logit so far is -inf, shift by 0.\n"
        "          const {0} shift = new_max == -INFINITY ? {0}(0) : new_max;\n"
        "          const {0} rescale = {3}(running_max[r] - shift);\n"
        "          // Arguments below {4} (masked keys) give 0 without calling exp: its result\n"
        "          // would be below the smallest normal (and libm's double underflow path is slow).\n"
        "          {0} block_sum = 0;\n"
        "#pragma omp simd reduction(+ : block_sum)\n"
        "          for (int64_t j = 0; j < keys; ++j) {{\n"
        "            const {0} x = scores[r][j] - shift;\n"
        "            scores[r][j] = x < {0}({4}) ? {0}(0) : {3}(x < {0}({4}) ? {0}(0) : x);\n"
        "            block_sum += scores[r][j];\n"
        "          }}\n"
        "          running_sum[r] = running_sum[r] * rescale + block_sum;\n"
        "          for (int64_t c = 0; c < {2}; ++c) acc[r][c] *= rescale;\n"
        "          running_max[r] = new_max;\n"
        "        }}\n",
        t_, a_.logit, dv_padded_, a_.compute == DType::kF64 ? "exp" : "tf_exp_f32", a_.compute == DType::kF64 ? -708 : -87);
  }

  // acc[r][:] += Σ_j p[r][j] · V[j][:] in 8-row × `lanes_`-column register tiles.
  void EmitValueProduct() {
    out_ += fmt::format(
        "        for (int64_t r = 0; r < rows; r += {3})\n"
        "          for (int64_t c0 = 0; c0 < {2}; c0 += {1}) {{\n"
        "            {0} {4};\n"
        "            for (int u = 0; u < {1}; ++u) {{\n",
        t_, lanes_, dv_padded_, kTileRows, ListPerTileRow(fmt::format("tile{{0}}[{}]", lanes_)));
    out_ += PerTileRow("              tile{0}[u] = acc[r + {0}][c0 + u];\n");
    out_ += fmt::format(
        "            }}\n"
        "            for (int64_t j = 0; j < keys; ++j) {{\n"
        "              const {0}* __restrict__ v_row = v_rows + (first_key + j) * {2} + c0;\n"
        "              const {0} {3};\n"
        "              for (int u = 0; u < {1}; ++u) {{\n",
        t_, lanes_, dv_padded_, ListPerTileRow("p{0} = scores[r + {0}][j]"));
    out_ += PerTileRow("                tile{0}[u] += p{0} * v_row[u];\n");
    out_ += fmt::format("              }}\n            }}\n            for (int u = 0; u < {}; ++u) {{\n", lanes_);
    out_ += PerTileRow("              acc[r + {0}][c0 + u] = tile{0}[u];\n");
    out_ += "            }\n          }\n";
  }

  const AttentionKernel& a_;
  const std::vector<KeyBlockRange>& key_blocks_;
  const char* t_;
  const int64_t lanes_, nk_padded_, dv_padded_;
  const bool at_launch_;  // nq, nk and the batch from the model's symbols (not where a mask skips key blocks: tables)
  std::string out_;
  std::set<int> symbols_;  // the model's symbols the text names
};

}  // namespace

std::string EmitCppAttention(const AttentionKernel& kernel, const std::vector<KeyBlockRange>& key_blocks, std::vector<int>* symbols) {
  AttentionEmitter emitter(kernel, key_blocks);
  std::string source = emitter.Run();
  if (symbols) *symbols = emitter.Symbols();
  return source;
}

}  // namespace tilefuse
