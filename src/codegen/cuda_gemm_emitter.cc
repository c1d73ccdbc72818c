#include "codegen/cuda_gemm_emitter.h"

#include <algorithm>
#include <fmt/format.h>

#include "codegen/cuda_gemm_config.h"
#include "codegen/cuda_scalar_program.h"
#include "codegen/cuda_wgmma.h"
#include "codegen/emit_util.h"
#include "support/check.h"

namespace tilefuse {

namespace {

using namespace gemm_layout;

constexpr int kProducerRegisters = 40, kConsumerRegisters = 232;

class GemmEmitter {
 public:
  GemmEmitter(const GemmTemplateKernel& g, const CudaGemmConfig& c)
      : g_(g), c_(c), staged_(StagedStore(g)), staged_load_(StagedLoad(g, c)), ringed_load_(RingedLoad(g, c)) {}

  StatusOr<CudaKernelSource> Run() {
    RETURN_IF_ERROR(Validate());
    const int consumers = Consumers(c_);
    const int threads = 128 * (consumers + 1);
    const std::string wgmma = g_.name + "_wgmma";
    CudaKernelSource s;
    s.name = g_.name;
    s.config = {};
    s.threads = threads;
    // A persistent grid of whole clusters, at most one CTA an SM.
    const int cluster = c_.cluster_m;
    s.work_blocks = cluster * std::min<int64_t>(c_.sm_count / cluster, Tiles(g_, c_.block_m, c_.block_n) / cluster * c_.splits);
    s.strategy = fmt::format("gemm template {}x{}x{}, {} stages, {}{}{}{}{}{}", c_.block_m, c_.block_n, kBlockK, c_.stages,
                             *c_.pingpong ? "ping-pong consumers" : "cooperative consumers",
                             cluster > 1 ? fmt::format(", clusters of {} sharing B by multicast", cluster) : "",
                             *c_.overlap_epilogue ? ", epilogue overlapping the next main loop" : "",
                             ringed_load_ >= 0 ? ", residual by TMA into its ring" : staged_load_ >= 0 ? ", residual staged by TMA" : "",
                             staged_ >= 0 ? ", TMA store" : "", c_.splits > 1 ? fmt::format(", split-K x{}", c_.splits) : "");
    out_ = WgmmaFunction(wgmma, c_.block_n, g_.dtype, /*b_mn_major=*/true);
    out_ += fmt::format("extern \"C\" __global__ void __launch_bounds__({}, 1) {}(const __grid_constant__ tf::TensorMap map_a, "
                        "const __grid_constant__ tf::TensorMap map_b",
                        threads, g_.name);
    s.launch.args.push_back({LaunchArg::Kind::kTensorMap, g_.a, OperandMapA(), 0});
    s.launch.args.push_back({LaunchArg::Kind::kTensorMap, g_.b, OperandMapB(), 0});
    if (staged_ >= 0) {
      out_ += ", const __grid_constant__ tf::TensorMap map_out";
      s.launch.args.push_back({LaunchArg::Kind::kTensorMap, OutputMap().node, OutputMap(), 0});
    }
    if (staged_load_ >= 0) {
      out_ += ", const __grid_constant__ tf::TensorMap map_in";
      const KernelBuffer& in = g_.epilogue.buffers[g_.epilogue.values[staged_load_].buffer];
      s.launch.args.push_back({LaunchArg::Kind::kTensorMap, in.node, TileMap(in), 0});
    }
    if (ringed_load_ >= 0) {
      out_ += ", const __grid_constant__ tf::TensorMap map_residual";
      const KernelBuffer& in = g_.epilogue.buffers[g_.epilogue.values[ringed_load_].buffer];
      s.launch.args.push_back({LaunchArg::Kind::kTensorMap, in.node, ResidualChunkMap(in), 0});
    }
    for (size_t b = 0; b < g_.epilogue.buffers.size(); ++b) {
      const KernelBuffer& buf = g_.epilogue.buffers[b];
      if (buf.node == g_.product && !buf.is_output) continue;  // read from the accumulators
      out_ += fmt::format(", {}{}* __restrict__ b{}", buf.is_output ? "" : "const ", StorageType(buf.dtype), b);
      s.launch.args.push_back({LaunchArg::Kind::kBuffer, buf.node, {}, 0});
    }
    if (c_.splits > 1) {
      out_ += ", unsigned* __restrict__ tile_counters, float* __restrict__ partials";
      s.launch.args.push_back({LaunchArg::Kind::kScratch, -1, {}, 0});
      s.launch.args.push_back({LaunchArg::Kind::kScratch, -1, {}, CounterBytes(g_, c_)});
    }
    out_ += ") {\n";
    EmitSetup(consumers);
    EmitProducer();
    EmitConsumer();
    out_ += "}\n";
    FinishTemplateSource(s, std::move(out_), SharedBytes(c_, staged_ >= 0, ringed_load_ >= 0));
    s.launch.cluster = {cluster, 1, 1};
    s.launch.persistent_clusters = cluster > 1;
    s.launch.scratch_bytes = ScratchBytes(g_, c_);
    return s;
  }

