#include "codegen/cuda/cuda_attention_emitter.h"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <set>

#include "codegen/cuda/cuda_gemm_emitter.h"
#include "codegen/cuda/cuda_scalar_program.h"
#include "codegen/cuda/cuda_skinny_gemm_emitter.h"
#include "codegen/emit_util.h"
#include "support/env_switch.h"

namespace tilefuse {

namespace {

constexpr int64_t kSharedLimit = 227 * 1024;
constexpr int kProducerRegisters = 24;
// What setmaxnreg gives each consumer thread: 240 with two consumers, 160 with three (the
// register file's 64K over 512 threads, less the producer's share).
int ConsumerRegisters(const CudaAttentionConfig& c) { return c.consumers == 3 ? 160 : 240; }
constexpr float kLazyMarginByRule = -2;  // CudaAttentionConfig's default: Resolve decides
// tf::AttentionTableParameter's largest capacity: 10 bytes a query block, 2.5 KB of the 4 KB of
// parameters (the three tensor maps take 384 bytes); 32768 rows at 128 a block.
constexpr int kMaxTableCapacity = 256;
// Query rows a batch entry has at most where the decode form runs its attention (UsesDecodeForm).
constexpr int64_t kDecodeRows = 4;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Shared memory: the Q tiles, the K and V ring, barriers (Q full and empty per Q tile; full and empty
// per stage for K and for V), aligned to 1024 bytes (the swizzle period).
int64_t SharedBytes(const AttentionTemplateKernel& a, const CudaAttentionConfig& c) {
  const int q_slots = std::max(c.q_slots, 1);
  const int64_t element = DTypeSize(a.dtype);
  return 1024 + int64_t{q_slots} * c.BlockM() * a.d * element + int64_t{c.stages} * c.block_n * (a.d + a.dv) * element +
         8 * (2 * q_slots + 4 * c.stages);
}

}  // namespace

CudaAttentionConfig ResolveAttentionConfig(const AttentionTemplateKernel& a, CudaAttentionConfig c) {
  // Three consumers (192 query rows per CTA, FlashAttention-3's tile at head dim 64): each K/V
  // tile feeds more rows; they take no turns (ping-pong is for two), only the overlap within
  // each. ptxas gives 512 threads at most 128 registers each (setmaxnreg does not raise its
  // allocation), which holds head dim 64 without a mask program but spills with one: three
  // only there (no key past the end, no mask in any block). Measured on an H100 (2026-11-23):
  // d64 B4 H16 N4096 460 -> 501 TF/s (SDPA 482); causal d64, spilling, 367 -> 375 only.
  if (c.consumers == 0) {
    // The programs measured: the score, its scale, their product and a cast, nothing else.
    // (Not with the lengths at launch: one kernel then serves whole and partial key blocks.)
    const bool maskless = !a.SizesAtLaunch() && a.nk % c.block_n == 0 && a.logits.values.size() <= 4 &&
                          ScoreMultiplier(a.logits, a.logit).has_value();
    c.consumers = a.d <= 64 && a.dv <= 64 && maskless ? 3 : 2;
  }
  if (c.consumers == 3 && c.loop == AttentionLoop::kPingPong) c.loop = AttentionLoop::kOverlap;
  // Exponentials on the FMA pipe: measured on an H100 (2026-11-23, a quarter of them at head
  // dim 64), 448 -> 435 TF/s, causal 382 -> 364: the issue slots they take cost more than
  // the SFU time they free. Off unless asked for.
  if (c.poly_exp_every < 0) c.poly_exp_every = 0;
  // Lazy rescaling: at head dim 128 (64 rescales per thread and key block) +0.7% full, +1%
  // causal (H100, 2026-11-23). Not at head dim 64: with three consumers (128 registers a
  // thread) full attention went 546 -> 600 us (H100, 2026-11-24); with two it paid then
  // (causal 374 -> 357) but no longer since the second Q tile and the continuous turns
  // (2026-11-27, B4 H16 N4096 causal, two rounds, lazy / not: H100 335.9 / 326.2 and 334.5 /
  // 326.0 us, the GPT block B8 T2048 840.8 / 832.3 and 836.1 / 832.6; H200 338.3 / 331.5 and
  // 334.3 / 328.0).
  if (c.lazy_margin == kLazyMarginByRule) c.lazy_margin = a.d > 64 ? 8.0f : -1.0f;
  if (c.stages == 0) {
    c.stages = 2;
    for (CudaAttentionConfig deeper = c; ++deeper.stages <= 3 && SharedBytes(a, deeper) <= kSharedLimit;) c.stages = deeper.stages;
  }
  return c;
}

CudaAttentionConfig ResolveAttentionConfigForMask(const Graph& graph, const AttentionTemplateKernel& a, CudaAttentionConfig config) {
  config = ResolveAttentionConfig(a, config);
  const AttentionLogits logits{a.logits, a.logit, a.buffers, a.score_batch_index, a.nq, a.nk};
  config.key_blocks = UnmaskedKeyBlocks(graph, logits, config.BlockM(), config.block_n);
  config.interior = InteriorKeyBlocks(graph, logits, config.BlockM(), config.block_n);
  return config;
}

namespace {

// The wgmma B operands (Kᵀ for S = Q·Kᵀ, V for O = P·V) are [R][N] with R the reduction
// dim, K-major (R contiguous in memory: stored [R/64][N][64], boxes of 64 R × the N tile)
// or MN-major (N contiguous: stored [N/64][R][64], boxes of 64 N × the R tile), as the
// operand's strides have them (StridedOperand::RowsContiguous: the rows are R).

class AttentionEmitter {
 public:
  AttentionEmitter(const AttentionTemplateKernel& a, const CudaAttentionConfig& c) : a_(a), c_(c) {
    if (c_.tiles == 0) c_.tiles = TilesByRule();
    if (c_.q_slots == 0) c_.q_slots = QSlotsByRule();
    at_launch_ = SizesAtLaunch();
    symbols_ = PrintedSymbols();
    // The second Q tile before a third K/V stage (head dim 128: 3 stages and one Q tile, or 2
    // and two, fit): measured on an H200 (2026-11-27, causal B4 H16 N4096 d128) 457 / 457 us
    // against 447 / 450.
    while (SharedBytes(a_, c_) > kSharedLimit && c_.stages > 2) --c_.stages;
  }

