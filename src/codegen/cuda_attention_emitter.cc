#include "codegen/cuda_attention_emitter.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>

#include "codegen/cuda_scalar_program.h"
#include "codegen/cuda_wgmma.h"
#include "codegen/emit_util.h"

namespace tilefuse {

namespace {

constexpr int64_t kSharedLimit = 227 * 1024;
constexpr int kProducerRegisters = 24;
// What setmaxnreg gives each consumer thread: 240 with two consumers, 160 with three (the
// register file's 64K over 512 threads, less the producer's share).
int ConsumerRegisters(const CudaAttentionConfig& c) { return c.consumers == 3 ? 160 : 240; }
constexpr float kLazyMarginByRule = -2;  // CudaAttentionConfig's default: Resolve decides

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Shared memory: the Q tiles, the K and V ring, barriers (Q full and empty per Q tile; full and empty
// per stage for K and for V), aligned to 1024 bytes (the swizzle period).
int64_t SharedBytes(const AttentionTemplateKernel& a, const CudaAttentionConfig& c) {
  const int q_slots = std::max(c.q_slots, 1);
  return 1024 + int64_t{q_slots} * c.BlockM() * a.d * 2 + int64_t{c.stages} * c.block_n * (a.d + a.dv) * 2 + 8 * (2 * q_slots + 4 * c.stages);
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
    const bool maskless = a.nk % c.block_n == 0 && a.logits.values.size() <= 4 && ScoreMultiplier(a.logits, a.logit).has_value();
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
    s.strategy = fmt::format("attention template {}x{}, d {}/{}, {} stages, K {}, V {}{}{}{}{}", c_.BlockM(), c_.block_n, a_.d, a_.dv, c_.stages,
                             a_.k.RowsContiguous() ? "K-major" : "MN-major", a_.v.RowsContiguous() ? "K-major" : "MN-major",
                             SkipsKeyBlocks() ? ", masked key blocks skipped" : "", LoopName(),
                             c_.tiles > 1 ? fmt::format(", {} query blocks per CTA", c_.tiles) : "",
                             c_.q_slots > 1 ? ", Q double-buffered" : "");
    out_ = KeyBlockTables() + InteriorTables();
    out_ += WgmmaFunction(a_.name + "_qk", c_.block_n, a_.dtype, /*b_mn_major=*/!a_.k.RowsContiguous());
    out_ += WgmmaRegisterAFunction(a_.name + "_pv", static_cast<int>(a_.dv), a_.dtype, /*b_mn_major=*/!a_.v.RowsContiguous());
    out_ += fmt::format(
        "extern \"C\" __global__ void __launch_bounds__({}, 1) {}(const __grid_constant__ tf::TensorMap map_q, "
        "const __grid_constant__ tf::TensorMap map_k, const __grid_constant__ tf::TensorMap map_v",
        threads, a_.name);
    s.launch.args.push_back({LaunchArg::Kind::kTensorMap, a_.q.node, Map(a_.q, 64, c_.BlockM()), 0});
    s.launch.args.push_back({LaunchArg::Kind::kTensorMap, a_.k.node, OperandMap(a_.k, a_.d, c_.block_n), 0});
    s.launch.args.push_back({LaunchArg::Kind::kTensorMap, a_.v.node, OperandMap(a_.v, c_.block_n, a_.dv), 0});
    for (size_t b = 0; b < a_.buffers.size(); ++b) {
      const KernelBuffer& buf = a_.buffers[b];
      if (!buf.is_output && !LogitsRead(static_cast<int>(b))) continue;
      out_ += fmt::format(", {}{}* __restrict__ b{}", buf.is_output ? "" : "const ", StorageType(buf.dtype), b);
      s.launch.args.push_back({LaunchArg::Kind::kBuffer, buf.node, {}, 0});
    }
    out_ += ") {\n";
    EmitSetup();
    EmitProducer();
    EmitConsumer();
    out_ += "}\n";
    FinishTemplateSource(s, std::move(out_), SharedBytes(a_, c_));
    return s;
  }

 private:
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
  std::string KeyBlockTables() const {
    if (!SkipsKeyBlocks()) return "";
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
    std::string first, last, by_work;
    for (size_t i = 0; i < order.size(); ++i) {
      first += fmt::format("{}{}", i ? ", " : "", c_.key_blocks[i].first);
      last += fmt::format("{}{}", i ? ", " : "", c_.key_blocks[i].last);
    }
    for (size_t i = 0; i < slots.size(); ++i) by_work += fmt::format("{}{}", i ? ", " : "", slots[i]);
    return fmt::format(
        "static __device__ const short {0}_first_key_block[] = {{{1}}};\n"
        "static __device__ const short {0}_last_key_block[] = {{{2}}};\n"
        "static __device__ const short {0}_query_block_order[] = {{{3}}};\n",
        a_.name, first, last, by_work);
  }

  bool LogitsRead(int buffer) const {
    for (const ScalarValue& v : a_.logits.values)
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

  // The batch coordinates of a strided operand's map, from the output batch coordinates.
  static std::string BatchCoordinates(const StridedOperand& s) {
    std::string out;
    for (size_t t = 0; t < 3; ++t) {
      if (t < s.batch.size())
        out += s.batch[t].divisor == 1 ? fmt::format(", o{}", s.batch[t].dim) : fmt::format(", o{} / {}", s.batch[t].dim, s.batch[t].divisor);
      else
        out += ", 0";
    }
    return out;
  }

  void EmitSetup() {
    int64_t largest = NumElements(a_.batch_shape) * a_.nq * std::max(a_.nk, a_.dv);
    for (const KernelBuffer& b : a_.buffers) largest = std::max(largest, b.elements);
    out_ += fmt::format("  typedef {} tf_index_t;\n", largest < (int64_t{1} << 31) ? "int" : "long long");
    out_ += fmt::format("  constexpr int kBM = {}, kBN = {}, kD = {}, kDV = {}, kStages = {}, kConsumers = {};\n", c_.BlockM(), c_.block_n,
                        a_.d, a_.dv, c_.stages, c_.consumers);
    out_ += fmt::format("  constexpr int kNQ = {}, kNK = {}, kMBlocks = {}, kKeyBlocks = {};\n", a_.nq, a_.nk, CeilDiv(a_.nq, c_.BlockM()),
                        CeilDiv(a_.nk, c_.block_n));
    out_ += fmt::format("  constexpr int kTiles = {}, kCtasPerBatch = (kMBlocks + kTiles - 1) / kTiles;  // query blocks per CTA\n",
                        c_.tiles);
    out_ += fmt::format("  constexpr int kQSlots = {};  // Q tiles: the next query block's loads while this one's is read\n", c_.q_slots);
    out_ += fmt::format("  constexpr int kPolyExpEvery = {};  // every n-th column block's exponentials on the FMA pipe\n",
                        c_.poly_exp_every);
    out_ += fmt::format("  constexpr float kLazyMargin = {:.1f}f;  // how far a row's maximum may grow before O is rescaled\n",
                        c_.lazy_margin);
    out_ +=
        "  constexpr unsigned kQBytes = kBM * kD * 2, kKBytes = kBN * kD * 2, kVBytes = kBN * kDV * 2;\n"
        "  extern __shared__ unsigned char tf_shared_raw[];\n"
        "  unsigned char* shared = tf_shared_raw + ((1024 - (tf::SharedAddress(tf_shared_raw) & 1023)) & 1023);\n"
        "  unsigned short* tile_q = (unsigned short*)shared;     // [slot][kD / 64][kBM][64], 128-byte swizzle\n"
        "  unsigned short* tile_k = tile_q + kQSlots * kBM * kD; // [stage] Kᵀ tiles\n"
        "  unsigned short* tile_v = tile_k + kStages * kBN * kD; // [stage] V tiles\n"
        "  tf::Barrier* q_full = (tf::Barrier*)(tile_v + kStages * kBN * kDV);\n"
        "  tf::Barrier* q_empty = q_full + kQSlots;  // the consumers are done with a Q slot: another tile's may load\n"
        "  tf::Barrier* k_full = q_empty + kQSlots;\n"
        "  tf::Barrier* k_empty = k_full + kStages;\n"
        "  tf::Barrier* v_full = k_empty + kStages;\n"
        "  tf::Barrier* v_empty = v_full + kStages;\n"
        "  if (threadIdx.x == 0) {\n"
        "    for (int s = 0; s < kQSlots; ++s) {\n"
        "      q_full[s].Init(1);\n"
        "      q_empty[s].Init(kConsumers);\n"
        "    }\n"
        "    for (int s = 0; s < kStages; ++s) {\n"
        "      k_full[s].Init(1);\n"
        "      v_full[s].Init(1);\n"
        "      k_empty[s].Init(kConsumers);  // every consumer reads every slot\n"
        "      v_empty[s].Init(kConsumers);\n"
        "    }\n"
        "    tf::FenceBarrierInit();\n"
        "  }\n"
        "  __syncthreads();\n"
        "  // CTAs of one batch entry (same K and V) are neighbours in launch order.\n"
        "  const int batch = blockIdx.x / kCtasPerBatch;\n"
        "  const int first_slot = blockIdx.x % kCtasPerBatch * kTiles;\n"
        "  // This CTA's query block `t` and the key blocks it reads; false past its last.\n";
    if (SkipsKeyBlocks())
      out_ += fmt::format(
          "  // The key blocks the mask leaves a query block (others are never loaded).\n"
          "  auto tile = [&](int t, int& m_block, int& kb_first, int& kb_last) {{\n"
          "    m_block = {0}_query_block_order[first_slot + t];\n"
          "    if (m_block < 0) return false;\n"
          "    kb_first = {0}_first_key_block[m_block];\n"
          "    kb_last = {0}_last_key_block[m_block];\n"
          "    return true;\n"
          "  }};\n",
          a_.name);
    else
      out_ +=
          "  auto tile = [&](int t, int& m_block, int& kb_first, int& kb_last) {\n"
          "    m_block = first_slot + t;\n"
          "    kb_first = 0;\n"
          "    kb_last = kKeyBlocks - 1;\n"
          "    return m_block < kMBlocks;\n"
          "  };\n";
    int64_t stride = 1;
    std::vector<std::string> coords(a_.batch_shape.size());
    for (int d = static_cast<int>(a_.batch_shape.size()) - 1; d >= 0; --d) {
      coords[d] = fmt::format("  const int o{} = batch / {} % {};\n", d, stride, a_.batch_shape[d]);
      stride *= a_.batch_shape[d];
    }
    for (const std::string& c : coords) out_ += c;
    out_ += "  const int warpgroup = threadIdx.x / 128;\n";
  }

  // The TMA loads of one K or V stage.
  std::string StageLoads(const StridedOperand& s, const char* map, const char* tile, const char* r_tile, const char* n_tile,
                         const char* r0, const char* n0, const char* barrier) const {
    const std::string batch = BatchCoordinates(s);
    if (s.RowsContiguous())  // K-major: [R/64][N][64]
      return fmt::format(
          "#pragma unroll\n"
          "        for (int box = 0; box < {2} / 64; ++box)\n"
          "          tf::TmaLoad5d({1} + ring.stage * {2} * {3} + box * {3} * 64, {0}, {4} + box * 64, {5}{6}, {7}[ring.stage]);\n",
          map, tile, r_tile, n_tile, r0, n0, batch, barrier);
    return fmt::format(  // MN-major: [N/64][R][64]
        "#pragma unroll\n"
        "        for (int box = 0; box < {3} / 64; ++box)\n"
        "          tf::TmaLoad5d({1} + ring.stage * {2} * {3} + box * {2} * 64, {0}, {5} + box * 64, {4}{6}, {7}[ring.stage]);\n",
        map, tile, r_tile, n_tile, r0, n0, batch, barrier);
  }

  void EmitProducer() {
    out_ += fmt::format(
        "  if (warpgroup == 0) {{  // producer: one thread loads Q, then keeps the K/V ring full\n"
        "    tf::Warpgroup::ShrinkRegisters<{}>();\n"
        "    if (threadIdx.x != 0) return;\n"
        "    tf::Pipeline<kStages> ring;  // one ring over every tile's key blocks\n"
        "    int m_block, kb_first, kb_last;\n"
        "    for (int t = 0; t < kTiles && tile(t, m_block, kb_first, kb_last); ++t) {{\n"
        "    const int q_slot = t % kQSlots;\n"
        "    if (t >= kQSlots) q_empty[q_slot].Wait((t / kQSlots - 1) & 1);\n"
        "    q_full[q_slot].ArriveExpectingBytes(kQBytes);\n"
        "#pragma unroll\n"
        "    for (int box = 0; box < kD / 64; ++box)\n"
        "      tf::TmaLoad5d(tile_q + q_slot * kBM * kD + box * kBM * 64, map_q, box * 64, m_block * kBM{}, q_full[q_slot]);\n"
        "    for (int kb = kb_first; kb <= kb_last; ++kb, ring.Advance()) {{\n"
        "      const int key0 = kb * kBN;\n"
        "      k_empty[ring.stage].Wait(ring.phase ^ 1);\n"
        "      k_full[ring.stage].ArriveExpectingBytes(kKBytes);\n",
        kProducerRegisters, BatchCoordinates(a_.q));
    out_ += StageLoads(a_.k, "map_k", "tile_k", "kD", "kBN", "0", "key0", "k_full");
    out_ +=
        "      v_empty[ring.stage].Wait(ring.phase ^ 1);\n"
        "      v_full[ring.stage].ArriveExpectingBytes(kVBytes);\n";
    out_ += StageLoads(a_.v, "map_v", "tile_v", "kBN", "kDV", "key0", "0", "v_full");
    out_ +=
        "    }\n"
        "    }\n"
        "    return;\n"
        "  }\n";
  }

  // wgmma B descriptor of k16 step `kk` of a stage's tile.
  static std::string Descriptor(const StridedOperand& s, const char* tile, const char* r_tile, const char* n_tile) {
    if (s.RowsContiguous())
      return fmt::format("tf::SharedMatrix::KMajor({0} + (kk / 4) * {1} * 64 + (kk % 4) * 16)", tile, n_tile);
    return fmt::format("tf::SharedMatrix::MnMajor({0} + kk * 16 * 64, {1} * 128)", tile, r_tile);
  }

  // The consumer's main loop over its key blocks, from the pieces above.
  static constexpr const char* kSerialLoop =
      "  for (int kb = kb_first; kb <= kb_last; ++kb, ring.Advance()) {\n"
      "    k_full[ring.stage].Wait(ring.phase);\n"
      "    issue_qk(ring.stage);\n"
      "    tf::Warpgroup::Wait<0>();\n"
      "    if (local == 0) k_empty[ring.stage].Arrive();\n"
      "    softmax(kb);\n"
      "    rescale_and_pack();\n"
      "    v_full[ring.stage].Wait(ring.phase);\n"
      "    issue_pv(ring.stage);\n"
      "    tf::Warpgroup::Wait<0>();\n"
      "    if (local == 0) v_empty[ring.stage].Arrive();\n"
      "  }\n"
      "  if (local == 0) q_empty[q_slot].Arrive();  // the tile's last S is done: another tile's Q may load there\n";
  // FlashAttention-3's intra-warpgroup pipelining: while P·V of block j runs on the tensor
  // cores, S of block j + 1 is already computed and its softmax runs beside it. With
  // `pingpong`, also its inter-warpgroup schedule: the consumers take turns issuing their
  // matmuls (named barrier 1 + c is consumer c's turn), so one's softmax runs while the
  // other's matmuls have the tensor cores. Consumer 0 goes first (kFirstTurn); consumer 1
  // passes the turn back after every issue but the CTA's last (the arrivals then match the
  // waits). The turns run on across a CTA's query blocks: consumer 0 issues the next block's
  // first S while consumer 1 finishes this one (measured on an H200, 2026-11-27, causal d64
  // B4 H16 N4096: with the turns restarting at every query block, ping-pong took 349 us and
  // the overlap without turns 336).
  static constexpr const char* kFirstTurn = "  if (consumer == 1) tf::NamedBarrierArrive(1, 256);  // consumer 0 has the first turn\n";
  static std::string OverlappedLoop(bool pingpong) {
    const std::string take = pingpong ? "  tf::NamedBarrierSync(1 + consumer, 256);\n" : "";
    auto pass = [&](const char* last) {
      return pingpong ? fmt::format("  if (consumer == 0 || !(last_tile && {})) tf::NamedBarrierArrive(2 - consumer, 256);\n", last) : "";
    };
    return fmt::format(
        "  k_full[ring.stage].Wait(ring.phase);\n"
        "{0}"
        "  issue_qk(ring.stage);\n"
        "{1}"
        "  tf::Warpgroup::Wait<0>();\n"
        "  if (local == 0) k_empty[ring.stage].Arrive();\n"
        "  softmax(kb_first);\n"
        "  rescale_and_pack();\n"
        "  tf::Pipeline<kStages> pending = ring;  // the V tile of the P held in p\n"
        "  ring.Advance();\n"
        "  for (int kb = kb_first + 1; kb <= kb_last; ++kb, ring.Advance()) {{\n"
        "    k_full[ring.stage].Wait(ring.phase);\n"
        "{2}"
        "    issue_qk(ring.stage);\n"
        "    v_full[pending.stage].Wait(pending.phase);\n"
        "    issue_pv(pending.stage);\n"
        "{3}"
        "    tf::Warpgroup::Wait<1>();  // S is done (P·V may still run)\n"
        "    if (local == 0) k_empty[ring.stage].Arrive();\n"
        "    softmax(kb);\n"
        "    tf::Warpgroup::Wait<0>();  // P·V is done: O and p may change\n"
        "    if (local == 0) v_empty[pending.stage].Arrive();\n"
        "    rescale_and_pack();\n"
        "    pending = ring;\n"
        "  }}\n"
        "  if (local == 0) q_empty[q_slot].Arrive();  // the tile's last S is done: another tile's Q may load there\n"
        "  v_full[pending.stage].Wait(pending.phase);\n"
        "  issue_pv(pending.stage);\n"
        "  tf::Warpgroup::Wait<0>();\n"
        "  if (local == 0) v_empty[pending.stage].Arrive();\n",
        take, pass("kb_first == kb_last"), "  " + take, "  " + pass("kb == kb_last"));
  }

  // The tile-library function packing two floats into a pair of the operands' half type.
  std::string Pack() const { return a_.dtype == DType::kBF16 ? "tf::PackBf16x2" : "tf::PackF16x2"; }

  void EmitConsumer() {
    const std::string pack = Pack();
    const bool pingpong = c_.loop == AttentionLoop::kPingPong;
    out_ += fmt::format(
        "  tf::Warpgroup::GrowRegisters<{0}>();\n"
        "  const int consumer = warpgroup - 1;\n"
        "  const int local = threadIdx.x % 128, warp = local / 32, lane = local % 32;\n"
        "  // Accumulator o[j * 4 + h * 2 + e] (and s[...]) holds row warp * 16 + lane / 4 + 8h of\n"
        "  // this consumer's 64, column 8j + (lane % 4) * 2 + e: the wgmma D fragment layout.\n"
        "  float o[kDV / 2];\n"
        "  float s[kBN / 2];\n"
        "  unsigned p[kBN / 16][4];  // P as A fragments (bf16/f16 pairs)\n"
        "  float row_max[2], row_sum[2], rescale[2];\n"
        "  bool rescaled;  // did the last online_softmax move the maxima (O must be rescaled)?\n"
        "  int m_block, kb_first, kb_last, row0;  // the tile's\n"
        "  const tf_index_t score_batch = (tf_index_t)({1}) * kNQ;\n"
        "  const unsigned short* q;  // this consumer's rows of the tile's Q\n"
        "  // S = Q·Kᵀ of the K tile in `stage`, issued (not waited for).\n"
        "  auto issue_qk = [&](int stage) {{\n"
        "    const unsigned short* k = tile_k + stage * kBN * kD;\n"
        "    tf::Warpgroup::Fence();\n"
        "#pragma unroll\n"
        "    for (int kk = 0; kk < kD / 16; ++kk)\n"
        "      {2}_qk(s, tf::SharedMatrix::KMajor(q + (kk / 4) * kBM * 64 + (kk % 4) * 16), {3}, kk > 0);\n"
        "    tf::Warpgroup::Commit();\n"
        "  }};\n"
        "  // O += P·V of the V tile in `stage`, issued.\n"
        "  auto issue_pv = [&](int stage) {{\n"
        "    const unsigned short* v = tile_v + stage * kBN * kDV;\n"
        "    tf::Warpgroup::Fence();\n"
        "#pragma unroll\n"
        "    for (int kk = 0; kk < kBN / 16; ++kk) {2}_pv(o, p[kk], {4}, 1);\n"
        "    tf::Warpgroup::Commit();\n"
        "  }};\n"
        "{5}",
        ConsumerRegisters(c_), PrintIndex(a_.score_batch_index, {"batch"}), a_.name, Descriptor(a_.k, "k", "kD", "kBN"),
        Descriptor(a_.v, "v", "kBN", "kDV"), InteriorBounds());
    EmitSoftmax();
    out_ += fmt::format(
        "  // O rescaled, and P (exp S) converted to A fragments: keys 16c .. 16c + 15 are the\n"
        "  // accumulator columns of blocks 2c and 2c + 1.\n"
        "  auto rescale_and_pack = [&]() {{\n"
        "    if (rescaled)\n"
        "#pragma unroll\n"
        "      for (int j = 0; j < kDV / 8; ++j)\n"
        "#pragma unroll\n"
        "        for (int h = 0; h < 2; ++h) {{\n"
        "          o[j * 4 + h * 2] *= rescale[h];\n"
        "          o[j * 4 + h * 2 + 1] *= rescale[h];\n"
        "        }}\n"
        "#pragma unroll\n"
        "    for (int c = 0; c < kBN / 16; ++c) {{\n"
        "      p[c][0] = {0}(s[8 * c], s[8 * c + 1]);\n"
        "      p[c][1] = {0}(s[8 * c + 2], s[8 * c + 3]);\n"
        "      p[c][2] = {0}(s[8 * c + 4], s[8 * c + 5]);\n"
        "      p[c][3] = {0}(s[8 * c + 6], s[8 * c + 7]);\n"
        "    }}\n"
        "  }};\n"
        "  tf::Pipeline<kStages> ring;  // one ring over every tile's key blocks, as the producer's\n"
        "{3}"
        "  for (int t = 0; t < kTiles && tile(t, m_block, kb_first, kb_last); ++t) {{\n"
        "  row0 = m_block * kBM + consumer * 64 + warp * 16 + lane / 4;\n"
        "{2}{4}"
        "#pragma unroll\n"
        "  for (int i = 0; i < kDV / 2; ++i) o[i] = 0.0f;\n"
        "#pragma unroll\n"
        "  for (int h = 0; h < 2; ++h) {{\n"
        "    row_max[h] = -INFINITY;\n"
        "    row_sum[h] = 0.0f;\n"
        "    rescale[h] = 1.0f;\n"
        "  }}\n"
        "  rescaled = false;\n"
        "  const int q_slot = t % kQSlots;\n"
        "  q = tile_q + q_slot * kBM * kD + consumer * 64 * 64;\n"
        "  q_full[q_slot].Wait(t / kQSlots & 1);\n"
        "{1}",
        pack, c_.loop == AttentionLoop::kSerial ? kSerialLoop : OverlappedLoop(pingpong), InteriorBoundsOfTile(),
        pingpong ? kFirstTurn : "",
        pingpong ? "  int next_m_block, next_kb_first, next_kb_last;  // the CTA's last query block keeps the last turn\n"
                   "  const bool last_tile = !(t + 1 < kTiles && tile(t + 1, next_m_block, next_kb_first, next_kb_last));\n"
                 : "");
    EmitStore();
    out_ += "  }\n";
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
  // The interior key blocks: constants, or variables that each tile sets (InteriorBoundsOfTile).
  std::string InteriorBounds() const {
    if (!HasInterior() || AllInterior()) return "";
    if (InteriorVaries()) return "  int inner_first, inner_last;  // the tile's\n";
    return fmt::format("  const int inner_first = {}, inner_last = {};\n", c_.interior.blocks[0].first, c_.interior.blocks[0].last);
  }
  std::string InteriorBoundsOfTile() const {
    if (!InteriorVaries()) return "";
    return fmt::format("  inner_first = {0}_first_inner_block[m_block];\n  inner_last = {0}_last_inner_block[m_block];\n", a_.name);
  }
  std::string InteriorTables() const {
    if (!InteriorVaries()) return "";
    std::string first, last;
    for (size_t i = 0; i < c_.interior.blocks.size(); ++i) {
      first += fmt::format("{}{}", i ? ", " : "", c_.interior.blocks[i].first);
      last += fmt::format("{}{}", i ? ", " : "", c_.interior.blocks[i].last);
    }
    return fmt::format("static __device__ const short {0}_first_inner_block[] = {{{1}}};\n"
                       "static __device__ const short {0}_last_inner_block[] = {{{2}}};\n",
                       a_.name, first, last);
  }

  // The per-score part of the softmax for `program`: s becomes a value whose base-2 logit is
  // s * Multiplier(program). A logit that is the score times c leaves s as it is (c goes
  // into the multiplier); `edge` blocks also mask keys past the end.
  std::string ScoreLoop(const Kernel& program, int logit, bool edge) const {
    const bool ragged = edge && a_.nk % c_.block_n != 0;
    const bool folded = ScoreMultiplier(program, logit).has_value();
    if (folded && !ragged) return "";
    std::string body;
    if (ragged)
      body += "          if (key >= kNK) {  // past the last key (TMA read zeros): masked\n"
              "            s[j * 4 + h * 2 + e] = -INFINITY;\n"
              "            continue;\n"
              "          }\n";
    if (!folded) {
      std::map<int, std::string> given;
      for (size_t v = 0; v < program.values.size(); ++v)
        if (program.values[v].kind == ScalarValue::Kind::kLoad && program.values[v].buffer < 0)
          given[static_cast<int>(v)] = a_.score_scale == 1 ? "score" : fmt::format("(score * {}f)", FloatLiteral(a_.score_scale));
      body +=
          "          // Rows past the end compute (and never store) the last row's logits: no load strays.\n"
          "          const tf_index_t srow = score_batch + min(row0 + 8 * h, kNQ - 1);\n"
          "          const float score = s[j * 4 + h * 2 + e];\n";
      body += CudaElementProgram(program, {logit}, given, {"srow", "key"}, "          ");
      body += fmt::format("          s[j * 4 + h * 2 + e] = (float)v{} * 1.4426950408889634f;\n", logit);
    }
    return fmt::format(
        "#pragma unroll\n"
        "    for (int j = 0; j < kBN / 8; ++j)\n"
        "#pragma unroll\n"
        "      for (int h = 0; h < 2; ++h)\n"
        "#pragma unroll\n"
        "        for (int e = 0; e < 2; ++e) {{\n"
        "          const int key = key0 + 8 * j + (lane % 4) * 2 + e;\n"
        "{}"
        "        }}\n",
        body);
  }
  // What s times is the base-2 logit after ScoreLoop: log2(e) · c · the Q/K scales for a
  // folded logit score · c, else 1 (ScoreLoop wrote it already).
  std::string Multiplier(const Kernel& program, int logit) const {
    const std::optional<double> c = ScoreMultiplier(program, logit);
    return c ? FloatLiteral(*c * a_.score_scale * 1.4426950408889634) + "f" : "1.0f";
  }

  void EmitSoftmax() {
    out_ +=
        "  // The online softmax of S, whose base-2 logits are s * mult (exp(x) = 2^(x log2 e)):\n"
        "  // new row maxima, S exponentiated in place (one multiply-add and ex2 per score), the\n"
        "  // row sums (per thread until the end) and the factor O must be rescaled by once its\n"
        "  // pending P·V is done. mult > 0, so the maximum of s is the maximum logit.\n"
        "  auto online_softmax = [&](const float mult) {\n"
        "    float block_max[2];\n"
        "#pragma unroll\n"
        "    for (int h = 0; h < 2; ++h) {\n"
        "      block_max[h] = -INFINITY;\n"
        "#pragma unroll\n"
        "      for (int j = 0; j < kBN / 8; ++j) block_max[h] = fmaxf(block_max[h], fmaxf(s[j * 4 + h * 2], s[j * 4 + h * 2 + 1]));\n"
        "      block_max[h] = tf::QuadMax(block_max[h]) * mult;\n"
        "    }\n"
        "    // Lazy rescaling: the running maxima move only when one of the warp's rows grows by more\n"
        "    // than kLazyMargin (base 2; the exponentials then stay below 2^kLazyMargin), so that most\n"
        "    // key blocks skip O's rescale, whole warps at a time. kLazyMargin < 0: every block.\n"
        "    rescaled = kLazyMargin < 0 ||\n"
        "               __any_sync(0xffffffffu, block_max[0] > row_max[0] + kLazyMargin || block_max[1] > row_max[1] + kLazyMargin);\n"
        "#pragma unroll\n"
        "    for (int h = 0; h < 2; ++h) {\n"
        "      if (rescaled) {\n"
        "        const float new_max = fmaxf(row_max[h], block_max[h]);\n"
        "        // A row masked so far has max -inf: subtract 0 then, not -inf (no inf - inf).\n"
        "        rescale[h] = tf::Exp2(row_max[h] - (new_max == -INFINITY ? 0.0f : new_max));\n"
        "        row_max[h] = new_max;\n"
        "      }\n"
        "      const float shift = row_max[h] == -INFINITY ? 0.0f : row_max[h];\n"
        "      float sum = 0.0f;\n"
        "#pragma unroll\n"
        "      for (int j = 0; j < kBN / 8; ++j)\n"
        "#pragma unroll\n"
        "        for (int e = 0; e < 2; ++e) {\n"
        "          const float x = fmaf(s[j * 4 + h * 2 + e], mult, -shift);\n"
        "          s[j * 4 + h * 2 + e] = kPolyExpEvery > 0 && j % kPolyExpEvery == kPolyExpEvery - 1 ? tf::Exp2Poly(x) : tf::Exp2(x);\n"
        "          sum += s[j * 4 + h * 2 + e];\n"
        "        }\n"
        "      row_sum[h] = (rescaled ? row_sum[h] * rescale[h] : row_sum[h]) + sum;\n"
        "    }\n"
        "  };\n";
    auto lambda = [&](const char* name, const char* comment, const Kernel& program, int logit, bool edge) {
      out_ += fmt::format("  // {}\n  auto {} = [&](int key0) {{\n{}    online_softmax({});\n  }};\n", comment, name,
                          ScoreLoop(program, logit, edge), Multiplier(program, logit));
    };
    if (AllInterior()) {
      lambda("softmax_block", "Every key block is interior: the logits without their mask.", c_.interior.program, c_.interior.logit, false);
      out_ += "  auto softmax = [&](int kb) { softmax_block(kb * kBN); };\n";
      return;
    }
    lambda("softmax_edge", "The group's whole logits program per score.", a_.logits, a_.logit, true);
    if (!HasInterior()) {
      out_ += "  auto softmax = [&](int kb) { softmax_edge(kb * kBN); };\n";
      return;
    }
    lambda("softmax_inner", "Interior key blocks: the logits without their mask.", c_.interior.program, c_.interior.logit, false);
    out_ +=
        "  auto softmax = [&](int kb) {\n"
        "    if (kb >= inner_first && kb <= inner_last) softmax_inner(kb * kBN);\n"
        "    else softmax_edge(kb * kBN);\n"
        "  };\n";
  }

  void EmitStore() {
    out_ += fmt::format(
        "  // O / row sum, written as column pairs; rows past the end are not written.\n"
        "#pragma unroll\n"
        "  for (int h = 0; h < 2; ++h) {{\n"
        "    const float inverse = {2}f / tf::QuadSum(row_sum[h]);\n"
        "    const int row = row0 + 8 * h;\n"
        "    if (row >= kNQ) continue;\n"
        "    unsigned* out = (unsigned*)(b{0} + ((tf_index_t)batch * kNQ + row) * kDV + (lane % 4) * 2);\n"
        "#pragma unroll\n"
        "    for (int j = 0; j < kDV / 8; ++j) out[4 * j] = {1}(o[j * 4 + h * 2] * inverse, o[j * 4 + h * 2 + 1] * inverse);\n"
        "  }}\n",
        a_.output, Pack(), FloatLiteral(a_.output_scale));
  }

  // A double as a float literal's digits (max_digits10: the float it rounds to is exact).
  static std::string FloatLiteral(double v) { return fmt::format("{:.9e}", static_cast<float>(v)); }

  const AttentionTemplateKernel& a_;
  CudaAttentionConfig c_;
  std::string out_;
};

}  // namespace

StatusOr<CudaKernelSource> EmitCudaAttention(const AttentionTemplateKernel& attention, const CudaAttentionConfig& config) {
  return AttentionEmitter(attention, ResolveAttentionConfig(attention, config)).Run();
}

}  // namespace tilefuse