 private:
  Status Validate() const {
    if (c_.block_m != 64 && c_.block_m != 128)
      return InvalidArgument(fmt::format("{}: block_m {} (need 64 or 128)", g_.name, c_.block_m));
    if (c_.block_n < 64 || c_.block_n > 256 || c_.block_n % 64 != 0)
      return InvalidArgument(fmt::format("{}: block_n {} (need 64, 128, 192 or 256)", g_.name, c_.block_n));
    if (ConsumerRows(c_) * c_.block_n > 64 * 256)
      return InvalidArgument(fmt::format("{}: {} x {} accumulators per consumer (at most 64 x 256 fit in registers)", g_.name,
                                         ConsumerRows(c_), c_.block_n));
    if (c_.stages < 2) return InvalidArgument(fmt::format("{}: {} stages (need at least 2)", g_.name, c_.stages));
    const int64_t shared = SharedBytes(c_, staged_ >= 0, ringed_load_ >= 0);
    if (shared > kSharedLimit) return InvalidArgument(fmt::format("{}: {} bytes of shared memory (the limit is {})", g_.name, shared, kSharedLimit));
    RETURN_IF_ERROR(CheckClusters(g_, c_));
    if (c_.group_m < 1 || c_.sm_count < 1) return InvalidArgument(fmt::format("{}: group_m and sm_count must be positive", g_.name));
    if (c_.splits < 1 || c_.splits > KSteps(g_))
      return InvalidArgument(fmt::format("{}: {} split-K units for {} steps of K", g_.name, c_.splits, KSteps(g_)));
    if (c_.splits > 1 && *c_.pingpong) return InvalidArgument(fmt::format("{}: split-K needs cooperative consumers", g_.name));
    if (*c_.overlap_epilogue && (*c_.pingpong || c_.splits > 1))
      return InvalidArgument(fmt::format("{}: an overlapped epilogue needs cooperative consumers without split-K", g_.name));
    if (c_.splits > 1 && Tiles(g_, c_.block_m, c_.block_n) * 4 > kScratchCounterBytes)
      return InvalidArgument(fmt::format("{}: split-K over more tiles than the scratch memory's counter region holds", g_.name));
    return Status::Ok();
  }

  // A half-precision [batch][rows][cols] row-major matrix, moved in boxes of box_rows ×
  // box_cols (128-byte swizzled rows: box_cols is 64).
  static TensorMapArg MatrixMap(int node, DType dtype, int64_t batch, int64_t rows, int64_t cols, int box_rows, int box_cols) {
    TensorMapArg m;
    m.node = node;
    m.dtype = dtype;
    m.dims = {cols, rows, batch, 1, 1};
    m.strides_bytes = {cols * 2, rows * cols * 2, 0, 0};
    m.box = {box_cols, box_rows, 1, 1, 1};
    return m;
  }
  // A as [batch][rows][K]: boxes of block_m rows × 64 columns; or, read through a view, as
  // (column in head, row in entry, head, entry) with the same boxes.
  TensorMapArg OperandMapA() const {
    if (g_.a_conv) return ConvMapA(*g_.a_conv);
    if (!g_.a_view) return MatrixMap(g_.a, g_.dtype, g_.batch, g_.rows, g_.k, c_.block_m, kBlockK);
    const GemmOperandView& v = *g_.a_view;
    TensorMapArg m;
    m.node = v.node;
    m.dtype = g_.dtype;
    m.rank = 4;
    m.dims = {v.head, v.entry_rows, v.heads, v.entries, 1};
    // A dimension of one element has no stride of its own: any aligned one does.
    for (int d = 0; d < 3; ++d) m.strides_bytes[d] = std::max<int64_t>(v.stride[d], 8) * 2;
    m.box = {kBlockK, c_.block_m, 1, 1, 1};
    m.offset_bytes = v.offset * 2;
    return m;
  }
  // A as im2col of the NHWC activation (C, W, H, N): block_m output pixels × 64 channels
  // per copy, the window's first tap bounded by the padding (Im2colMapArg).
  TensorMapArg ConvMapA(const GemmConvWindow& c) const {
    TensorMapArg m;
    m.node = c.node;
    m.dtype = g_.dtype;
    m.rank = 4;
    m.dims = {c.channels, c.width, c.height, c.images, 1};
    m.strides_bytes = {c.channels * 2, c.width * c.channels * 2, c.height * c.width * c.channels * 2, 0};
    Im2colMapArg im2col;
    for (int d = 0; d < 2; ++d) {  // the map's spatial order is (W, H)
      const int spatial = 1 - d;
      im2col.lower[d] = static_cast<int>(-c.pads[spatial]);
      im2col.upper[d] = static_cast<int>(c.pads[2 + spatial] - (c.kernel[spatial] - 1) * c.dilations[spatial]);
      im2col.strides[d] = static_cast<int>(c.strides[spatial]);
    }
    im2col.channels = kBlockK;
    im2col.pixels = c_.block_m;
    m.im2col = im2col;
    return m;
  }
  // The producer's load of A's tile (ks, t.m).
  std::string LoadA() const {
    if (g_.a_conv) {
      const GemmConvWindow& c = *g_.a_conv;
      // Row m is output pixel (image, oh, ow); column k is (kh, kw, channel): a K step is 64
      // channels of one filter tap.
      return fmt::format(
          "        {{  // A: im2col of the NHWC activation, output pixels t.m * kBM.., filter tap ks * kBK / {0}\n"
          "          const int pixel = t.m * kBM, image = pixel / {1}, oh = pixel % {1} / {2}, ow = pixel % {2};\n"
          "          const int tap = ks * kBK / {0};\n"
          "          tf::TmaLoadIm2col4d(tile_a + ring.stage * kBM * kBK, map_a, ks * kBK % {0}, ow * {3} - {4}, oh * {5} - {6}, image,\n"
          "                              (unsigned short)(tap % {7} * {8}), (unsigned short)(tap / {7} * {9}), full[ring.stage]);\n"
          "        }}\n",
          c.channels, c.out_height * c.out_width, c.out_width, c.strides[1], c.pads[1], c.strides[0], c.pads[0], c.kernel[1],
          c.dilations[1], c.dilations[0]);
    }
    if (!g_.a_view)
      return "        tf::TmaLoad3d(tile_a + ring.stage * kBM * kBK, map_a, ks * kBK, t.m * kBM, t.batch, full[ring.stage]);\n";
    return fmt::format(
        "        tf::TmaLoad4d(tile_a + ring.stage * kBM * kBK, map_a, ks * kBK % {0}, t.m * kBM % {1}, ks * kBK / {0}, t.m * kBM / {1},\n"
        "                      full[ring.stage]);  // A through a view: (column in head, row in entry, head, entry)\n",
        g_.a_view->head, g_.a_view->entry_rows);
  }
  // B as [batch][K][N]: boxes of 64 K rows × 64 columns, block_n / 64 of them per stage.
  TensorMapArg OperandMapB() const { return MatrixMap(g_.b, g_.dtype, g_.batch, g_.k, g_.n, kBlockK, 64); }
  // The staged output (or staged load) as [batch][rows][N]: boxes of 64 rows × 64 columns.
  TensorMapArg TileMap(const KernelBuffer& buffer) const { return MatrixMap(buffer.node, buffer.dtype, g_.batch, g_.rows, g_.n, 64, 64); }
  TensorMapArg OutputMap() const { return TileMap(g_.epilogue.buffers[g_.epilogue.stores[staged_].buffer]); }
  // The residual as [batch][rows][N] in boxes of one epilogue chunk: block_m rows × the
  // chunk's 8 or 16 columns, unswizzled (16 or 32 bytes a row).
  TensorMapArg ResidualChunkMap(const KernelBuffer& buffer) const {
    TensorMapArg m = MatrixMap(buffer.node, buffer.dtype, g_.batch, g_.rows, g_.n, c_.block_m, c_.block_n / EpilogueChunks(c_));
    m.swizzle_128b = false;
    return m;
  }