  StatusOr<CudaKernelSource> Run() {
    RETURN_IF_ERROR(Validate());
    const int threads = 128 * (c_.consumers + 1);
    const int64_t m_blocks = CeilDiv(a_.nq, c_.BlockM());
    const int64_t batch = NumElements(a_.batch_shape);
    CudaKernelSource s;
    s.name = a_.name;
    s.threads = threads;
    s.work_blocks = CeilDiv(m_blocks, c_.tiles) * batch;
    s.strategy = fmt::format("attention template {}x{}, d {}/{}, {} stages, K {}, V {}{}{}{}{}{}{}", c_.BlockM(), c_.block_n, a_.d, a_.dv, c_.stages,
                             a_.k.RowsContiguous() ? "K-major" : "MN-major", a_.v.RowsContiguous() ? "K-major" : "MN-major",
                             SkipsKeyBlocks() ? ", masked key blocks skipped" : "", LoopName(),
                             c_.tiles > 1 ? fmt::format(", {} query blocks per CTA", c_.tiles) : "",
                             c_.q_slots > 1 ? ", Q double-buffered" : "", a_.zero_nan_rows ? ", rows without probabilities zeroed" : "",
                             a_.logsumexp >= 0 ? ", the rows' logsumexp written" : "");
    // The kernel: its parameters, then the skeleton (codegen/cuda/device/attention_fwd_sm90.cuh)
    // instantiated on this problem's Config and hooks.
    s.includes = {"attention_fwd_sm90.cuh"};
    std::string parameters =
        "const __grid_constant__ tf::TensorMap map_q, const __grid_constant__ tf::TensorMap map_k, "
        "const __grid_constant__ tf::TensorMap map_v";
    s.launch.args.push_back({LaunchArg::Kind::kTensorMap, a_.q.node, Map(a_.q, 64, c_.BlockM()), 0});
    s.launch.args.push_back({LaunchArg::Kind::kTensorMap, a_.k.node, OperandMap(a_.k, a_.d, c_.block_n), 0});
    s.launch.args.push_back({LaunchArg::Kind::kTensorMap, a_.v.node, OperandMap(a_.v, c_.block_n, a_.dv), 0});
    for (size_t b = 0; b < a_.buffers.size(); ++b) {
      const KernelBuffer& buf = a_.buffers[b];
      if (!buf.is_output && !Reads(a_.logits, static_cast<int>(b))) continue;
      parameters += fmt::format(", {}{}* __restrict__ b{}", buf.is_output ? "" : "const ", StorageType(buf.dtype), b);
      s.launch.args.push_back({LaunchArg::Kind::kBuffer, buf.node, {}, 0});
    }
    if (tables_at_launch_) {
      parameters += fmt::format(", const __grid_constant__ tf::AttentionTableParameter<{}> tables", table_capacity_);
      LaunchArg tables{LaunchArg::Kind::kBytes, -1, {}, 0};
      tables.bytes = TableBytes();
      s.launch.args.push_back(std::move(tables));
    }
    // The model's symbols the sizes are printed with, passed after the buffers.
    for (int id : symbols_) {
      parameters += fmt::format(", const long long tf_sym{}", id);
      s.launch.args.push_back({LaunchArg::Kind::kScalar, -1, {}, a_.symbols[static_cast<size_t>(id)]});
    }
    std::string out = KeyBlockTables() + InteriorTables();
    out += fmt::format("extern \"C\" __global__ void __launch_bounds__({}, 1) {}({}) {{\n", threads, a_.name, parameters);
    out += ConfigStruct() + BatchStruct();
    std::string logits = "tf::NoLogits{}", interior_logits = "tf::NoLogits{}";
    if (!AllInterior() || MasklessAtLaunch()) {
      out += LogitsStruct("Logits", "the group's logits program, its mask included", a_.logits, a_.logit);
      logits = Hook("Logits", a_.logits, a_.logit);
    }
    if (MasklessAtLaunch()) {
      // (The logits program itself: the same text whether any key block is whole at this binding.)
      out += LogitsStruct("InteriorLogits", "interior key blocks: the logits without their mask", a_.logits, a_.logit);
      interior_logits = Hook("InteriorLogits", a_.logits, a_.logit);
    } else if (HasInterior()) {
      out += LogitsStruct("InteriorLogits", "interior key blocks: the logits without their mask", c_.interior.program, c_.interior.logit);
      interior_logits = Hook("InteriorLogits", c_.interior.program, c_.interior.logit);
    }
    out += fmt::format("  tf::AttentionFwdSm90<Config>({{&map_q, &map_k, &map_v}}, {}, {}, Batch{{{}}}, {}, {}, b{}, {});\n}}\n", Tables(),
                       Lengths(), SymbolArguments(BatchSymbols(), "Config::Index"), logits, interior_logits, a_.output,
                       a_.logsumexp >= 0 ? fmt::format("b{}", a_.logsumexp) : "nullptr");
    FinishTemplateSource(s, std::move(out), SharedBytes(a_, c_));
    return s;
  }

