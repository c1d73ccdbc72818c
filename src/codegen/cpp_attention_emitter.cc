#include "codegen/cpp_attention_emitter.h"

#include <fmt/format.h>

#include "codegen/cpp_simd_declarations.h"
#include "codegen/cpp_value_expression.h"
#include "codegen/emit_util.h"

namespace tilefuse {

namespace {

// Tile sizes: a score tile is 32 × 64 values and the accumulators 32 × dv; both stay
// in L1/L2 with the key block of V they are combined with.
constexpr int64_t kQueryBlock = kCppAttentionQueryBlock;
constexpr int64_t kKeyBlock = kCppAttentionKeyBlock;

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
        nk_padded_(RoundUp(a.nk, lanes_)), dv_padded_(RoundUp(a.dv, lanes_)) {}

  std::string Run() {
    // libmvec SIMD exp for double (guarded: once per translation unit); float uses the
    // prelude's inline tf_exp_f32.
    out_ = CppSimdDeclarations();
    out_ += fmt::format("\n#include <algorithm>\n#include <memory>\n\nextern \"C\" void {}(void* const* buffers) {{\n", a_.name);
    out_ += CppBufferDeclarations(a_.buffers);
    EmitOperand("q", a_.q, a_.d, a_.d);
    EmitOperand("k", a_.k, a_.nk, nk_padded_);
    EmitOperand("v", a_.v, a_.dv, dv_padded_);
    EmitTasks();
    out_ += "}\n";
    return out_;
  }

 private:
  static int64_t RoundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

  // The operand as a `const T*` named `name`: the buffer itself, or packed by its program
  // with rows of `row_length` padded with zeros to `padded` (whole vectors for the tiles).
  void EmitOperand(const std::string& name, const AttentionOperand& operand, int64_t row_length, int64_t padded) {
    if (operand.pack_value < 0) {
      out_ += fmt::format("  const {}* __restrict__ {} = b{};\n", t_, name, operand.buffer);
      return;
    }
    // Zero-filled only where rows are padded: the fill is one more pass over the operand
    // (7 of a BERT 8x512 kernel's 29 ms of packing on 2 cores).
    out_ += fmt::format("  std::unique_ptr<{0}[]> {1}_pack(new {0}[{2}]{3});\n", t_, name, operand.elements / row_length * padded,
                        padded == row_length ? "" : "()");
    out_ += fmt::format("#pragma omp parallel for schedule(static)\n  for (int64_t i0 = 0; i0 < {}; ++i0) {{\n", operand.elements);
    out_ += ProgramText(operand.pack, Needed(operand.pack, operand.pack_value), {"i0", "i1"}, "    ");
    std::string at = padded == row_length ? "i0" : fmt::format("i0 / {0} * {1} + i0 % {0}", row_length, padded);
    out_ += fmt::format("    {}_pack[{}] = ({})v{};\n  }}\n", name, at, t_, operand.pack_value);
    out_ += fmt::format("  const {0}* __restrict__ {1} = {1}_pack.get();\n", t_, name);
  }

  std::string BatchOffset(const AttentionOperand& operand, int64_t matrix) const {
    return fmt::format("{} * {}", PrintIndex(operand.batch_index, {"batch"}), matrix);
  }

  bool SkipsKeyBlocks() const {
    const int64_t key_blocks = (a_.nk + kKeyBlock - 1) / kKeyBlock;
    for (const KeyBlockRange& r : key_blocks_)
      if (r.first > 0 || r.last < key_blocks - 1) return true;
    return false;
  }