  void EmitSetup(int consumers) {
    int64_t largest = g_.rows * g_.batch * g_.n;
    for (const KernelBuffer& b : g_.epilogue.buffers) largest = std::max(largest, b.elements);
    out_ += fmt::format("  typedef {} tf_index_t;\n", largest < (int64_t{1} << 31) ? "int" : "long long");
    out_ += fmt::format("  constexpr int kBM = {}, kBN = {}, kBK = {}, kStages = {}, kConsumers = {};\n", c_.block_m, c_.block_n, kBlockK,
                        c_.stages, consumers);
    out_ += fmt::format("  constexpr int kRows = {}, kN = {}, kK = {};\n", g_.rows, g_.n, g_.k);
    out_ += fmt::format("  constexpr int kTilesM = {}, kTilesN = {}, kTiles = {}, kKSteps = {};\n", CeilDiv(g_.rows, c_.block_m),
                        CeilDiv(g_.n, c_.block_n), Tiles(g_, c_.block_m, c_.block_n), KSteps(g_));
    out_ += "  constexpr bool kNoEdges = kRows % kBM == 0 && kN % kBN == 0;  // no tile crosses the product's edge\n";
    out_ += fmt::format("  // Units of work: a tile's K range in kSplits parts of kSplitSteps steps.\n"
                        "  constexpr int kSplits = {}, kSplitSteps = {};\n",
                        c_.splits, StepsPerSplit(g_, c_));
    out_ += fmt::format(
        "  // A cluster's kClusterM CTAs take vertically adjacent tiles, walking tile columns of\n"
        "  // kClusterM rows in lockstep: both use the same B tile, each loading its share for both.\n"
        "  constexpr int kClusterM = {}, kUnits = kTiles / kClusterM * kSplits;\n",
        c_.cluster_m);
    out_ += fmt::format("  constexpr int kGroupM = {};\n  constexpr int kStaging = {};\n", c_.group_m, StagingBytes(c_, staged_ >= 0));
    if (*c_.overlap_epilogue)
      out_ += fmt::format("  constexpr int kChunks = {};  // the overlapped epilogue's parts, one per main-loop step\n", EpilogueChunks(c_));
    if (ringed_load_ >= 0)
      out_ += fmt::format(
          "  // The residual's ring: kResidualSlots chunks of kBM rows x kChunkCols columns, filled by the\n"
          "  // producer ahead of the overlapped epilogue's chunks.\n"
          "  constexpr int kChunkCols = kBN / kChunks, kResidualSlots = {};\n"
          "  constexpr int kResidualSlotBytes = kBM * kChunkCols * 2;\n",
          kResidualSlots);
    out_ += fmt::format("  constexpr int kPingPong = {}, kConsumerRows = {}, kMBlocks = kConsumerRows / 64;\n", *c_.pingpong ? 1 : 0,
                        ConsumerRows(c_));
    out_ +=
        "  constexpr unsigned kStageBytes = (kBM + kBN) * kBK * 2;\n"
        "  extern __shared__ unsigned char tf_shared_raw[];\n"
        "  unsigned char* shared = tf_shared_raw + ((1024 - (tf::SharedAddress(tf_shared_raw) & 1023)) & 1023);\n"
        "  unsigned short* tile_a = (unsigned short*)shared;                // [stage][kBM][kBK], 128-byte swizzle\n"
        "  unsigned short* tile_b = tile_a + kStages * kBM * kBK;          // [stage][kBN / 64][kBK][64]\n"
        "  unsigned char* staging = (unsigned char*)(tile_b + kStages * kBN * kBK);  // [consumer][kBN / 64][64][64], swizzled\n";
    if (ringed_load_ >= 0)
      out_ +=
          "  unsigned char* residual_ring = staging + kStaging;  // [slot][kBM][kChunkCols]\n"
          "  tf::Barrier* full = (tf::Barrier*)(residual_ring + kResidualSlots * kResidualSlotBytes);\n";
    else
      out_ += "  tf::Barrier* full = (tf::Barrier*)(staging + kStaging);\n";
    out_ +=
        "  tf::Barrier* empty = full + kStages;\n"
        "  tf::Barrier* turn = empty + kStages;  // ping-pong: turn[c] completes when consumer c may run its next main loop\n"
        "  tf::Barrier* tile_in = turn + 2;      // tile_in[c]: consumer c's staged load has landed\n"
        "  volatile int* finishes_tile = (volatile int*)(tile_in + 2);  // split-K: this unit runs the epilogue\n";
    if (ringed_load_ >= 0)
      out_ +=
          "  tf::Barrier* residual_full = tile_in + 3;  // a residual slot's chunk has landed\n"
          "  tf::Barrier* residual_empty = residual_full + kResidualSlots;  // every consumer warp has read it\n";
    out_ +=
        "  if (threadIdx.x == 0) {\n"
        "    for (int s = 0; s < kStages; ++s) {\n"
        "      full[s].Init(1);\n"
        "      // A slot is read by every cooperative consumer, or one ping-pong one, of each CTA of\n"
        "      // the cluster (its B half came from either).\n"
        "      empty[s].Init((kPingPong ? 1 : kConsumers) * kClusterM);\n"
        "    }\n"
        "    turn[0].Init(1);\n"
        "    turn[1].Init(1);\n"
        "    tile_in[0].Init(1);\n"
        "    tile_in[1].Init(1);\n";
    if (ringed_load_ >= 0)
      out_ +=
          "    for (int s = 0; s < kResidualSlots; ++s) {\n"
          "      residual_full[s].Init(1);\n"
          "      residual_empty[s].Init(kConsumers * 4);\n"
          "    }\n";
    out_ +=
        "    tf::FenceBarrierInit();\n"
        "  }\n"
        "  // The cluster's barriers are initialised before any CTA's copy or arrival reaches them.\n"
        "  if (kClusterM > 1) tf_cluster_sync();\n"
        "  else __syncthreads();\n"
        "  const int warpgroup = threadIdx.x / 128;\n"
        "  const int cta_rank = kClusterM > 1 ? (int)tf_cluster_rank() : 0;\n"
        "  const int cluster_id = blockIdx.x / kClusterM, clusters = gridDim.x / kClusterM;\n"
        "  // This CTA's tile of the cluster's tile pair number `tile` (pairs in grouped order).\n"
        "  auto tile_at = [cta_rank](int tile) {\n"
        "    tf::TileCoordinates t = tf::TileAt<kTilesM / kClusterM, kTilesN, (kGroupM + kClusterM - 1) / kClusterM>(tile);\n"
        "    t.m = t.m * kClusterM + cta_rank;\n"
        "    return t;\n"
        "  };\n";
  }