  // The decode form (attention_decode.cuh): a CTA per query row, the operands through pointers
  // and the binding's strides, the same Batch and Logits hooks.
  StatusOr<CudaKernelSource> RunDecode() {
    if (a_.d % 8 != 0 || a_.d > 256 || a_.dv > 256)
      return InvalidArgument(fmt::format("{}: head dims {}/{} (the decode form takes multiples of 8 up to 256)", a_.name, a_.d, a_.dv));
    if (const std::optional<DecodeCacheUpdateFold>& u = a_.cache_update) {  // the new rows read as the caches' rows are
      if (KDimsContiguous() && !(u->k_row.row_stride == 1 && StartsInVectors(u->k_row, 0)))
        return InvalidArgument(fmt::format("{}: the new key's dims are not contiguous and 16-byte aligned, as the cache's are", a_.name));
      if (VRowsInVectors() && !(u->v_row.column_stride == 1 && StartsInVectors(u->v_row, 0)))
        return InvalidArgument(fmt::format("{}: the new value is not contiguous and 16-byte aligned, as the cache's rows are", a_.name));
    }
    const int64_t rows = NumElements(a_.batch_shape) * a_.nq;
    // Split over keys (flash decoding) where the rows alone leave most SMs idle: ranges of at
    // least a CTA's turn of keys, up to two waves of CTAs. With the lengths at launch the split
    // form serves every binding (one range at short lengths), so that they share one text.
    const int64_t splits =
        std::max<int64_t>(1, std::min(CeilDiv(a_.nk, kDecodeWarps * 32), std::max<int64_t>(1, CeilDiv(2 * c_.sm_count, rows))));
    const bool split = (splits > 1 || at_launch_) && rows * 4 <= kScratchCounterBytes;
    const int64_t keys_per_split = split ? std::max<int64_t>(32, CeilDiv(CeilDiv(a_.nk, splits), 32) * 32) : a_.nk;
    const int64_t ranges = split ? std::max<int64_t>(1, CeilDiv(a_.nk, keys_per_split)) : 1;
    // A CTA per row and range, no loop over them: the grid within what the launcher passes whole.
    if (rows * ranges > (int64_t{1} << 30)) return InvalidArgument(fmt::format("{}: too many query rows for one grid", a_.name));
    const std::optional<DecodeProjectionFold>& projection = a_.projection;
    if (projection) RETURN_IF_ERROR(ProjectionFits(*projection, rows, split));
    CudaKernelSource s;
    s.name = a_.name;
    s.threads = 32 * kDecodeWarps;
    s.work_blocks = rows * ranges;
    s.strategy = fmt::format("decode form, {} query row(s) over {} keys, a CTA per row{}, d {}/{}, {} warps over the keys{}{}{}{}", a_.nq, a_.nk,
                             split ? fmt::format(" and {} keys (split over the keys x{})", keys_per_split, ranges) : "", a_.d, a_.dv, kDecodeWarps, KDimsContiguous() ? ", keys read 16 bytes at a time" : "",
                             VRowsInVectors() ? ", values too" : "",
                             a_.zero_nan_rows ? ", rows without probabilities zeroed" : "",
                             a_.logsumexp >= 0 ? ", the rows' logsumexp written" : "");
    if (a_.cache_update) s.strategy += ", the KV cache's new key and value written at their position";
    if (projection)
      s.strategy += fmt::format(", its output projection ({} x {}) computed in clusters of the {} heads, 64 columns a CTA, the weight's "
                                "columns loaded before the grid ahead ends",
                                projection->product.k, projection->product.n, projection->heads);
    if (c_.decode_prefetch) s.strategy += ", keys and values prefetched to L2 before the wait";
    s.includes = {"attention_decode.cuh"};
    const std::string storage = StorageType(a_.dtype);
    std::string parameters = fmt::format("const {0}* __restrict__ q, const {0}* __restrict__ k, const {0}* __restrict__ v", storage);
    for (const StridedOperand* operand : {&a_.q, &a_.k, &a_.v}) s.launch.args.push_back({LaunchArg::Kind::kBuffer, operand->node, {}, 0});
    for (size_t b = 0; b < a_.buffers.size(); ++b) {
      const KernelBuffer& buf = a_.buffers[b];
      if (!buf.is_output && !Reads(a_.logits, static_cast<int>(b))) continue;
      if (projection && static_cast<int>(b) == a_.output) continue;  // (never stored: the projection reads it in shared memory)
      parameters += fmt::format(", {}{}* __restrict__ b{}", buf.is_output ? "" : "const ", StorageType(buf.dtype), b);
      s.launch.args.push_back({LaunchArg::Kind::kBuffer, buf.node, {}, 0});
    }
    parameters += ", const __grid_constant__ tf::DecodeOperands operands";
    LaunchArg strides{LaunchArg::Kind::kBytes, -1, {}, 0};
    strides.bytes = DecodeOperandBytes();
    s.launch.args.push_back(std::move(strides));
    if (split) {
      parameters += ", const long long keys_per_split, unsigned* __restrict__ row_counters, float* __restrict__ partials";
      s.launch.args.push_back({LaunchArg::Kind::kScalar, -1, {}, keys_per_split});
      s.launch.args.push_back({LaunchArg::Kind::kScratch, -1, {}, 0});
      s.launch.args.push_back({LaunchArg::Kind::kScratch, -1, {}, kScratchCounterBytes});
    }
    std::string update_argument;
    if (const std::optional<DecodeCacheUpdateFold>& u = a_.cache_update) {
      if (u->position_dtype != DType::kI64 && u->position_dtype != DType::kI32)
        return InvalidArgument(fmt::format("{}: a cache position of {}", a_.name, DTypeName(u->position_dtype)));
      parameters += fmt::format(", const {1}* __restrict__ position, const {0}* __restrict__ k_rows, const {0}* __restrict__ v_rows, "
                                "{0}* k_updated, {0}* v_updated, const __grid_constant__ tf::DecodeOperands rows",
                                storage, u->position_dtype == DType::kI64 ? "long long" : "int");
      for (int node : {u->position, u->k_row.node, u->v_row.node, u->k_updated, u->v_updated})
        s.launch.args.push_back({LaunchArg::Kind::kBuffer, node, {}, 0});
      LaunchArg row_strides{LaunchArg::Kind::kBytes, -1, {}, 0};
      row_strides.bytes = DecodeOperandBytes({&a_.q, &u->k_row, &u->v_row});  // (Q's unused)
      s.launch.args.push_back(std::move(row_strides));
      update_argument = fmt::format(", tf::DecodeCacheUpdate<{}>{{(long long)position[0], k_rows, v_rows, rows.k, rows.v, k_updated, v_updated, "
                                    "{}ll, {}ll, {}ll, {}ll, {}ll}}",
                                    storage, u->k_elements, u->v_elements, u->k_key_stride, u->v_key_stride, u->keys);
      if (!split) update_argument = ", tf::DecodeSplit{}" + update_argument;
    }
    std::string projection_buffers;
    if (projection) {
      TensorMapArg map_w = SkinnyWeightMap(projection->product);
      map_w.swizzle_128b = false;  // (the projection reads W's boxes as plain rows)
      parameters += ", const __grid_constant__ tf::TensorMap map_w";
      s.launch.args.push_back({LaunchArg::Kind::kTensorMap, map_w.node, map_w, 0});
      parameters += GemmEpilogueParameters(projection->product, s, projection_buffers, "p_");
      s.launch.cluster = {projection->heads, 1, 1};
    }
    for (int id : symbols_) {
      parameters += fmt::format(", const long long tf_sym{}", id);
      s.launch.args.push_back({LaunchArg::Kind::kScalar, -1, {}, a_.symbols[static_cast<size_t>(id)]});
    }
    // (With the projection, ~100 KB of shared memory a CTA: one or two CTAs an SM, so no cap on
    // registers for more; ptxas otherwise capped them at 64 and spilled, sm_90a.)
    std::string out = fmt::format("extern \"C\" __global__ void __launch_bounds__({}{}) {}({}) {{\n", s.threads, projection ? ", 1" : "",
                                  a_.name, parameters);
    out += fmt::format(
        "  struct Config {{\n"
        "    using Element = {};\n"
        "    using Index = {};\n"
        "    enum : int {{ kD = {}, kDV = {}, kWarps = {}, kKDimsContiguous = {}, kVColumnsContiguous = {}, kZeroNanRows = {}, kSplit = {}, "
        "kUpdates = {} }};\n"
        "    enum : int {{ kProjection = {}, kHeads = {}, kWKMajor = {} }};\n"
        "    static constexpr __device__ float OutputScale() {{ return {}f; }}\n"
        "  }};\n",
        TileElementType(a_.dtype), IndexType(), a_.d, a_.dv, kDecodeWarps, KDimsContiguous() ? 1 : 0, VRowsInVectors() ? 1 : 0,
        a_.zero_nan_rows ? 1 : 0, split ? 1 : 0, a_.cache_update ? 1 : 0, projection ? 1 : 0, projection ? projection->heads : 0,
        projection && projection->product.b_k_major >= 0 ? 1 : 0, FloatLiteral(a_.output_scale));
    out += BatchStruct();
    out += LogitsStruct("Logits", "the group's logits program, its mask included", a_.logits, a_.logit);
    const std::string batch = fmt::format("Batch{{{}}}", SymbolArguments(BatchSymbols(), "Config::Index"));
    if (projection) {  // (W before the wait: no kernel of the model writes it)
      out += GemmEpilogueStruct(projection->product, -1, -1, -1, "Epilogue", /*with_prefetch=*/true);
      out += "  tf::DecodeProjectionStart<Config>(map_w);\n";
    }
    if (c_.decode_prefetch)  // (before the wait: it reads nothing the grid ahead writes)
      out += fmt::format("  tf::AttentionDecodePrefetch<Config>(k, v, operands, {}, {}{});\n", Lengths(), batch,
                         split ? ", (int)keys_per_split" : "");
    out += "  tf::tf_await_prior_grid();\n";
    if (projection)  // the epilogue's loads (the bias, the residual) asked of L1 while the attention runs
      out += fmt::format("  const Epilogue epilogue{{{}}};\n"
                         "  if (threadIdx.x < 64) epilogue.Prefetch((Config::Index)(blockIdx.x / Config::kHeads), (int)tf::tf_cluster_rank() * 64 + "
                         "(int)threadIdx.x);\n",
                         projection_buffers);
    out += fmt::format("  tf::AttentionDecode<Config>(q, k, v, operands, {}, {}, {}, {}, {}{}{});\n", Lengths(), batch,
                       Hook("Logits", a_.logits, a_.logit), projection ? "nullptr" : fmt::format("b{}", a_.output),
                       a_.logsumexp >= 0 ? fmt::format("b{}", a_.logsumexp) : "nullptr",
                       split ? ", tf::DecodeSplit{(int)keys_per_split, row_counters, partials}" : "", update_argument);
    if (projection) out += "  tf::DecodeProjection<Config>(epilogue, (int)(blockIdx.x / Config::kHeads));\n";
    out += "}\n";
    FinishTemplateSource(s, std::move(out), projection ? DecodeProjectionSharedBytes(projection->product.k) : 0, /*awaits_in_skeleton=*/true);
    if (split) s.launch.scratch_bytes = kScratchCounterBytes + rows * ranges * (2 + a_.dv) * 4;
    return s;
  }