  // The keys each query block walks: all, or the blocks its mask leaves (tables).
  std::string KeyLoop() {
    if (!SkipsKeyBlocks())
      return fmt::format("      for (int64_t first_key = 0; first_key < {0}; first_key += {1}) {{\n", a_.nk, kKeyBlock);
    std::string first, last;
    for (size_t i = 0; i < key_blocks_.size(); ++i) {
      first += fmt::format("{}{}", i ? ", " : "", key_blocks_[i].first);
      last += fmt::format("{}{}", i ? ", " : "", key_blocks_[i].last);
    }
    out_ += fmt::format("  // Per query block, the key blocks its mask leaves (the others add nothing).\n"
                        "  static const int16_t first_key_block[] = {{{}}};\n  static const int16_t last_key_block[] = {{{}}};\n",
                        first, last);
    return fmt::format(
        "      const int64_t keys_end = std::min<int64_t>({0}, (last_key_block[query_block] + 1) * {1});\n"
        "      for (int64_t first_key = first_key_block[query_block] * {1}; first_key < keys_end; first_key += {1}) {{\n",
        a_.nk, kKeyBlock);
  }

  void EmitTasks() {
    const int64_t query_blocks = (a_.nq + kQueryBlock - 1) / kQueryBlock;
    const std::string key_loop = KeyLoop();
    out_ += fmt::format(
        "#pragma omp parallel for collapse(2) schedule(dynamic)\n"
        "  for (int64_t batch = 0; batch < {0}; ++batch) {{\n"
        "    for (int64_t query_block = 0; query_block < {1}; ++query_block) {{\n"
        "      const {2}* __restrict__ q_rows = q + {3};\n"
        "      const {2}* __restrict__ k_columns = k + {4};\n"
        "      const {2}* __restrict__ v_rows = v + {5};\n"
        "      const int64_t first_query = query_block * {6}, rows = std::min<int64_t>({6}, {7} - first_query);\n"
        "      const int64_t first_score_row = {8} * {7} + first_query;\n"
        "      // Rows past `rows` (up to a multiple of 4) are computed and never stored.\n"
        "      {2} running_max[{6}], running_sum[{6}], acc[{6}][{9}] = {{}}, scores[{6}][{10}];\n"
        "      for (int64_t r = 0; r < rows; ++r) {{\n"
        "        running_max[r] = -INFINITY;\n"
        "        running_sum[r] = 0;\n"
        "      }}\n"
        "{12}"
        "        const int64_t keys = std::min<int64_t>({10}, {11} - first_key);\n",
        a_.batch, query_blocks, t_, BatchOffset(a_.q, a_.nq * a_.d), BatchOffset(a_.k, a_.d * nk_padded_),
        BatchOffset(a_.v, a_.nk * dv_padded_), kQueryBlock, a_.nq, PrintIndex(a_.score_batch_index, {"batch"}), dv_padded_,
        kKeyBlock, a_.nk, key_loop);
    EmitScoreTile();
    EmitSoftmaxRows();
    EmitValueProduct();
    out_ += "      }\n";
    out_ += fmt::format(
        "      for (int64_t r = 0; r < rows; ++r)\n"
        "        for (int64_t c = 0; c < {0}; ++c)\n"
        "          tf_store_{1}(b{2}, ((batch * {3} + first_query + r) * {0} + c), acc[r][c] / running_sum[r]);\n"
        "    }}\n  }}\n",
        a_.dv, DTypeName(a_.buffers[a_.output].dtype), a_.output, a_.nq);
  }