  void EmitProducer() {
    out_ += fmt::format(
        "  if (warpgroup == 0) {{  // producer: one thread keeps the ring full\n"
        "    tf::Warpgroup::ShrinkRegisters<{}>();\n"
        "    if (threadIdx.x != 0) return;\n"
        "    tf::Pipeline<kStages> ring;\n",
        kProducerRegisters);
    if (ringed_load_ < 0) {
      out_ +=
          "    for (int unit = cluster_id; unit < kUnits; unit += clusters) {\n"
          "      const tf::TileCoordinates t = tile_at(unit / kSplits);\n"
          "      const int k_begin = unit % kSplits * kSplitSteps, k_end = min(kKSteps, k_begin + kSplitSteps);\n"
          "      for (int ks = k_begin; ks < k_end; ++ks, ring.Advance()) {\n" +
          ProducerStep() +
          "      }\n"
          "    }\n";
    } else {
      // The consumers run the held tile's epilogue chunk c beside the next tile's main-loop
      // step c: the chunk's residual goes into its slot just before that step's operands.
      out_ +=
          "    tf::Pipeline<kResidualSlots> residual;\n"
          "    // Chunk `chunk` of tile h's residual into the next slot, once the consumers have read it.\n"
          "    auto load_residual = [&](const tf::TileCoordinates& h, int chunk) {\n"
          "      residual_empty[residual.stage].Wait(residual.phase ^ 1);\n"
          "      residual_full[residual.stage].ArriveExpectingBytes(kResidualSlotBytes);\n"
          "      tf::TmaLoad3d(residual_ring + residual.stage * kResidualSlotBytes, map_residual, h.n * kBN + chunk * kChunkCols, h.m * kBM,\n"
          "                    h.batch, residual_full[residual.stage]);\n"
          "      residual.Advance();\n"
          "    };\n"
          "    tf::TileCoordinates held = {};\n"
          "    bool holding = false;  // the consumers hold a tile whose epilogue runs during this one's main loop\n"
          "    for (int unit = cluster_id; unit < kUnits; unit += clusters) {\n"
          "      const tf::TileCoordinates t = tile_at(unit / kSplits);\n"
          "      const int k_begin = unit % kSplits * kSplitSteps, k_end = min(kKSteps, k_begin + kSplitSteps);\n"
          "      for (int ks = k_begin, chunk = 0; ks < k_end || (holding && chunk < kChunks); ++chunk) {\n"
          "        if (holding && chunk < kChunks) load_residual(held, chunk);\n"
          "        if (ks >= k_end) continue;\n" +
          ProducerStep() +
          "        ++ks;\n"
          "        ring.Advance();\n"
          "      }\n"
          "      held = t;\n"
          "      holding = true;\n"
          "    }\n"
          "    // The last tile's epilogue runs in a pass of its own.\n"
          "    if (holding)\n"
          "      for (int chunk = 0; chunk < kChunks; ++chunk) load_residual(held, chunk);\n";
    }
    out_ +=
        "    // The other CTAs' consumers hand this CTA's slots back, and its copies land in theirs:\n"
        "    // it stays until every slot it filled is handed back by every consumer of the cluster.\n"
        "    if (kClusterM > 1)\n"
        "      for (int s = 0; s < kStages; ++s, ring.Advance()) empty[ring.stage].Wait(ring.phase ^ 1);\n"
        "    return;\n"
        "  }\n";
  }
  // One step's operands into the ring's next slot, once every consumer has handed it back.
  std::string ProducerStep() const {
    return "        empty[ring.stage].Wait(ring.phase ^ 1);\n"
           "        full[ring.stage].ArriveExpectingBytes(kStageBytes);\n" +
           LoadA() +
           "        if (kClusterM > 1) {  // this CTA's share of B's boxes, to every CTA of the cluster\n"
           "          constexpr int kShare = kBN / 64 / kClusterM;\n"
           "#pragma unroll\n"
           "          for (int box = cta_rank * kShare; box < (cta_rank + 1) * kShare; ++box)\n"
           "            tf::TmaLoad3dMulticast(tile_b + ring.stage * kBN * kBK + box * kBK * 64, map_b, t.n * kBN + box * 64, ks * kBK,\n"
           "                                   t.batch, full[ring.stage], (unsigned short)((1 << kClusterM) - 1));\n"
           "        } else {\n"
           "#pragma unroll\n"
           "          for (int box = 0; box < kBN / 64; ++box)\n"
           "            tf::TmaLoad3d(tile_b + ring.stage * kBN * kBK + box * kBK * 64, map_b, t.n * kBN + box * 64, ks * kBK, t.batch,\n"
           "                          full[ring.stage]);\n"
           "        }\n";
  }