 private:
  static constexpr int kDecodeWarps = 8;

  // attention_decode_projection.cuh's DecodeProjectionShared: W's columns, the heads' row, the
  // partial sums and two barriers, 1024-byte aligned.
  static int64_t DecodeProjectionSharedBytes(int64_t k) { return 1024 + k * 64 * 2 + k * 4 + 4 * 64 * 4 + 16; }

  // The output projection the decode form computes (DecodeProjectionFold): one query row a head
  // with no split over the keys, every batch entry's heads a cluster (at most 16, 64 columns of
  // W each), A the heads side by side, W of 16-bit elements in whole boxes, in shared memory.
  Status ProjectionFits(const DecodeProjectionFold& p, int64_t rows, bool split) const {
    const GemmTemplateKernel& g = p.product;
    auto refuse = [&](const std::string& why) { return InvalidArgument(fmt::format("{}: the output projection in the kernel: {}", a_.name, why)); };
    if (a_.nq != 1 || split) return refuse("one query row a head, the keys not split");
    if (p.heads < 2 || p.heads > 16 || rows % p.heads != 0) return refuse(fmt::format("{} heads in a cluster of 2 to 16", p.heads));
    if (g.dtype != a_.dtype || g.operand_dtype != a_.dtype || DTypeSize(a_.dtype) != 2) return refuse("a product of the attention's 16-bit type");
    if (g.rows != rows / p.heads || g.k != p.heads * a_.dv || g.n != p.heads * 64 || g.k % 64 != 0)
      return refuse(fmt::format("{} rows, K {}, N {} (need {}, {}, {})", g.rows, g.k, g.n, rows / p.heads, p.heads * a_.dv, p.heads * 64));
    if (!g.b_read_only || g.b_rows || g.b_k_rows || g.layer_norm || g.row_norm || !g.n_parts.empty() || !g.gate.empty() || g.partner ||
        g.store_product || g.output_in_registers || g.a_view || g.a_conv || g.a_mn_major >= 0 || g.split_f32 || g.batch != 1)
      return refuse("a plain product of a weight");
    if (a_.logsumexp >= 0) return refuse("the attention's logsumexp is asked for");
    if (DecodeProjectionSharedBytes(g.k) > kSharedLimit) return refuse(fmt::format("W's columns take {} bytes of shared memory", DecodeProjectionSharedBytes(g.k)));
    return Status::Ok();
  }

  // Whether `operand`'s offset and batch strides, and `stride`, are whole 16-byte vectors of its
  // elements: each row or key of it then starts 16-byte aligned.
  static bool StartsInVectors(const StridedOperand& operand, int64_t stride) {
    const int64_t vector = 16 / DTypeSize(operand.dtype);
    bool aligned = operand.offset % vector == 0 && stride % vector == 0;
    for (const StridedOperand::BatchTerm& t : operand.batch) aligned = aligned && t.stride % vector == 0;
    return aligned;
  }
  // Are each key's dims contiguous and 16-byte aligned wherever a key starts (the decode form
  // then reads them 16 bytes at a time)?
  bool KDimsContiguous() const { return a_.k.row_stride == 1 && StartsInVectors(a_.k, a_.k.column_stride); }
  // Are V's rows (a half type) contiguous and 16-byte aligned wherever a key's row starts, and
  // split evenly over a warp's lanes in 16-byte pieces (head dims 8, 16, 32, 64, 128, 256)? The
  // decode form then reads a few keys' rows at a time, 16 bytes a lane, issued with the keys' loads.
  bool VRowsInVectors() const {
    const StridedOperand& v = a_.v;
    const int64_t lanes = a_.dv / 8;
    return DTypeSize(v.dtype) == 2 && a_.dv % 8 == 0 && lanes <= 32 && 32 % lanes == 0 && v.column_stride == 1 &&
           StartsInVectors(v, v.row_stride);
  }
  // tf::DecodeOperands's bytes: per operand its offset, row and column strides and three batch
  // strides (a batch term the operand lacks: 0), in elements.
  std::vector<uint8_t> DecodeOperandBytes() const { return DecodeOperandBytes({&a_.q, &a_.k, &a_.v}); }
  static std::vector<uint8_t> DecodeOperandBytes(std::initializer_list<const StridedOperand*> operands) {
    std::vector<int64_t> values;
    for (const StridedOperand* operand : operands) {
      values.insert(values.end(), {operand->offset, operand->row_stride, operand->column_stride});
      for (size_t t = 0; t < 3; ++t) values.push_back(t < operand->batch.size() ? operand->batch[t].stride : 0);
    }
    std::vector<uint8_t> bytes(values.size() * sizeof(int64_t));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
  }

