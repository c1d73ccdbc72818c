#include "backend/cuda/cuda_cache_update_fold.h"

#include <algorithm>
#include <optional>

#include "codegen/cuda/cuda_attention_emitter.h"
#include "codegen/index_expr.h"

namespace tilefuse {
namespace {

// One store of the update's kernel: updated[e] = where(key(e) == position[0], rows[row(e)], cache[e]).
struct RowUpdate {
  int cache = -1, updated = -1, position = -1, rows = -1;
  DType position_dtype = DType::kI64;
  Index row;                            // over loop variable 0: the flat element e of the cache
  Index key;                            // key(e)
  int64_t key_stride = 1, keys = 0;     // key(e) = (e / key_stride) % keys
};

bool IsZero(const Index& index) {
  std::vector<LinearTerm> terms;
  int64_t offset = -1;
  return AsLinearTerms(index, &terms, &offset) && terms.empty() && offset == 0;
}

// (e / stride) % keys, e / stride (the outermost dim: keys = elements / stride) or e % keys.
bool KeyOfFlatElement(const Index& key, int64_t elements, int64_t* stride, int64_t* keys) {
  const IndexExpr* e = key.get();
  int64_t modulus = 0, divisor = 1;
  if (e->kind == IndexExpr::Kind::kMod && e->b->kind == IndexExpr::Kind::kConst) {
    modulus = e->b->value;
    e = e->a.get();
  }
  if (e->kind == IndexExpr::Kind::kDiv && e->b->kind == IndexExpr::Kind::kConst) {
    divisor = e->b->value;
    e = e->a.get();
  }
  if (e->kind != IndexExpr::Kind::kVar || e->value != 0 || divisor <= 0) return false;
  *stride = divisor;
  *keys = modulus > 0 ? modulus : elements / divisor;
  return *keys > 0;
}

std::optional<RowUpdate> MatchStore(const Graph& g, const Kernel& k, const KernelStore& store) {
  using Kind = ScalarValue::Kind;
  const Index flat = IndexVar(0, k.outer);
  if (!SameIndex(store.index, flat)) return std::nullopt;
  const ScalarValue& chosen = k.values[store.value];
  if (chosen.kind != Kind::kOp || chosen.op != OpCode::kWhere) return std::nullopt;
  const ScalarValue& condition = k.values[chosen.args[0]];
  const ScalarValue& rows = k.values[chosen.args[1]];
  const ScalarValue& cache = k.values[chosen.args[2]];
  if (cache.kind != Kind::kLoad || !SameIndex(cache.index, flat) || rows.kind != Kind::kLoad) return std::nullopt;
  if (condition.kind != Kind::kOp || condition.op != OpCode::kEqual) return std::nullopt;
  const ScalarValue* key = &k.values[condition.args[0]];
  const ScalarValue* position = &k.values[condition.args[1]];
  if (key->kind != Kind::kIndex) std::swap(key, position);
  if (key->kind != Kind::kIndex || position->kind != Kind::kLoad || !IsZero(position->index)) return std::nullopt;
  RowUpdate u;
  u.cache = k.buffers[cache.buffer].node;
  u.updated = k.buffers[store.buffer].node;
  u.position = k.buffers[position->buffer].node;
  u.rows = k.buffers[rows.buffer].node;
  u.position_dtype = g.node(u.position).dtype;
  u.row = rows.index;
  u.key = key->index;
  const Node& updated = g.node(u.updated);
  const Node& input = g.node(u.cache);
  const auto& inputs = g.inputs();
  if (std::find(inputs.begin(), inputs.end(), u.cache) == inputs.end() || input.shape != updated.shape || input.dtype != updated.dtype)
    return std::nullopt;
  if (NumElements(g.node(u.position).shape) != 1 || (u.position_dtype != DType::kI64 && u.position_dtype != DType::kI32))
    return std::nullopt;
  if (UsesVar(u.row, 1) || UsesValue(u.row) || !KeyOfFlatElement(u.key, k.outer, &u.key_stride, &u.keys)) return std::nullopt;
  return u;
}

// The flat element of `operand`'s node at (row 0, column 1, output batch dim i as 2 + i).
Index FlatOf(const StridedOperand& operand, const Shape& out_batch) {
  Index flat = IndexConst(operand.offset);
  flat = IndexAdd(flat, IndexMul(IndexVar(0, operand.rows), operand.row_stride));
  flat = IndexAdd(flat, IndexMul(IndexVar(1, operand.columns), operand.column_stride));
  for (const StridedOperand::BatchTerm& t : operand.batch)
    flat = IndexAdd(flat, IndexMul(IndexDiv(IndexVar(2 + t.dim, out_batch[t.dim]), t.divisor), t.stride));
  return flat;
}

// The new rows as read where `operand` (K or V over the updated cache) reads the cache: a view
// of u.rows whose terms are the operand's batch terms, in order, the key variable (`key_var`)
// absent; and whether u.key at the operand's elements is that key variable. nullopt otherwise.
std::optional<StridedOperand> RowsAsOperand(const Graph& g, const RowUpdate& u, const StridedOperand& operand, const Shape& out_batch,
                                            int key_var) {
  const Index flat = FlatOf(operand, out_batch);
  std::vector<LinearTerm> terms;
  int64_t offset = 0;
  if (!AsLinearTerms(SubstituteVar(u.key, 0, flat), &terms, &offset) || offset != 0 || terms.size() != 1 || terms[0].var != key_var ||
      terms[0].divisor != 1 || terms[0].coefficient != 1)
    return std::nullopt;
  terms.clear();
  StridedOperand row;
  row.node = u.rows;
  row.dtype = g.node(u.rows).dtype;
  row.rows = operand.rows;
  row.columns = operand.columns;
  row.row_stride = row.column_stride = 0;
  if (!AsLinearTerms(SubstituteVar(u.row, 0, flat), &terms, &row.offset)) return std::nullopt;
  row.batch = operand.batch;
  for (StridedOperand::BatchTerm& t : row.batch) t.stride = 0;
  for (const LinearTerm& t : terms) {
    if (t.var == key_var) return std::nullopt;  // (a row that moves with the key)
    if (t.var < 2) {
      if (t.divisor != 1) return std::nullopt;
      (t.var == 0 ? row.row_stride : row.column_stride) = t.coefficient;
      continue;
    }
    auto same = std::find_if(row.batch.begin(), row.batch.end(),
                             [&](const StridedOperand::BatchTerm& b) { return 2 + b.dim == t.var && b.divisor == t.divisor; });
    if (same == row.batch.end()) return std::nullopt;
    same->stride = t.coefficient;
  }
  return row;
}

}  // namespace

bool MayFoldCacheUpdate(const FusionPlan& plan, const CudaProgram& program, int attention_group) {
  const std::vector<int>& read = plan.groups.at(attention_group).inputs;
  return std::any_of(read.begin(), read.end(), [&](int node) {
    const int producer = plan.group_of.at(node);
    if (producer < 0 || program.groups.at(producer).mode != CudaGroupProgram::Mode::kGenerated || !program.groups.at(producer).kernel)
      return false;
    const std::vector<int>& outputs = plan.groups.at(producer).outputs;
    return outputs.size() == 2 && std::all_of(outputs.begin(), outputs.end(), [&](int out) {
             return std::find(read.begin(), read.end(), out) != read.end();
           });
  });
}

int FoldCacheUpdate(const Graph& g, const FusionPlan& plan, const CudaProgram& program, int attention_group,
                    AttentionTemplateKernel& attention) {
  if (!UsesDecodeForm(attention) || attention.cache_update || !attention.symbols.empty()) return -1;
  const int update_group = plan.group_of.at(attention.k.node);
  if (update_group < 0 || plan.group_of.at(attention.v.node) != update_group || attention.k.node == attention.v.node) return -1;
  const CudaGroupProgram& p = program.groups.at(update_group);
  if (p.mode != CudaGroupProgram::Mode::kGenerated || p.kind != GroupKind::kPointwise || !p.kernel || p.kernel->is_template ||
      !p.prologue.empty() || p.grouped_into >= 0 || p.launched_with >= 0 || p.normed_into >= 0 || p.gated_into >= 0)
    return -1;
  std::vector<int> outputs = plan.groups.at(update_group).outputs;
  std::sort(outputs.begin(), outputs.end());
  std::vector<int> operands = {attention.k.node, attention.v.node};
  std::sort(operands.begin(), operands.end());
  const Kernel& k = p.kernel->kernel;
  if (outputs != operands || k.stores.size() != 2 || k.inner != 1 || !k.reductions.empty() || !k.symbols.empty()) return -1;
  // The updated caches are read by the attention alone.
  for (const Node& n : g.nodes())
    for (int input : n.inputs)
      if ((input == attention.k.node || input == attention.v.node) && plan.group_of.at(n.id) != attention_group &&
          plan.group_of.at(n.id) != update_group)
        return -1;
  std::optional<RowUpdate> key_update, value_update;
  for (const KernelStore& store : k.stores) {
    std::optional<RowUpdate> u = MatchStore(g, k, store);
    if (!u) return -1;
    (u->updated == attention.k.node ? key_update : value_update) = u;
  }
  if (!key_update || !value_update || key_update->position != value_update->position || key_update->keys != attention.nk ||
      value_update->keys != attention.nk)
    return -1;
  // Kᵀ [d][nk]: the key is the column; V [nk][dv]: the row.
  std::optional<StridedOperand> k_row = RowsAsOperand(g, *key_update, attention.k, attention.batch_shape, 1);
  std::optional<StridedOperand> v_row = RowsAsOperand(g, *value_update, attention.v, attention.batch_shape, 0);
  if (!k_row || !v_row || k_row->dtype != attention.dtype || v_row->dtype != attention.dtype) return -1;
  DecodeCacheUpdateFold fold;
  fold.position = key_update->position;
  fold.position_dtype = key_update->position_dtype;
  fold.k_row = *k_row;
  fold.v_row = *v_row;
  fold.k_updated = key_update->updated;
  fold.v_updated = value_update->updated;
  fold.k_elements = NumElements(g.node(key_update->cache).shape);
  fold.v_elements = NumElements(g.node(value_update->cache).shape);
  fold.k_key_stride = key_update->key_stride;
  fold.v_key_stride = value_update->key_stride;
  fold.keys = attention.nk;
  attention.k.node = key_update->cache;
  attention.v.node = value_update->cache;
  attention.cache_update = fold;
  return update_group;
}

}  // namespace tilefuse