  void EmitConsumer() {
    const bool overlap = *c_.overlap_epilogue;
    out_ += fmt::format(
        "  tf::Warpgroup::GrowRegisters<{}>();\n"
        "  const int consumer = warpgroup - 1;\n"
        "  const int local = threadIdx.x % 128, warp = local / 32, lane = local % 32;\n"
        "  float d[kMBlocks][kBN / 2];\n"
        "  tf::Pipeline<kStages> ring;\n"
        "  // Ping-pong: the consumers take the CTA's tiles in turn. The producer fills the ring\n"
        "  // tile by tile, so each consumer skips the other's steps, and one's epilogue runs\n"
        "  // while the other's main loop keeps the tensor cores busy.\n"
        "  const int first_unit = kPingPong ? cluster_id + consumer * clusters : cluster_id;\n"
        "  const int unit_step = kPingPong ? 2 * clusters : clusters;\n"
        "  // Their main loops strictly alternate (turn barriers): a consumer waiting on a slot is\n"
        "  // then never more than one phase ahead of it, as parity waits need.\n"
        "  if (kPingPong && consumer == 1) ring.Skip(kKSteps);\n"
        "  int main_loops = 0;\n",
        kConsumerRegisters);
    if (overlap)
      out_ += fmt::format(
          "  // Overlapped epilogue: the previous tile's products, packed pairs of the product's type\n"
          "  // (held[mb][j * 2 + h] is d[mb][j * 4 + h * 2 + e] for e = 0, 1), wait here while this\n"
          "  // tile's first kChunks steps run their epilogue, one chunk of columns per step. A last\n"
          "  // pass without a tile of its own finishes the last tile held.\n"
          "  unsigned held[kMBlocks][kBN / 4];\n"
          "  tf::TileCoordinates held_t = {{}};\n"
          "  bool holding = false;\n"
          "{}"
          "  for (int unit = first_unit; unit < kUnits || holding; unit += unit_step, ++main_loops) {{\n"
          "    const bool has_tile = unit < kUnits;\n"
          "    const int tile = unit / kSplits, split = unit % kSplits;\n"
          "    const tf::TileCoordinates t = tile_at(tile);\n"
          "    const int k_begin = split * kSplitSteps, k_end = has_tile ? min(kKSteps, k_begin + kSplitSteps) : k_begin;\n"
          "    int previous = -1, ks = k_begin;\n"
          "    if (holding) {{\n"
          "#pragma unroll\n"
          "      for (int chunk = 0; chunk < kChunks; ++chunk) {{\n"
          "        const bool issued = ks < k_end;\n"
          "        // The step's slot before this one goes back first: the producer's next load must not\n"
          "        // wait for the chunk.\n"
          "        if (issued) {{\n"
          "{}{}"
          "        }}\n",
          ringed_load_ >= 0 ? "  tf::Pipeline<kResidualSlots> residual;  // the residual ring's slot for the next chunk\n" : "",
          MainLoopStepIssue("          "), MainLoopStepRetire("          "));
    else
      out_ +=
          "  for (int unit = first_unit; unit < kUnits; unit += unit_step, ++main_loops) {\n"
          "    const int tile = unit / kSplits, split = unit % kSplits;\n"
          "    const tf::TileCoordinates t = tile_at(tile);\n"
          "    const int k_begin = split * kSplitSteps, k_end = min(kKSteps, k_begin + kSplitSteps);\n"
          "    if (kPingPong && (consumer == 1 || main_loops > 0)) turn[consumer].Wait((consumer == 1 ? main_loops : main_loops - 1) & 1);\n"
          "    int previous = -1, ks = k_begin;\n";
    if (overlap) {
      if (ringed_load_ >= 0)
        out_ +=
            "        residual_full[residual.stage].Wait(residual.phase);  // the chunk's residual has landed\n"
            "        const unsigned char* residual_chunk = residual_ring + residual.stage * kResidualSlotBytes;\n";
      EmitEpilogue("held_t", "", /*chunked=*/true);
      if (ringed_load_ >= 0)
        out_ +=
            "        __syncwarp();\n"
            "        if (lane == 0) residual_empty[residual.stage].Arrive();  // this warp has read the slot\n"
            "        residual.Advance();\n";
      out_ += "        if (issued) {\n          ++ks;\n          ring.Advance();\n        }\n      }\n";
      EmitEpilogueStore("      ", "held_t");
      out_ += "    }\n";
    }
    out_ += "    for (; ks < k_end; ++ks, ring.Advance()) {\n" + MainLoopStepIssue("      ") + MainLoopStepRetire("      ") + "    }\n";
    out_ += "    tf::Warpgroup::Wait<0>();\n";
    if (overlap) out_ += "    if (!has_tile) break;\n";
    out_ += Indent(ReleaseSlot("previous"), "    ") + "    if (kPingPong && local == 0) turn[1 - consumer].Arrive();\n";
    if (c_.splits > 1) EmitSplitKHandOver();
    if (overlap) {
      out_ +=
          "#pragma unroll\n"
          "    for (int mb = 0; mb < kMBlocks; ++mb)\n"
          "#pragma unroll\n" +
          fmt::format("      for (int i = 0; i < kBN / 4; ++i) held[mb][i] = tf::tf_pack2_{}(d[mb][2 * i], d[mb][2 * i + 1]);\n",
                      DTypeName(g_.dtype)) +
          "    held_t = t;\n"
          "    holding = true;\n";
    } else {
      EmitEpilogue("t", "main_loops & 1", /*chunked=*/false);
      if (staged_ >= 0) EmitEpilogueStore("    ", "t");
    }
    out_ += "    if (kPingPong) ring.Skip(kKSteps);  // the other consumer's next tile\n  }\n";
    if (staged_ >= 0) out_ += "  if (local == 0) tf::TmaStoreWait();  // shared memory must outlive the stores reading it\n";
  }