  Status Validate() const {
    // Multiples of 64: an operand whose keys are contiguous is loaded in 64-key boxes.
    if (c_.block_n % 64 != 0 || c_.block_n < 64 || c_.block_n > 256)
      return InvalidArgument(fmt::format("{}: block_n {} (need 64, 128, 192 or 256)", a_.name, c_.block_n));
    if (c_.stages < 2) return InvalidArgument(fmt::format("{}: {} stages (need at least 2)", a_.name, c_.stages));
    if (SharedBytes(a_, c_) > kSharedLimit)
      return InvalidArgument(fmt::format("{}: {} bytes of shared memory (the limit is {})", a_.name, SharedBytes(a_, c_), kSharedLimit));
    if (c_.consumers != 2 && c_.consumers != 3)
      return InvalidArgument(fmt::format("{}: {} consumer warpgroups (need 2 or 3)", a_.name, c_.consumers));
    if (c_.q_slots != 1 && c_.q_slots != 2)
      return InvalidArgument(fmt::format("{}: {} Q tiles (need 1 or 2)", a_.name, c_.q_slots));
    if (c_.tiles != 1 && c_.tiles != 2 && c_.tiles != 4)
      return InvalidArgument(fmt::format("{}: {} query blocks per CTA (need 1, 2 or 4)", a_.name, c_.tiles));
    if (c_.consumers == 3 && c_.loop == AttentionLoop::kPingPong)
      return InvalidArgument(fmt::format("{}: ping-pong takes two consumer warpgroups, not three", a_.name));
    const int64_t m_blocks = CeilDiv(a_.nq, c_.BlockM());
    if (!c_.key_blocks.empty() && static_cast<int64_t>(c_.key_blocks.size()) != m_blocks)
      return InvalidArgument(fmt::format("{}: {} key-block ranges for {} query blocks", a_.name, c_.key_blocks.size(), m_blocks));
    if (!c_.interior.blocks.empty() && static_cast<int64_t>(c_.interior.blocks.size()) != m_blocks)
      return InvalidArgument(fmt::format("{}: {} interior ranges for {} query blocks", a_.name, c_.interior.blocks.size(), m_blocks));
    if (NumElements(a_.batch_shape) * m_blocks >= (int64_t{1} << 31))
      return InvalidArgument(fmt::format("{}: too many query blocks for one grid", a_.name));
    return Status::Ok();
  }

  std::string LoopName() const {
    std::string out;
    if (AllInterior()) out = ", no mask";
    else if (HasInterior()) out = ", mask on edge blocks only";
    if (c_.loop == AttentionLoop::kOverlap) out += ", softmax overlapping P·V";
    if (c_.loop == AttentionLoop::kPingPong) out += ", softmax overlapping P·V, ping-pong consumers";
    if (c_.poly_exp_every > 0) out += fmt::format(", 1/{} of exp2 on the FMA pipe", c_.poly_exp_every);
    if (c_.lazy_margin >= 0) out += ", lazy rescaling";
    return out;
  }

  // A second Q tile where a CTA runs several query blocks and shared memory has room beside
  // two K/V stages: the producer loads the next block's Q while the consumers still read this
  // one, so that neither waits at the switch for the last S to finish and the load to land.
  // Measured on an H200 (2026-11-27, B4 H16 N4096 causal d64, two rounds): 345 / 343 us with
  // one Q tile, 335 / 332 with two (SDPA 332).
  int QSlotsByRule() const {
    CudaAttentionConfig two = c_;
    two.q_slots = 2;
    two.stages = 2;
    return c_.tiles > 1 && SharedBytes(a_, two) <= kSharedLimit ? 2 : 1;
  }

  // Several query blocks per CTA where a mask skips key blocks: their pairing evens out the
  // CTAs' work. Measured on an H100 (2026-11-25, B4 H16 N4096, two rounds; 1 / 2 / 4 blocks
  // per CTA): causal d64 361 / 346 / 342 us, causal d128 468 / 458 / 459. Without a mask the
  // CTAs' work is equal already and fewer CTAs round worse into waves: full d64 (three
  // consumers) 537 / 624 / 644, full d128 806 / 812-868 / 827. As many as leave two waves.
  int TilesByRule() const {
    if (!SkipsKeyBlocks()) return 1;
    const int64_t m_blocks = CeilDiv(a_.nq, c_.BlockM()), batch = NumElements(a_.batch_shape);
    for (int tiles : {4, 2})
      if (batch * CeilDiv(m_blocks, tiles) >= 2 * int64_t{c_.sm_count}) return tiles;
    return 1;
  }

  bool SkipsKeyBlocks() const {
    const int key_blocks = static_cast<int>(CeilDiv(a_.nk, c_.block_n));
    for (const KeyBlockRange& r : c_.key_blocks)
      if (r.first > 0 || r.last < key_blocks - 1) return true;
    return false;
  }