  // scores[r][j] = Q[r]·Kᵀ[:, j] in 4-row × `lanes_`-key register tiles: each Kᵀ vector
  // loaded feeds four rows, and the sums never leave registers over the head dim. Rows
  // past the last query re-read it; keys past the last are Kᵀ's zero padding.
  void EmitScoreTile() {
    static_assert(kQueryBlock % 4 == 0 && kKeyBlock % 16 == 0);
    out_ += "        for (int64_t r = 0; r < rows; r += 4) {\n";
    for (int t = 0; t < 4; ++t)
      out_ += fmt::format("          const {0}* __restrict__ q{1} = q_rows + std::min<int64_t>(first_query + r + {1}, {2}) * {3};\n",
                          t_, t, a_.nq - 1, a_.d);
    out_ += fmt::format(
        "          for (int64_t j0 = 0; j0 < keys; j0 += {1}) {{\n"
        "            {0} tile0[{1}] = {{}}, tile1[{1}] = {{}}, tile2[{1}] = {{}}, tile3[{1}] = {{}};\n"
        "            for (int64_t c = 0; c < {2}; ++c) {{\n"
        "              const {0}* __restrict__ k_row = k_columns + c * {3} + first_key + j0;\n"
        "              const {0} a0 = q0[c], a1 = q1[c], a2 = q2[c], a3 = q3[c];\n"
        "              for (int u = 0; u < {1}; ++u) {{\n"
        "                tile0[u] += a0 * k_row[u];\n"
        "                tile1[u] += a1 * k_row[u];\n"
        "                tile2[u] += a2 * k_row[u];\n"
        "                tile3[u] += a3 * k_row[u];\n"
        "              }}\n"
        "            }}\n"
        "            for (int u = 0; u < {1}; ++u) {{\n"
        "              scores[r][j0 + u] = tile0[u];\n"
        "              scores[r + 1][j0 + u] = tile1[u];\n"
        "              scores[r + 2][j0 + u] = tile2[u];\n"
        "              scores[r + 3][j0 + u] = tile3[u];\n"
        "            }}\n"
        "          }}\n"
        "        }}\n",
        t_, lanes_, a_.d, nk_padded_);
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

  // acc[r][:] += Σ_j p[r][j] · V[j][:] in 4-row × `lanes_`-column register tiles.
  void EmitValueProduct() {
    out_ += fmt::format(
        "        for (int64_t r = 0; r < rows; r += 4)\n"
        "          for (int64_t c0 = 0; c0 < {2}; c0 += {1}) {{\n"
        "            {0} tile0[{1}], tile1[{1}], tile2[{1}], tile3[{1}];\n"
        "            for (int u = 0; u < {1}; ++u) {{\n"
        "              tile0[u] = acc[r][c0 + u];\n"
        "              tile1[u] = acc[r + 1][c0 + u];\n"
        "              tile2[u] = acc[r + 2][c0 + u];\n"
        "              tile3[u] = acc[r + 3][c0 + u];\n"
        "            }}\n"
        "            for (int64_t j = 0; j < keys; ++j) {{\n"
        "              const {0}* __restrict__ v_row = v_rows + (first_key + j) * {2} + c0;\n"
        "              const {0} p0 = scores[r][j], p1 = scores[r + 1][j], p2 = scores[r + 2][j], p3 = scores[r + 3][j];\n"
        "              for (int u = 0; u < {1}; ++u) {{\n"
        "                tile0[u] += p0 * v_row[u];\n"
        "                tile1[u] += p1 * v_row[u];\n"
        "                tile2[u] += p2 * v_row[u];\n"
        "                tile3[u] += p3 * v_row[u];\n"
        "              }}\n"
        "            }}\n"
        "            for (int u = 0; u < {1}; ++u) {{\n"
        "              acc[r][c0 + u] = tile0[u];\n"
        "              acc[r + 1][c0 + u] = tile1[u];\n"
        "              acc[r + 2][c0 + u] = tile2[u];\n"
        "              acc[r + 3][c0 + u] = tile3[u];\n"
        "            }}\n"
        "          }}\n",
        t_, lanes_, dv_padded_);
  }

  const AttentionKernel& a_;
  const std::vector<KeyBlockRange>& key_blocks_;
  const char* t_;
  const int64_t lanes_, nk_padded_, dv_padded_;
  std::string out_;
};

}  // namespace

std::string EmitCppAttention(const AttentionKernel& kernel, const std::vector<KeyBlockRange>& key_blocks) {
  return AttentionEmitter(kernel, key_blocks).Run();
}

}  // namespace tilefuse