  // One main-loop step, issued: wait for the slot, start its wgmma (and the staged load at
  // its step)...
  std::string MainLoopStepIssue(const std::string& indent) const {
    std::string step = fmt::format(
        "full[ring.stage].Wait(ring.phase);\n"
        "const unsigned short* a = tile_a + ring.stage * kBM * kBK + (kPingPong ? 0 : consumer * 64 * kBK);\n"
        "const unsigned short* b = tile_b + ring.stage * kBN * kBK;\n"
        "tf::Warpgroup::Fence();\n"
        "#pragma unroll\n"
        "for (int kk = 0; kk < kBK / 16; ++kk)\n"
        "#pragma unroll\n"
        "  for (int mb = 0; mb < kMBlocks; ++mb)\n"
        "    {}(d[mb], tf::SharedMatrix::KMajor(a + mb * 64 * kBK + kk * 16), tf::SharedMatrix::MnMajor(b + kk * 16 * 64, kBK * 128),\n"
        "       ks > k_begin || kk > 0);\n"
        "tf::Warpgroup::Commit();\n",
        g_.name + "_wgmma");
    if (staged_load_ >= 0) step += "if (ks == (k_begin + k_end) / 2 && local == 0) {\n" + StagedLoadRequest("  ") + "}\n";
    return Indent(step, indent);
  }
  // ...and retire the step before it, handing its slot back.
  static std::string MainLoopStepRetire(const std::string& indent) {
    return Indent(
        "// The step before this one has finished reading its slot: hand it back.\n"
        "tf::Warpgroup::Wait<1>();\n"
        "if (previous >= 0) " + ReleaseSlot("previous") +
        "previous = ring.stage;\n",
        indent);
  }
  // Hands slot `slot` back to the producer of every CTA whose copies filled it.
  static std::string ReleaseSlot(const std::string& slot) {
    return fmt::format(
        "if (local == 0) {{\n"
        "  if (kClusterM > 1)\n"
        "    for (int rank = 0; rank < kClusterM; ++rank) empty[{0}].ArriveInCluster(rank);\n"
        "  else\n"
        "    empty[{0}].Arrive();\n"
        "}}\n",
        slot);
  }
  static std::string Indent(const std::string& lines, const std::string& indent) {
    std::string out;
    size_t begin = 0;
    while (begin < lines.size()) {
      const size_t end = lines.find('\n', begin);
      const std::string line = lines.substr(begin, end - begin);
      out += (line.rfind("#pragma", 0) == 0 ? "" : indent) + line + "\n";
      begin = end + 1;
    }
    return out;
  }