  // Per query block, its key blocks, and the query blocks each CTA of a batch entry runs
  // (kTiles slots per CTA, -1: none): most key blocks first, so the short ones fill the last
  // wave; with several tiles per CTA, the heaviest left paired with the lightest left, so that
  // the CTAs' work is about equal.
  std::vector<int> QueryBlockOrder() const {
    std::vector<int> order(c_.key_blocks.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    auto work = [&](int m) { return c_.key_blocks[m].last - c_.key_blocks[m].first; };
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return work(x) > work(y); });
    std::vector<int> slots;
    for (size_t heavy = 0, light = order.size(); heavy < light;) {
      slots.push_back(order[heavy++]);
      if (c_.tiles > 1 && heavy < light) slots.push_back(order[--light]);
    }
    while (slots.size() % c_.tiles != 0) slots.push_back(-1);
    return slots;
  }
  static std::string Joined(const std::vector<int>& values) {
    std::string out;
    for (size_t i = 0; i < values.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", values[i]);
    return out;
  }
  std::vector<int> Firsts(const std::vector<KeyBlockRange>& ranges) const {
    std::vector<int> out;
    for (const KeyBlockRange& r : ranges) out.push_back(r.first);
    return out;
  }
  std::vector<int> Lasts(const std::vector<KeyBlockRange>& ranges) const {
    std::vector<int> out;
    for (const KeyBlockRange& r : ranges) out.push_back(r.last);
    return out;
  }
  std::string KeyBlockTables() const {
    if (!SkipsKeyBlocks() || tables_at_launch_) return "";
    return fmt::format(
        "static __device__ const short {0}_first_key_block[] = {{{1}}};\n"
        "static __device__ const short {0}_last_key_block[] = {{{2}}};\n"
        "static __device__ const short {0}_query_block_order[] = {{{3}}};\n",
        a_.name, Joined(Firsts(c_.key_blocks)), Joined(Lasts(c_.key_blocks)), Joined(QueryBlockOrder()));
  }

  // tf::AttentionTableParameter's bytes: the five tables of `table_capacity_` shorts each.
  std::vector<uint8_t> TableBytes() const {
    std::vector<int16_t> values(5 * static_cast<size_t>(table_capacity_), -1);
    auto put = [&](int table, const std::vector<int>& entries) {
      for (size_t i = 0; i < entries.size(); ++i) values[table * table_capacity_ + i] = static_cast<int16_t>(entries[i]);
    };
    if (SkipsKeyBlocks()) {
      put(0, QueryBlockOrder());
      put(1, Firsts(c_.key_blocks));
      put(2, Lasts(c_.key_blocks));
    }
    if (InteriorFromTables()) {
      put(3, Firsts(c_.interior.blocks));
      put(4, Lasts(c_.interior.blocks));
    }
    std::vector<uint8_t> bytes(values.size() * sizeof(int16_t));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
  }

  // Does `program` load buffer `buffer`?
  static bool Reads(const Kernel& program, int buffer) {
    for (const ScalarValue& v : program.values)
      if (v.kind == ScalarValue::Kind::kLoad && v.buffer == buffer) return true;
    return false;
  }

  // The tensor map of a strided operand: its contiguous dim, its other matrix dim, then its
  // batch terms; boxes of 64 contiguous elements (one 128-byte swizzle row) × `box_other`.
  static TensorMapArg Map(const StridedOperand& s, int box_contiguous, int64_t box_other) {
    TensorMapArg m;
    m.node = s.node;
    m.dtype = s.dtype;
    m.rank = 5;
    const int64_t size = DTypeSize(s.dtype);
    const bool rows_contiguous = s.RowsContiguous();
    m.dims = {rows_contiguous ? s.rows : s.columns, rows_contiguous ? s.columns : s.rows, 1, 1, 1};
    const int64_t other_stride = (rows_contiguous ? s.column_stride : s.row_stride) * size;
    m.strides_bytes = {other_stride, other_stride, other_stride, other_stride};
    for (size_t t = 0; t < s.batch.size(); ++t) {
      m.dims[2 + t] = s.batch[t].extent;
      m.strides_bytes[1 + t] = s.batch[t].stride * size;
    }
    m.box = {box_contiguous, static_cast<int>(box_other), 1, 1, 1};
    m.offset_bytes = s.offset * size;
    return m;
  }
  // Kᵀ ([d][nk]) and V ([nk][dv]) as B operands with reduction tile `r_tile` and N tile
  // `n_tile`: boxes of 64 × the tile of the other dim.
  static TensorMapArg OperandMap(const StridedOperand& s, int64_t r_tile, int64_t n_tile) {
    return Map(s, 64, s.RowsContiguous() ? n_tile : r_tile);
  }

  // 32-bit element indexes when every buffer's fit.
  const char* IndexType() const {
    int64_t largest = NumElements(a_.batch_shape) * a_.nq * std::max(a_.nk, a_.dv);
    for (const KernelBuffer& b : a_.buffers) largest = std::max(largest, b.elements);
    return largest < (int64_t{1} << 31) ? "int" : "long long";
  }

  // Where the logits run without their mask (tf::AttentionInterior).
  std::string InteriorKind() const {
    if (MasklessAtLaunch()) return "tf::kSameInterior";
    if (AllInterior()) return "tf::kAllInterior";
    if (!HasInterior()) return "tf::kNoInterior";
    if (InteriorFromTables()) return "tf::kInteriorTables";
    return "tf::kSameInterior";
  }

  // The kernel takes nq, nk and the batch at launch where the model's symbols give them. A
  // mask's key-block tables (causal attention's) then come as a parameter
  // (tf::AttentionTableParameter, table_capacity_ query blocks: the next power of two, so that
  // lengths share a text), where they fit the parameter space.
  bool SizesAtLaunch() {
    if (!a_.SizesAtLaunch()) return false;
    const bool interior_tables = HasInterior() && !AllInterior() && !WholeBlocksInterior();
    if (!SkipsKeyBlocks() && !interior_tables) return true;
    const int64_t blocks = std::max<int64_t>(CeilDiv(a_.nq, c_.BlockM()), static_cast<int64_t>(QueryBlockOrder().size()));
    table_capacity_ = 16;
    while (table_capacity_ < blocks) table_capacity_ *= 2;
    if (table_capacity_ > kMaxTableCapacity) return false;
    tables_at_launch_ = true;
    return true;
  }

  // The symbols the kernel's text names, in id order: the logits programs' and the logits'
  // batch index's constants, and with the sizes at launch, nq, nk and the batch dims.
  std::vector<int> PrintedSymbols() const {
    std::set<int> ids = IndexSymbols(a_.score_batch_index);
    ids.merge(HookSymbols(a_.logits, a_.logit));
    if (HasInterior()) ids.merge(HookSymbols(c_.interior.program, c_.interior.logit));
    if (at_launch_) {
      const std::vector<int> batch = BatchSymbols();
      ids.insert(batch.begin(), batch.end());
      ids.merge(a_.nq_size.Symbols());
      ids.merge(a_.nk_size.Symbols());
    }
    return {ids.begin(), ids.end()};
  }

  // The symbols a logits program's loads print (none where no program runs).
  static std::set<int> HookSymbols(const Kernel& program, int logit) {
    std::set<int> ids;
    if (ScoreMultiplier(program, logit)) return ids;
    for (const ScalarValue& v : program.values) ids.merge(IndexSymbols(v.index));
    return ids;
  }

  // The symbols the Batch hook's coordinates and logits entry print.
  std::vector<int> BatchSymbols() const {
    std::set<int> ids = IndexSymbols(a_.score_batch_index);
    if (at_launch_)
      for (const SymExpr& size : a_.batch_sizes) ids.merge(size.Symbols());
    return {ids.begin(), ids.end()};
  }

  // `ids` as a hook's members of type `type` (`int tf_sym3, tf_sym5;`: a division by a length
  // in the index type, 32 bits where the indexes are) and as its initialisers.
  static std::string SymbolMembers(const std::vector<int>& ids, const std::string& type) {
    std::string out;
    for (int id : ids) out += fmt::format("{}tf_sym{}", out.empty() ? "    " + type + " " : ", ", id);
    return out.empty() ? out : out + ";\n";
  }
  static std::string SymbolArguments(const std::vector<int>& ids, const std::string& type) {
    std::string out;
    for (int id : ids) out += fmt::format("{}({})tf_sym{}", out.empty() ? "" : ", ", type, id);
    return out;
  }

  // A size as the kernel's text has it: the symbols' expression at launch, else the value.
  std::string SizeText(const SymExpr& size, int64_t value) const {
    return at_launch_ && !size.IsConstant() ? "(" + size.Print("tf_sym") + ")" : fmt::format("{}", value);
  }

  // tf::AttentionLengths: nq, nk and kSameInterior's interior key blocks.
  std::string Lengths() const {
    const std::string nq = SizeText(a_.nq_size, a_.nq), nk = SizeText(a_.nk_size, a_.nk);
    std::string first = "0", last = "0";
    if (MasklessAtLaunch()) {
      last = fmt::format("(int){} / {} - 1", nk, c_.block_n);
    } else if (HasInterior() && !AllInterior() && !InteriorFromTables()) {
      first = fmt::format("{}", c_.interior.blocks[0].first);
      last = at_launch_ ? fmt::format("(int){} / {} - 1", nk, c_.block_n) : fmt::format("{}", c_.interior.blocks[0].last);
    }
    return fmt::format("tf::AttentionLengths{{(int){}, (int){}, {}, {}}}", nq, nk, first, last);
  }

  // The skeleton's compile-time configuration, a local class (enumerators: a local class has
  // no static data members) so the kernel's text is all a compile unit needs of it.
  std::string ConfigStruct() const {
    return fmt::format(
        "  struct Config {{\n"
        "    using Element = {};\n"
        "    using Index = {};\n"
        "    enum : int {{ kBM = {}, kBN = {}, kD = {}, kDV = {}, kStages = {}, kConsumers = {}, kTiles = {}, kQSlots = {} }};\n"
        "    enum : int {{ kWholeKeyBlocks = {}, kKMnMajor = {}, kVMnMajor = {} }};\n"
        "    enum : int {{ kOverlap = {}, kPingPong = {}, kPolyExpEvery = {}, kZeroNanRows = {} }};\n"
        "    enum : int {{ kSkipsKeyBlocks = {}, kInterior = {} }};\n"
        "    enum : int {{ kProducerRegisters = {}, kConsumerRegisters = {} }};\n"
        "    static constexpr __device__ float LazyMargin() {{ return {:.1f}f; }}\n"
        "    static constexpr __device__ float OutputScale() {{ return {}f; }}\n"
        "  }};\n",
        TileElementType(a_.dtype), IndexType(), c_.BlockM(), c_.block_n, a_.d, a_.dv, c_.stages, c_.consumers,
        c_.tiles, c_.q_slots, a_.nk % c_.block_n == 0 && !MasklessAtLaunch() ? 1 : 0, a_.k.RowsContiguous() ? 0 : 1, a_.v.RowsContiguous() ? 0 : 1,
        c_.loop == AttentionLoop::kSerial ? 0 : 1, c_.loop == AttentionLoop::kPingPong ? 1 : 0, c_.poly_exp_every,
        a_.zero_nan_rows ? 1 : 0, SkipsKeyBlocks() ? 1 : 0, InteriorKind(), kProducerRegisters, ConsumerRegisters(c_), c_.lazy_margin,
        FloatLiteral(a_.output_scale));
  }

  // The batch coordinates of a strided operand's map, from the output batch coordinates o<d>.
  static std::string BatchCoordinates(const StridedOperand& s) {
    std::string out;
    for (size_t t = 0; t < 3; ++t) {
      out += t ? ", " : "{";
      if (t < s.batch.size())
        out += s.batch[t].divisor == 1 ? fmt::format("o{}", s.batch[t].dim) : fmt::format("o{} / {}", s.batch[t].dim, s.batch[t].divisor);
      else
        out += "0";
    }
    return out + "}";
  }

  // Batch entry `batch` (the flat output batch index) as Q, K and V coordinates, and as the
  // logits' batch entry.
  std::string BatchStruct() const {
    std::string coordinates;
    int64_t stride = 1;
    SymExpr stride_size = SymExpr::Constant(1);
    for (int d = static_cast<int>(a_.batch_shape.size()) - 1; d >= 0; --d) {
      const SymExpr extent = at_launch_ ? a_.batch_sizes[d] : SymExpr::Constant(a_.batch_shape[d]);
      coordinates = fmt::format("      const int o{} = batch / {} % {};\n", d, SizeText(stride_size, stride), SizeText(extent, a_.batch_shape[d])) +
                    coordinates;
      stride *= a_.batch_shape[d];
      stride_size = stride_size * extent;
    }
    return fmt::format(
        "  struct Batch {{\n"
        "{}"
        "    __device__ __forceinline__ tf::AttentionBatch operator()(int batch) const {{\n"
        "{}"
        "      return {{{}, {}, {}}};\n"
        "    }}\n"
        "    __device__ __forceinline__ Config::Index LogitsEntry(int batch) const {{ return (Config::Index)({}); }}\n"
        "  }};\n",
        SymbolMembers(BatchSymbols(), "Config::Index"), coordinates, BatchCoordinates(a_.q), BatchCoordinates(a_.k), BatchCoordinates(a_.v), PrintIndex(a_.score_batch_index, {"batch"}));
  }

  // The buffers a logits hook holds: those its program reads (none where the logit is the
  // score times a constant: no program runs).
  std::vector<int> HeldBuffers(const Kernel& program, int logit) const {
    std::vector<int> held;
    if (ScoreMultiplier(program, logit)) return held;
    for (size_t b = 0; b < a_.buffers.size(); ++b)
      if (Reads(program, static_cast<int>(b))) held.push_back(static_cast<int>(b));
    return held;
  }
  // The hook `name` initialised from the kernel's parameters.
  std::string Hook(const std::string& name, const Kernel& program, int logit) const {
    std::string out = name + "{";
    for (int b : HeldBuffers(program, logit)) out += fmt::format("{}b{}", out.back() == '{' ? "" : ", ", b);
    for (int id : HookSymbols(program, logit)) out += fmt::format("{}({}::tf_index_t)tf_sym{}", out.back() == '{' ? "" : ", ", name, id);
    return out + "}";
  }

  // A logits hook (tf::AttentionFwdSm90's Logits): the score times a constant (folded into the
  // softmax's multiplier), or `program`'s logit of (row, key) with the score given; the
  // skeleton masks keys past the end. Row and key come by reference: taken by value, the
  // mask's compares were canonicalised with their operands swapped (before inlining, where
  // they are arguments) and scheduled differently from the program printed inline (nvcc 13,
  // causal d64: 514 of 2945 instructions moved or changed); by reference, as inline.
  std::string LogitsStruct(const char* name, const char* comment, const Kernel& program, int logit) const {
    const std::optional<double> c = ScoreMultiplier(program, logit);
    std::string out = fmt::format("  struct {} {{  // {}\n", name, comment);
    if (c) {
      // log2(e) · c · the Q/K scales: s times this is the base-2 logit.
      return out + fmt::format(
                       "    enum : int {{ kScoreTimesMultiplier = 1 }};\n"
                       "    static constexpr __device__ float Multiplier() {{ return {}f; }}\n"
                       "  }};\n",
                       FloatLiteral(*c * a_.score_scale * 1.4426950408889634));
    }
    std::map<int, std::string> given;
    for (size_t v = 0; v < program.values.size(); ++v)
      if (program.values[v].kind == ScalarValue::Kind::kLoad && program.values[v].buffer < 0)
        given[static_cast<int>(v)] = a_.score_scale == 1 ? "score" : fmt::format("(score * {}f)", FloatLiteral(a_.score_scale));
    out += fmt::format("    typedef {} tf_index_t;\n", IndexType());
    for (int b : HeldBuffers(program, logit)) out += fmt::format("    const {}* __restrict__ b{};\n", StorageType(a_.buffers[b].dtype), b);
    const std::set<int> symbols = HookSymbols(program, logit);
    out += SymbolMembers({symbols.begin(), symbols.end()}, "tf_index_t");
    out +=
        "    enum : int { kScoreTimesMultiplier = 0 };\n"
        "    static constexpr __device__ float Multiplier() { return 1.0f; }\n"
        "    __device__ __forceinline__ float operator()(const tf_index_t& row, const int& key, float score) const {\n";
    out += CudaElementProgram(program, {logit}, given, {"row", "key"}, "      ");
    return out + fmt::format("      return (float)v{};\n    }}\n  }};\n", logit);
  }

  // The key-block and interior tables the skeleton reads (KeyBlockTables, InteriorTables).
  std::string Tables() const {
    if (tables_at_launch_) return "tables.Tables()";
    const std::string none = "nullptr, nullptr";
    return fmt::format("tf::AttentionBlockTables{{{}, {}, {}}}",
                       SkipsKeyBlocks() ? fmt::format("{0}_query_block_order", a_.name) : "nullptr",
                       SkipsKeyBlocks() ? fmt::format("{0}_first_key_block, {0}_last_key_block", a_.name) : none,
                       InteriorFromTables() ? fmt::format("{0}_first_inner_block, {0}_last_inner_block", a_.name) : none);
  }

  // Interior key blocks (InteriorLogits): where the logits run without their mask.
  bool HasInterior() const { return c_.interior.Any(); }
  bool AllInterior() const {
    const int key_blocks = static_cast<int>(CeilDiv(a_.nk, c_.block_n));
    for (const KeyBlockRange& r : c_.interior.blocks)
      if (r.first != 0 || r.last != key_blocks - 1) return false;
    return HasInterior();
  }

  // Do the query blocks' interior key blocks differ (then they are tables)?
  bool InteriorVaries() const {
    if (!HasInterior() || AllInterior()) return false;
    const std::vector<KeyBlockRange>& r = c_.interior.blocks;
    for (const KeyBlockRange& x : r)
      if (x.first != r[0].first || x.last != r[0].last) return true;
    return false;
  }
  std::string InteriorTables() const {
    if (!InteriorFromTables() || tables_at_launch_) return "";
    return fmt::format("static __device__ const short {0}_first_inner_block[] = {{{1}}};\n"
                       "static __device__ const short {0}_last_inner_block[] = {{{2}}};\n",
                       a_.name, Joined(Firsts(c_.interior.blocks)), Joined(Lasts(c_.interior.blocks)));
  }

  // Are the interior key blocks read from tables (per query block): where they vary, and where
  // the lengths come at launch and the interior is not every whole key block (Lengths).
  bool InteriorFromTables() const {
    return InteriorVaries() || (tables_at_launch_ && HasInterior() && !AllInterior() && !WholeBlocksInterior());
  }
  // Logits without a mask (the score times a constant) over a length given at launch: every
  // whole key block is interior (kSameInterior, to nk / kBN - 1 at launch) and the last may be
  // partial (kWholeKeyBlocks 0), at every binding, so that every length of a decode loop's
  // keys shares one kernel.
  bool MasklessAtLaunch() const { return at_launch_ && ScoreMultiplier(a_.logits, a_.logit).has_value(); }
  // Is the interior of every query block its whole key blocks (a mask-free program's: only the
  // last, partial block is not)?
  bool WholeBlocksInterior() const {
    return HasInterior() && !InteriorVaries() && c_.interior.blocks[0].first == 0 && c_.interior.blocks[0].last == a_.nk / c_.block_n - 1;
  }

  // A double as a float literal's digits (max_digits10: the float it rounds to is exact).
  static std::string FloatLiteral(double v) { return fmt::format("{:.9e}", static_cast<float>(v)); }

  const AttentionTemplateKernel& a_;
  CudaAttentionConfig c_;
  bool at_launch_ = false;         // SizesAtLaunch
  bool tables_at_launch_ = false;  // the key-block tables a parameter (SizesAtLaunch)
  int table_capacity_ = 0;         // its query blocks
  std::vector<int> symbols_;       // PrintedSymbols
};

}  // namespace

// TILEFUSE_DECODE_ATTENTION=0 keeps the tiled kernel for every attention (for comparison).
bool UsesDecodeForm(const AttentionTemplateKernel& attention) {
  static const bool off = SwitchedOff("TILEFUSE_DECODE_ATTENTION");
  return attention.nq <= kDecodeRows && !off;
}

StatusOr<CudaKernelSource> EmitCudaDecodeAttention(const AttentionTemplateKernel& attention, const CudaAttentionConfig& config) {
  return AttentionEmitter(attention, ResolveAttentionConfig(attention, config)).RunDecode();
}

StatusOr<CudaKernelSource> EmitCudaAttention(const AttentionTemplateKernel& attention, const CudaAttentionConfig& config) {
  return AttentionEmitter(attention, ResolveAttentionConfig(attention, config)).Run();
}

}  // namespace tilefuse