  // Split-K: every unit leaves its partial sums in scratch memory (coalesced: element i of
  // all 128 threads together), and the unit that finishes a tile last goes on with the sum
  // of all partials, added in split order whichever unit that is, so results do not depend
  // on timing. (Summed element by element, the loads of one element's splits waited on each
  // other: 16 x 4096 x 4096 took 30 us with 2 splits and 964 us with 16, H100.) Memory order:
  // the partials are fenced before the counter's atomic, and the last unit fences before
  // reading them through L2 (__ldcg; L1 is not coherent).
  void EmitSplitKHandOver() {
    out_ +=
        "    {\n"
        "      constexpr int kPerThread = kMBlocks * kBN / 2;\n"
        "      float* mine = partials + ((long long)unit * kConsumers + consumer) * kPerThread * 128 + local;\n"
        "#pragma unroll\n"
        "      for (int mb = 0; mb < kMBlocks; ++mb)\n"
        "#pragma unroll\n"
        "        for (int i = 0; i < kBN / 2; ++i) __stcg(mine + (mb * kBN / 2 + i) * 128, d[mb][i]);\n"
        "      __threadfence();\n"
        "      tf::NamedBarrierSync(3, kConsumers * 128);\n"
        "      if (consumer == 0 && local == 0) {\n"
        "        const bool last = atomicAdd(tile_counters + tile, 1u) == kSplits - 1;\n"
        "        if (last) tile_counters[tile] = 0;  // zero again for the next launch\n"
        "        *finishes_tile = last;\n"
        "      }\n"
        "      tf::NamedBarrierSync(3, kConsumers * 128);\n"
        "      if (!*finishes_tile) continue;\n"
        "      __threadfence();\n"
        "      // Every partial, this unit's own too (it is in L2), in split order: the sum does not\n"
        "      // depend on which unit came last. One split's values are independent loads in flight.\n"
        "      const float* first = partials + ((long long)tile * kSplits * kConsumers + consumer) * kPerThread * 128 + local;\n"
        "#pragma unroll\n"
        "      for (int mb = 0; mb < kMBlocks; ++mb)\n"
        "#pragma unroll\n"
        "        for (int i = 0; i < kBN / 2; ++i) d[mb][i] = __ldcg(first + (mb * kBN / 2 + i) * 128);\n"
        "#pragma unroll 1\n"
        "      for (int s = 1; s < kSplits; ++s) {\n"
        "        const float* part = first + (long long)s * kConsumers * kPerThread * 128;\n"
        "#pragma unroll\n"
        "        for (int mb = 0; mb < kMBlocks; ++mb)\n"
        "#pragma unroll\n"
        "          for (int i = 0; i < kBN / 2; ++i) d[mb][i] += __ldcg(part + (mb * kBN / 2 + i) * 128);\n"
        "      }\n"
        "    }\n";
  }

  // The staged load's tile, requested halfway through the main loop, while the step just
  // issued runs: by then the previous tile's TMA store has long read the staging tile it
  // lands in, and the load still has half the main loop to arrive. (Requested as the tile
  // started, the wait for that store stalled the next main loop's first step: a residual
  // over 16384x4096x1024 took 248 us on cooperative tiles against 195 for bias+ReLU, H100.)
  std::string StagedLoadRequest(const std::string& indent) const {
    return Indent(
        "tf::TmaStoreWaitRead();\n"
        "unsigned char* my_staging = staging + consumer * kConsumerRows * kBN * 2;\n"
        "tile_in[consumer].ArriveExpectingBytes(kConsumerRows * kBN * 2);\n"
        "for (int mb = 0; mb < kMBlocks; ++mb)\n"
        "  for (int box = 0; box < kBN / 64; ++box)\n"
        "    tf::TmaLoad3d(my_staging + (mb * (kBN / 64) + box) * 64 * 128, map_in, t.n * kBN + box * 64,\n"
        "                  t.m * kBM + (kPingPong ? 0 : consumer * 64) + mb * 64, t.batch, tile_in[consumer]);\n",
        indent);
  }

  // The epilogue of tile `tile` (the coordinates' variable): every accumulator, or (chunked,
  // in the overlapped epilogue's loop over `chunk`) the columns of one chunk, read from the
  // held pairs. Accumulator d[mb][j*4 + h*2 + e] holds row mb*64 + warp*16 + lane/4 + 8h,
  // column 8j + (lane%4)*2 + e of the consumer's kConsumerRows × kBN slice (the wgmma D
  // fragment layout). The staged store goes as column pairs into the swizzled staging tile,
  // then out by TMA (EmitEpilogueStore) while the next main loop runs; other stores are
  // written directly. `load_parity`: the phase in which the tile's staged load lands (none
  // in the overlapped epilogue).
  void EmitEpilogue(const std::string& tile, const std::string& load_parity, bool chunked) {
    const Kernel& k = g_.epilogue;
    const bool staged = staged_ >= 0;
    TF_CHECK(!chunked || staged_load_ < 0);  // an overlapped epilogue's residual comes through its ring
    // The overlapped loop's body sits three levels deeper.
    const std::string in = chunked ? "        " : "    ";
    std::string wait;  // for the staging tile, before the first write to it
    if (staged_load_ >= 0)
      wait = fmt::format("tile_in[consumer].Wait({});  // the staged load's tile is there (its store read the old one)\n", load_parity);
    else if (staged)
      wait =
          "if (local == 0) tf::TmaStoreWaitRead();  // the previous tile's store has read the staging tile\n"
          "tf::NamedBarrierSync(1 + consumer, 128);\n";
    if (chunked && !wait.empty()) wait = "if (chunk == 0) {\n" + Indent(wait, "  ") + "}\n";
    std::string head =
        staged ? "unsigned char* my_staging = staging + consumer * kConsumerRows * kBN * 2;  // [mb][kBN / 64][64][64]\n" : "";
    head += wait;
    head += fmt::format(
        "const int row_origin = {0}.m * kBM + (kPingPong ? 0 : consumer * 64);\n"
        "const int col_base = {0}.n * kBN + (lane % 4) * 2;\n"
        "#pragma unroll\n"
        "for (int mb = 0; mb < kMBlocks; ++mb)\n"
        "#pragma unroll\n",
        tile);
    head += chunked ? "for (int j = chunk * (kBN / 8 / kChunks); j < (chunk + 1) * (kBN / 8 / kChunks); ++j)\n"
                    : "for (int j = 0; j < kBN / 8; ++j)\n";
    head +=
        "#pragma unroll\n"
        "  for (int h = 0; h < 2; ++h) {\n"
        "    const int row_in_batch = row_origin + mb * 64 + warp * 16 + lane / 4 + 8 * h;\n"
        "    // N is a multiple of 8: a column pair is wholly inside or wholly outside.\n"
        "    const bool inside = kNoEdges || (row_in_batch < kRows && col_base + 8 * j < kN);\n"
        "    float staged[2] = {0.0f, 0.0f};\n";
    if (staged)
      head +=
          "    // This thread's column pair in the staging tile: the staged load is read there and\n"
          "    // the staged store written back in its place.\n"
          "    const int col_in_tile = 8 * j + (lane % 4) * 2;\n"
          "    unsigned* staged_pair = (unsigned*)(my_staging + (mb * (kBN / 64) + col_in_tile / 64) * 64 * 128 +\n"
          "                                        tf::Swizzle128(warp * 16 + lane / 4 + 8 * h, (col_in_tile % 64) * 2));\n";
    if (staged_load_ >= 0) head += "    const unsigned loaded_pair = *staged_pair;\n";
    if (ringed_load_ >= 0)
      head +=
          "    // The same column pair in the residual's chunk: kBM rows of kChunkCols columns.\n"
          "    const unsigned residual_pair = *(const unsigned*)(residual_chunk + ((consumer * 64 + mb * 64 + warp * 16 + lane / 4 + 8 * h) *\n"
          "                                                      kChunkCols + (j - chunk * (kBN / 8 / kChunks)) * 8 + (lane % 4) * 2) * 2);\n";
    head += fmt::format(
        "#pragma unroll\n"
        "    for (int e = 0; e < 2; ++e) {{\n"
        "      if (!inside) continue;\n"
        "      const int col = col_base + 8 * j + e;\n"
        "      const tf_index_t row = (tf_index_t){}.batch * kRows + row_in_batch;\n"
        "      const float acc = {};\n",
        tile,
        chunked ? fmt::format("tf_cvt_{}((unsigned short)(held[mb][j * 2 + h] >> (16 * e)))", DTypeName(g_.dtype))
                : std::string("d[mb][j * 4 + h * 2 + e]"));
    out_ += Indent(head, in);
    std::map<int, std::string> given;
    for (size_t v = 0; v < k.values.size(); ++v)
      if (k.values[v].kind == ScalarValue::Kind::kLoad && k.buffers[k.values[v].buffer].node == g_.product)
        given[static_cast<int>(v)] = "acc";
    if (staged_load_ >= 0)
      given[staged_load_] = fmt::format("tf_cvt_{}((unsigned short)(loaded_pair >> (16 * e)))",
                                        DTypeName(k.buffers[k.values[staged_load_].buffer].dtype));
    if (ringed_load_ >= 0)
      given[ringed_load_] = fmt::format("tf_cvt_{}((unsigned short)(residual_pair >> (16 * e)))",
                                        DTypeName(k.buffers[k.values[ringed_load_].buffer].dtype));
    std::vector<int> roots;
    for (const KernelStore& s : k.stores) roots.push_back(s.value);
    const std::vector<std::string> vars = {"row", "col"};
    std::string body = CudaElementProgram(k, roots, given, vars, "");
    for (size_t i = 0; i < k.stores.size(); ++i) {
      const KernelStore& s = k.stores[i];
      if (static_cast<int>(i) == staged_) body += fmt::format("staged[e] = v{};\n", s.value);
      else body += fmt::format("b{}[{}] = tf_pack_{}(v{});\n", s.buffer, PrintIndex(s.index, vars), DTypeName(k.buffers[s.buffer].dtype), s.value);
    }
    out_ += Indent(body, in + "      ");
    std::string tail = "    }\n";
    if (staged)
      tail += fmt::format("    *staged_pair = tf::tf_pack2_{}(staged[0], staged[1]);\n", DTypeName(k.buffers[k.stores[staged_].buffer].dtype));
    tail += "  }\n";
    out_ += Indent(tail, in);
  }

  // The staged store's tile, out by TMA once every thread of the consumer has written it.
  void EmitEpilogueStore(const std::string& indent, const std::string& tile) {
    if (staged_ < 0) return;
    out_ += Indent(fmt::format(
                       "tf::FenceSharedForAsync();\n"
                       "tf::NamedBarrierSync(1 + consumer, 128);\n"
                       "if (local == 0) {{\n"
                       "  unsigned char* my_staging = staging + consumer * kConsumerRows * kBN * 2;\n"
                       "  const int row_origin = {0}.m * kBM + (kPingPong ? 0 : consumer * 64);\n"
                       "#pragma unroll\n"
                       "  for (int mb = 0; mb < kMBlocks; ++mb)\n"
                       "    for (int box = 0; box < kBN / 64; ++box)\n"
                       "      tf::TmaStore3d(map_out, my_staging + (mb * (kBN / 64) + box) * 64 * 128, {0}.n * kBN + box * 64, row_origin + mb * 64,\n"
                       "                     {0}.batch);\n"
                       "  tf::TmaStoreCommit();\n"
                       "}}\n",
                       tile),
                   indent);
  }

  const GemmTemplateKernel& g_;
  CudaGemmConfig c_;
  int staged_;       // the store written through shared memory and TMA (-1: every store direct)
  int staged_load_;  // the load read from the staging tile, brought by TMA (-1: none)
  int ringed_load_;  // the load read from the residual's ring in shared memory (RingedLoad; -1: none)
  std::string out_;
};

}  // namespace

StatusOr<CudaKernelSource> EmitCudaGemm(const GemmTemplateKernel& gemm, const CudaGemmConfig& config) {
  return GemmEmitter(gemm, ResolveGemmConfig(gemm, config)).Run();
}

}  // namespace tilefuse
