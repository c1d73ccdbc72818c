#include "codegen/cuda/cuda_gemm_emitter.h"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <set>

#include "codegen/cuda/cuda_gemm_config.h"
#include "codegen/cuda/cuda_scalar_program.h"
#include "codegen/emit_util.h"
#include "codegen/gemm_gates.h"
#include "codegen/gemm_n_groups.h"
#include "codegen/gemm_row_norms.h"
#include "support/check.h"

namespace tilefuse {

namespace {

using namespace gemm_layout;

// Registers a thread after setmaxnreg: the producer gives its share to the consumers. 3xTF32's
// producer warpgroup also splits the operands (GemmSplitter), four 16-byte units in flight a
// thread: it keeps 56 (the 384 threads' 168 at launch, moved: 128 x 112 = 256 x 56).
constexpr int kProducerRegisters = 40, kConsumerRegisters = 232;
constexpr int kSplitterRegisters = 56, kSplitConsumerRegisters = 224;
// Three consumers (192-row tiles, 512 threads): 128 x 40 + 384 x 152 <= 65536.
constexpr int kThreeConsumerRegisters = 152;

class GemmEmitter {
 public:
  GemmEmitter(const GemmTemplateKernel& g, const CudaGemmConfig& c)
      : g_(g), c_(c), staged_(StagedStore(g)), staged_load_(StagedLoad(g, c)), ringed_load_(RingedLoad(g, c)) {}

  StatusOr<CudaKernelSource> Run() {
    RETURN_IF_ERROR(Validate());
    const int threads = 128 * (Consumers(c_) + 1);
    CudaKernelSource s;
    s.name = g_.name;
    s.config = {};
    s.threads = threads;
    s.includes = {"gemm_sm90.cuh"};
    // A persistent grid of whole clusters, at most one CTA an SM.
    const int cluster = c_.cluster_m;
    s.work_blocks = GridCtas(g_, c_);
    s.strategy = fmt::format("gemm template {}x{}x{}{}, {} stages, {}{}{}{}{}{}{}{}{}", c_.block_m, c_.block_n, BlockK(g_),
                             OperandsWord(), c_.stages,
                             *c_.pingpong ? "ping-pong consumers" : "cooperative consumers",
                             cluster > 1 ? fmt::format(", clusters of {} sharing B by multicast", cluster) : "",
                             *c_.overlap_epilogue ? ", epilogue overlapping the next main loop" : "",
                             ringed_load_ >= 0 ? ", residual by TMA into its ring" : staged_load_ >= 0 ? ", residual staged by TMA" : "",
                             staged_ < 0 ? "" : StoreByThreads(g_) ? ", staged store by the threads (unaligned rows)" : ", TMA store",
                             c_.splits > 1 ? fmt::format(", split-K x{}", c_.splits) : "",
                             StreamKTiles(g_, c_) > 0 ? fmt::format(", stream-K over the last {} tiles on {} CTAs", StreamKTiles(g_, c_), StreamKCtas(g_, c_)) : "",
                             g_.a_mn_major >= 0 ? ", A MN-major" : "", g_.b_k_major >= 0 ? ", B K-major" : "");
    if (!g_.n_parts.empty()) {
      std::vector<std::string> widths;
      for (const GemmTemplateKernel& p : g_.n_parts) widths.push_back(std::to_string(p.n));
      s.strategy += fmt::format(", {} products grouped over N ({} columns)", g_.n_parts.size(), fmt::join(widths, " + "));
    }
    if (!g_.gate.empty()) s.strategy += fmt::format(", gated: %{}'s product in the same tiles", g_.gate.front().product);
    // The kernel: its parameters, then the skeleton (codegen/cuda/device/gemm_sm90.cuh)
    // instantiated on this problem's Config, A loader and Epilogue.
    std::string parameters = "const __grid_constant__ tf::TensorMap map_a, const __grid_constant__ tf::TensorMap map_b";
    std::string maps = "&map_a, &map_b";
    // A gated product's map_b is its gate's weight (the tiles' first halves).
    TensorMapArg map_a = OperandMapA(), map_b = OperandMapB(!g_.n_parts.empty() ? g_.n_parts.front() : !g_.gate.empty() ? g_.gate.front() : g_);
    // TF32 operands, rounded as they are copied; 3xTF32 ones whole, split by the consumers.
    map_a.tf32 = map_b.tf32 = g_.operand_dtype == DType::kF32 && !g_.split_f32;
    s.launch.args.push_back({LaunchArg::Kind::kTensorMap, g_.a, map_a, 0});
    s.launch.args.push_back({LaunchArg::Kind::kTensorMap, map_b.node, map_b, 0});
    auto add_map = [&](bool used, const std::string& name, const TensorMapArg& map) {
      maps += used ? ", &" + name : ", nullptr";
      if (!used) return;
      parameters += ", const __grid_constant__ tf::TensorMap " + name;
      s.launch.args.push_back({LaunchArg::Kind::kTensorMap, map.node, map, 0});
    };
    const bool by_threads = StoreByThreads(g_);
    add_map(staged_ >= 0 && !by_threads, "map_out", staged_ >= 0 && !by_threads ? OutputMap() : TensorMapArg{});
    add_map(staged_load_ >= 0, "map_in", staged_load_ >= 0 ? TileMap(LoadBuffer(staged_load_)) : TensorMapArg{});
    add_map(ringed_load_ >= 0, "map_residual", ringed_load_ >= 0 ? ResidualChunkMap(LoadBuffer(ringed_load_)) : TensorMapArg{});
    std::string buffers;
    if (!g_.gate.empty()) {
      // A gated product: this product's weight as the second B map, the gate's epilogue and this
      // one's (Epilogue{{the gate's}, {this product's}}).
      parameters += ", const __grid_constant__ tf::TensorMap map_b1";
      TensorMapArg map = OperandMapB(g_);
      map.tf32 = map_b.tf32;
      s.launch.args.push_back({LaunchArg::Kind::kTensorMap, map.node, map, 0});
      maps += ", nullptr, {&map_b1}";
      std::string gate_buffers, own_buffers;
      parameters += GemmEpilogueParameters(g_.gate.front(), s, gate_buffers, "g_");
      parameters += GemmEpilogueParameters(g_, s, own_buffers);
      buffers = fmt::format("{{{}}}, {{{}}}", gate_buffers, own_buffers);
    } else if (g_.n_parts.empty()) {
      parameters += GemmEpilogueParameters(g_, s, buffers);
      maps += by_threads ? fmt::format(", b{}", g_.epilogue.stores[staged_].buffer) : ", nullptr";
    } else {
      // A product grouped over N: parts 1.. B maps, and each part's epilogue with its own
      // buffers (Epilogue{{part 0's}, {part 1's}, ...}).
      maps += ", nullptr, {";
      for (size_t p = 1; p < g_.n_parts.size(); ++p) {
        const std::string name = fmt::format("map_b{}", p);
        parameters += ", const __grid_constant__ tf::TensorMap " + name;
        TensorMapArg map = OperandMapB(g_.n_parts[p]);
        map.tf32 = map_b.tf32;
        s.launch.args.push_back({LaunchArg::Kind::kTensorMap, map.node, map, 0});
        maps += fmt::format("{}&{}", p > 1 ? ", " : "", name);
      }
      maps += "}";
      for (size_t p = 0; p < g_.n_parts.size(); ++p) {
        std::string part_buffers;
        parameters += GemmEpilogueParameters(g_.n_parts[p], s, part_buffers, fmt::format("p{}_", p));
        buffers += fmt::format("{}{{{}}}", p > 0 ? ", " : "", part_buffers);
      }
    }
    if (g_.row_norm) {
      // A normed by rows: the norm's scale and epsilon after the maps (a plain product names
      // its empty more_b first).
      parameters += ", const unsigned short* __restrict__ norm_scale";
      s.launch.args.push_back({LaunchArg::Kind::kBuffer, g_.row_norm->scale, {}, 0});
      maps += fmt::format("{}, norm_scale, {:.9e}f", g_.n_parts.empty() && g_.gate.empty() ? ", {}" : "", g_.row_norm->epsilon);
      s.strategy += fmt::format(", A normed by rows in registers (%{}'s norm)", g_.row_norm->normed);
    }
    if (g_.scale_blocks) {
      // Block scales after the norm's fields (a plain product names its empty more_b first).
      parameters += ", const float* __restrict__ block_scale_a, const float* __restrict__ block_scale_b";
      s.launch.args.push_back({LaunchArg::Kind::kBuffer, g_.block_scale_a, {}, 0});
      s.launch.args.push_back({LaunchArg::Kind::kBuffer, g_.block_scale_b, {}, 0});
      if (!g_.row_norm) maps += g_.n_parts.empty() && g_.gate.empty() ? ", {}, nullptr, 0.0f" : ", nullptr, 0.0f";
      maps += ", block_scale_a, block_scale_b";
      s.strategy += fmt::format(", block scales ({} blocks of K{})", g_.scale_blocks,
                                g_.b_scale_columns ? fmt::format(", B's by {} columns", g_.b_scale_columns) : "");
    }
    const bool scratch = c_.splits > 1 || StreamKTiles(g_, c_) > 0;  // split-K's or stream-K's counters and partials
    if (scratch) {
      parameters += ", unsigned* __restrict__ tile_counters, float* __restrict__ partials";
      s.launch.args.push_back({LaunchArg::Kind::kScratch, -1, {}, 0});
      s.launch.args.push_back({LaunchArg::Kind::kScratch, -1, {}, CounterBytes(g_, c_)});
    }
    if (g_.amax) {
      // The amax's running max and warp count, at the counters' region's end (zero between launches).
      parameters += ", unsigned* __restrict__ amax_words";
      s.launch.args.push_back({LaunchArg::Kind::kScratch, -1, {}, kAmaxScratchOffset});
      s.strategy += fmt::format(", the amax of %{} in the epilogue{}", g_.amax->value, g_.amax->stored ? "" : " (%" + std::to_string(g_.amax->value) + " not stored)");
    }
    std::string rows = fmt::format("{}", g_.rows);
    if (RowsAtLaunch()) {
      rows = g_.rows_size.Print("tf_sym");
      for (int id : g_.rows_size.Symbols()) {
        parameters += fmt::format(", const long long tf_sym{}", id);
        s.launch.args.push_back({LaunchArg::Kind::kScalar, -1, {}, g_.symbols[static_cast<size_t>(id)]});
      }
    }
    std::string out = fmt::format("extern \"C\" __global__ void __launch_bounds__({}, 1) {}({}) {{\n", threads, g_.name, parameters);
    out += ConfigStruct() + (!g_.n_parts.empty() ? GroupedEpilogueStructs()
                             : !g_.gate.empty() ? GatedEpilogueStructs()
                                                : GemmEpilogueStruct(g_, staged_, staged_load_, ringed_load_));
    out += fmt::format("  tf::GemmMaps maps{{{}}};\n  maps.rows = (int)({});\n", maps, rows);
    if (g_.amax) out += "  maps.amax = amax_words;\n";
    out += fmt::format("  tf::GemmSm90<Config, {}>(maps, Epilogue{{{}}}, {});\n}}\n", ALoader(), buffers,
                       scratch ? "tile_counters, partials" : "nullptr, nullptr");
    // The skeleton awaits the prior grid itself, its producer after loading what of B it may
    // before (kBBeforeWait).
    FinishTemplateSource(s, std::move(out), SharedBytes(c_, g_, staged_ >= 0, ringed_load_ >= 0), /*awaits_in_skeleton=*/true);
    s.launch.cluster = {cluster, 1, 1};
    s.launch.persistent_clusters = cluster > 1;
    s.launch.scratch_bytes = std::max(ScratchBytes(g_, c_), g_.amax ? kScratchCounterBytes : int64_t{0});
    return s;
  }

 private:
  Status Validate() const {
    if (c_.block_m != 64 && c_.block_m != 128 && c_.block_m != 192)
      return InvalidArgument(fmt::format("{}: block_m {} (need 64, 128 or 192)", g_.name, c_.block_m));
    if (c_.block_m == 192 && (*c_.pingpong || *c_.overlap_epilogue || !IsHalf(g_.operand_dtype)))
      return InvalidArgument(fmt::format("{}: 192-row tiles are for 16-bit operands on cooperative consumers, the epilogue in the tail", g_.name));
    if (c_.block_n < 64 || c_.block_n > 256 || c_.block_n % 64 != 0)
      return InvalidArgument(fmt::format("{}: block_n {} (need 64, 128, 192 or 256)", g_.name, c_.block_n));
    if (AccumulatorRegisters(c_, c_.block_n) > MaxAccumulatorRegisters(c_))
      return InvalidArgument(fmt::format("{}: {} x {} accumulators per consumer{} (at most {} registers a thread)", g_.name,
                                         ConsumerRows(c_), c_.block_n, *c_.promote ? ", twice over promoted" : "",
                                         MaxAccumulatorRegisters(c_)));
    if (g_.scale_blocks && (!*c_.promote || c_.block_n > 192))
      return InvalidArgument(fmt::format("{}: block scales apply to promoted sums (each K step's apart), at most 192 columns a tile", g_.name));
    if (g_.b_scale_columns && g_.b_scale_columns % c_.block_n != 0 && !(g_.b_scale_columns == 128 && c_.block_n == 192))
      return InvalidArgument(fmt::format("{}: B's scales are shared by {} columns: tiles of 64, 128 or 192 columns ({})", g_.name,
                                         g_.b_scale_columns, c_.block_n));
    if (*c_.promote && !IsFloat8(g_.operand_dtype) && !g_.split_f32)
      return InvalidArgument(fmt::format("{}: promoted sums are for FP8 and 3xTF32 products", g_.name));
    const bool fp8 = IsFloat8(g_.operand_dtype);
    if (*c_.overlap_epilogue && (fp8 ? !*c_.promote || g_.scale_blocks || c_.block_n > 128 : *c_.promote))
      return InvalidArgument(fmt::format("{}: an overlapped epilogue holds the f32 sums of FP8 products promoted, without block scales, "
                                         "at most 128 columns a tile ({})", g_.name, c_.block_n));
    if (c_.stages < 2) return InvalidArgument(fmt::format("{}: {} stages (need at least 2)", g_.name, c_.stages));
    if (!g_.n_parts.empty() && (!PartsTakeWidth(g_, c_.block_n) || *c_.overlap_epilogue))
      return InvalidArgument(fmt::format("{}: a product grouped over N needs tiles within one part ({} columns) and the epilogue in the tail",
                                         g_.name, c_.block_n));
    if (g_.partner != 0 && !PartsTakeWidth(g_, c_.block_n))
      return InvalidArgument(fmt::format("{}: the epilogue reads column c XOR {}: tiles of whole multiples of {} columns ({} columns)", g_.name,
                                         g_.partner, 2 * g_.partner, c_.block_n));
    if (!g_.gate.empty() && !GateTakesWidth(g_, c_.block_n))
      return InvalidArgument(fmt::format("{}: a gated product's tiles are halves of whole 64-column boxes that tile N = {} ({} columns)", g_.name,
                                         g_.n, c_.block_n));
    if (g_.row_norm) {
      if (Status fits = RowNormFits(g_); !fits.ok()) return InvalidArgument(fmt::format("{}: A normed by rows: {}", g_.name, fits.message()));
      if (*c_.pingpong || *c_.overlap_epilogue || c_.splits > 1 || c_.stream_k.value_or(false) || staged_load_ >= 0 || ringed_load_ >= 0)
        return InvalidArgument(fmt::format("{}: A normed by rows needs cooperative consumers, one unit a tile and the epilogue in the tail, "
                                           "without a staged or ringed load", g_.name));
    }
    const int64_t shared = SharedBytes(c_, g_, staged_ >= 0, ringed_load_ >= 0);
    if (shared > kSharedLimit) return InvalidArgument(fmt::format("{}: {} bytes of shared memory (the limit is {})", g_.name, shared, kSharedLimit));
    RETURN_IF_ERROR(CheckClusters(g_, c_));
    if (c_.group_m < 1 || c_.sm_count < 1) return InvalidArgument(fmt::format("{}: group_m and sm_count must be positive", g_.name));
    if (c_.splits < 1 || c_.splits > KSteps(g_))
      return InvalidArgument(fmt::format("{}: {} split-K units for {} steps of K", g_.name, c_.splits, KSteps(g_)));
    if (c_.splits > 1 && *c_.pingpong) return InvalidArgument(fmt::format("{}: split-K needs cooperative consumers", g_.name));
    if (g_.operand_dtype == DType::kI8 && (*c_.promote || *c_.overlap_epilogue || g_.scale_blocks))
      return InvalidArgument(fmt::format("{}: int8 products sum in int32 (exact): not promoted, no block scales, the epilogue in the tail", g_.name));
    if (*c_.overlap_epilogue && g_.dtype == DType::kF32 && !IsFloat8(g_.operand_dtype))
      return InvalidArgument(fmt::format("{}: an overlapped epilogue holds half-precision products or FP8 products' sums, not other f32 ones",
                                         g_.name));
    if (g_.split_f32 && *c_.pingpong) return InvalidArgument(fmt::format("{}: 3xTF32 needs cooperative consumers (they share B's split)", g_.name));
    if (*c_.overlap_epilogue && (*c_.pingpong || c_.splits > 1))
      return InvalidArgument(fmt::format("{}: an overlapped epilogue needs cooperative consumers without split-K", g_.name));
    if (g_.amax && (!g_.n_parts.empty() || !g_.gate.empty()))
      return InvalidArgument(fmt::format("{}: an amax in the epilogue of one product, not grouped over N or gated", g_.name));
    if (c_.splits > 1 && Tiles(g_, c_.block_m, c_.block_n) * 4 > (g_.amax ? kAmaxScratchOffset : kScratchCounterBytes))
      return InvalidArgument(fmt::format("{}: split-K over more tiles than the scratch memory's counter region holds", g_.name));
    if (c_.stream_k.value_or(false) && (*c_.pingpong || *c_.overlap_epilogue || c_.splits > 1 || c_.cluster_m > 1))
      return InvalidArgument(fmt::format("{}: stream-K needs single CTAs of cooperative consumers, the epilogue in the tail, no split-K", g_.name));
    return Status::Ok();
  }

  // The operands' tensor-core type in the strategy, where it is not the product's.
  std::string OperandsWord() const {
    if (g_.operand_dtype == DType::kF32) return g_.split_f32 ? fmt::format(" 3xTF32{}", *c_.promote ? ", promoted" : "") : " TF32";
    if (IsFloat8(g_.operand_dtype)) return fmt::format(" FP8 {}{}", DTypeName(g_.operand_dtype), *c_.promote ? ", promoted" : "");
    if (g_.operand_dtype == DType::kI8) return " int8, int32 sums";
    return "";
  }

  // A as [batch][rows][K]: boxes of block_m rows × 64 columns; MN-major, the [K][rows] value
  // its prologue transposes: boxes of 64 rows of K × 64 of M, block_m / 64 of them per stage;
  // or, read through a view, as (column in head, row in entry, head, entry) with the first boxes.
  TensorMapArg OperandMapA() const {
    if (g_.a_conv) return ConvMapA(*g_.a_conv);
    if (g_.a_mn_major >= 0) return GemmMatrixMap(g_.a_mn_major, g_.operand_dtype, g_.batch, g_.k, g_.rows, BlockK(g_), 64);
    if (!g_.a_view) return GemmMatrixMap(g_.a, g_.operand_dtype, g_.batch, g_.rows, g_.k, c_.block_m, BlockK(g_));
    const GemmOperandView& v = *g_.a_view;
    TensorMapArg m;
    m.node = v.node;
    m.dtype = g_.operand_dtype;
    m.rank = 4;
    m.dims = {v.head, v.entry_rows, v.heads, v.entries, 1};
    // A dimension of one element has no stride of its own: any aligned one does.
    const int64_t bytes = static_cast<int64_t>(DTypeSize(g_.operand_dtype));
    for (int d = 0; d < 3; ++d) m.strides_bytes[d] = std::max<int64_t>(v.stride[d], 8) * bytes;
    m.box = {BlockK(g_), c_.block_m, 1, 1, 1};
    m.offset_bytes = v.offset * bytes;
    return m;
  }
  // A as im2col of the NHWC activation (C, W, H, N): block_m output pixels × a K step of channels
  // per copy, the window's first tap bounded by the padding (Im2colMapArg).
  TensorMapArg ConvMapA(const GemmConvWindow& c) const {
    TensorMapArg m;
    m.node = c.node;
    m.dtype = g_.operand_dtype;
    m.rank = 4;
    m.dims = {c.channels, c.width, c.height, c.images, 1};
    const int64_t bytes = static_cast<int64_t>(DTypeSize(g_.operand_dtype));
    m.strides_bytes = {c.channels * bytes, c.width * c.channels * bytes, c.height * c.width * c.channels * bytes, 0};
    Im2colMapArg im2col;
    for (int d = 0; d < 2; ++d) {  // the map's spatial order is (W, H)
      const int spatial = 1 - d;
      im2col.lower[d] = static_cast<int>(-c.pads[spatial]);
      im2col.upper[d] = static_cast<int>(c.pads[2 + spatial] - (c.kernel[spatial] - 1) * c.dilations[spatial]);
      im2col.strides[d] = static_cast<int>(c.strides[spatial]);
    }
    im2col.channels = BlockK(g_);  // one 128-byte swizzle row: 64 half-precision channels, 32 f32 ones
    im2col.pixels = c_.block_m;
    m.im2col = im2col;
    return m;
  }
  // B as [batch][K][N]: boxes of BlockK rows of K × one 128-byte swizzle row of N (64
  // half-precision columns, 32 f32 ones), block_n of N per stage; or K-major, the [N][K]
  // value its prologue transposes: boxes of 64 rows of N × BlockK of K. `part`: g_, or the
  // part of a product grouped over N.
  TensorMapArg OperandMapB(const GemmTemplateKernel& part) const {
    if (part.b_k_major >= 0) return GemmMatrixMap(part.b_k_major, g_.operand_dtype, g_.batch, part.BRowsInMemory(), g_.k, 64, BlockK(g_));
    return GemmMatrixMap(part.b, g_.operand_dtype, g_.batch, part.BKRowsInMemory(), part.n, BlockK(g_),
                         128 / static_cast<int>(DTypeSize(g_.operand_dtype)));
  }
  // The staged output (or staged load) as [batch][rows][N]: boxes of 64 rows × 64 columns.
  TensorMapArg TileMap(const KernelBuffer& buffer) const { return GemmMatrixMap(buffer.node, buffer.dtype, g_.batch, g_.rows, g_.n, 64, 64); }
  // 8-bit values: boxes of 64 rows × 64 bytes, unswizzled; f32 values: 64 rows × 32 columns,
  // one 128-byte swizzle row (GemmStagedPair's kStoreBytes).
  TensorMapArg OutputMap() const {
    TensorMapArg m = TileMap(g_.epilogue.buffers[g_.epilogue.stores[staged_].buffer]);
    if (StagedStoreBytes(g_) == 1) m.swizzle_128b = false;
    if (StagedStoreBytes(g_) == 4) m.box[0] = 32;
    return m;
  }
  // The residual as [batch][rows][N] in boxes of one epilogue chunk: block_m rows × the
  // chunk's 8 or 16 columns, unswizzled (16 or 32 bytes a row).
  TensorMapArg ResidualChunkMap(const KernelBuffer& buffer) const {
    TensorMapArg m = GemmMatrixMap(buffer.node, buffer.dtype, g_.batch, g_.rows, g_.n, c_.block_m, c_.block_n / EpilogueChunks(c_));
    m.swizzle_128b = false;
    return m;
  }

  // Whether the Epilogue functor stores anything itself (an output besides the staged one;
  // every output of a product grouped over N).
  bool EpilogueWrites() const { return !g_.n_parts.empty() || g_.epilogue.stores.size() > (staged_ >= 0 ? 1u : 0u); }

  // A product grouped over N: each part's Epilogue (EpilogueP, its columns from 0), and the
  // Epilogue the skeleton calls: PairP for the pairs of a tile in part P (a tile's columns lie
  // in one part; a local class has no member templates), operator() handing a column to its
  // part's.
  std::string GroupedEpilogueStructs() const {
    std::string out, members, scalar, pair_of;
    const bool partner = g_.partner != 0;
    for (size_t p = 0; p < g_.n_parts.size(); ++p) {
      const GemmTemplateKernel& part = g_.n_parts[p];
      out += GemmEpilogueStruct(part, -1, -1, -1, fmt::format("Epilogue{}", p));
      members += fmt::format("    Epilogue{0} e{0};\n", p);
      const bool last = p + 1 == g_.n_parts.size();
      const std::string guard = last ? "      " : fmt::format("      if (col < {}) ", PartStart(p + 1));
      // (Parts reading a partner column take it: the grouped product's one distance.)
      scalar += fmt::format("{}return e{}(row, col - {}, acc, loaded{});\n", guard, p, PartStart(p), part.partner != 0 ? ", partner" : "");
      pair_of += fmt::format(
          "    __device__ __forceinline__ void Pair{}(tf_index_t row, int col, const float (&acc)[2], const float (&loaded)[2], {}"
          "float (&result)[2]) const {{\n      e{}.Pair(row, col - {}, acc, loaded, {}result);\n    }}\n",
          p, partner ? "const float (&partner)[2], " : "", p, PartStart(p), part.partner != 0 ? "partner, " : "");
    }
    // The skeleton knows a tile's part (a tile lies in one) and calls its epilogue directly.
    return out + "  struct Epilogue {\n" + fmt::format("    typedef {} tf_index_t;\n", GemmIndexType(g_)) + members +
           fmt::format("    __device__ __forceinline__ float operator()(tf_index_t row, int col, float acc, float loaded{}) const {{\n",
                       partner ? ", float partner" : "") +
           scalar + "    }\n" + pair_of + "  };\n";
  }
  // A gated product: the gate's Epilogue (its output returned, not stored), this product's
  // (its loads of the gate's output given), and the Epilogue the skeleton calls with both
  // products' sums of a column, which rounds the gate's value to its output's type (as the
  // graph stores it) before this epilogue reads it.
  std::string GatedEpilogueStructs() const {
    const GemmTemplateKernel& gate = g_.gate.front();
    // Its one store (Gateable), at the product's position: returned, not written.
    TF_CHECK_MSG(gate.epilogue.stores.size() == 1, "a gate stores its output alone");
    const int gate_store = 0;
    const std::string_view type = DTypeName(gate.epilogue.buffers[gate.epilogue.stores[gate_store].buffer].dtype);
    return GemmEpilogueStruct(gate, gate_store, -1, -1, "EpilogueGate") + GemmEpilogueStruct(g_, staged_, -1, -1, "EpilogueOwn") +
           "  struct Epilogue {\n" + fmt::format("    typedef {} tf_index_t;\n", GemmIndexType(g_)) +
           "    EpilogueGate gate;\n    EpilogueOwn own;\n"
           "    __device__ __forceinline__ float operator()(tf_index_t row, int col, float gate_acc, float acc, float loaded) const {\n" +
           fmt::format("      return own(row, col, acc, loaded, tf_cvt_{0}(tf_pack_{0}(gate(row, col, gate_acc, 0.0f))));\n", type) +
           "    }\n"
           "    __device__ __forceinline__ void Pair(tf_index_t row, int col, const float (&gate_acc)[2], const float (&acc)[2], "
           "const float (&loaded)[2], float (&result)[2]) const {\n"
           "      const float none[2] = {0.0f, 0.0f};\n"
           "      float value[2];\n"
           "      gate.Pair(row, col, gate_acc, none, value);\n" +
           fmt::format("      value[0] = tf_cvt_{0}(tf_pack_{0}(value[0]));\n      value[1] = tf_cvt_{0}(tf_pack_{0}(value[1]));\n", type) +
           "      own.Pair(row, col, acc, loaded, value, result);\n"
           "    }\n  };\n";
  }
  const KernelBuffer& LoadBuffer(int value) const { return g_.epilogue.buffers[g_.epilogue.values[value].buffer]; }
  // The skeleton's compile-time configuration, a local class (enumerators: a local class has
  // no static members) so the kernel's text is all a compile unit needs of it.
  std::string ConfigStruct() const {
    // f32 operands go to the tensor cores as TF32, or as 3xTF32 (split_f32).
    const char* element = g_.operand_dtype == DType::kF32 ? "tf::Tf32" : TileElementType(g_.operand_dtype);
    std::string types = fmt::format("    using Element = {};\n    using Index = {};\n", element, GemmIndexType(g_));
    if (staged_ >= 0) types += fmt::format("    using StoreElement = {};\n", TileElementType(g_.epilogue.buffers[g_.epilogue.stores[staged_].buffer].dtype));
    // An overlapped epilogue's held products: the MatMul's own 16-bit type (ProductMayBeHeld),
    // or f32 sums (an FP8 product: kHeldF32).
    if (*c_.overlap_epilogue && IsHalf(g_.dtype)) types += fmt::format("    using HeldElement = {};\n", TileElementType(g_.dtype));
    const int load = staged_load_ >= 0 ? staged_load_ : ringed_load_;
    if (load >= 0) types += fmt::format("    using LoadElement = {};\n", TileElementType(LoadBuffer(load).dtype));
    return fmt::format(
        "  struct Config {{\n{}"
        "    enum : int {{ kBM = {}, kBN = {}, kStages = {}, kGroupM = {}, kClusterM = {}, kSplits = {}, kSplitSteps = {} }};\n"
        "    enum : int {{ kStreamTiles = {}, kStreamCtas = {} }};\n"
        "    enum : int {{ kRows = {}, kN = {}, kK = {}, kBatch = {} }};\n"
        "    enum : int {{ kPingPong = {}, kOverlap = {}, kChunks = {}, kStaging = {} }};\n"
        "    enum : int {{ kStagedStore = {}, kStoreByThreads = {}, kStagedLoad = {}, kRingedLoad = {}, kAMnMajor = {}, kBKMajor = {} }};\n"
        "    enum : int {{ kProducerRegisters = {}, kConsumerRegisters = {}, kPromote = {} }};\n"
        "    enum : int {{ kBBeforeWait = {}, kSplitTf32 = {}, kEpilogueWrites = {} }};\n"
        "    enum : int {{ kBParts = {}, kBPart1 = {}, kBPart2 = {}, kBPart3 = {}, kGated = {}, kPartnerGroups = {}, kNormA = {} }};\n"
        "    enum : int {{ kScaleBlocks = {}, kBScaleColumns = {}, kStoreBytes = {}, kHeldF32 = {}, kRowsAtLaunch = {}, kWholeRowTiles = {} }};\n"
        "    enum : int {{ kAmax = {} }};\n"
        "  }};\n",
        types, c_.block_m, c_.block_n, c_.stages, c_.group_m, c_.cluster_m, c_.splits, StepsPerSplit(g_, c_), StreamKTiles(g_, c_),
        StreamKCtas(g_, c_), RowsAtLaunch() ? 0 : g_.rows, g_.n, g_.k,
        g_.batch, *c_.pingpong ? 1 : 0, *c_.overlap_epilogue ? 1 : 0, *c_.overlap_epilogue ? OutputChunks() : 1,
        StagingBytes(c_, g_, staged_ >= 0), staged_ >= 0 ? 1 : 0, StoreByThreads(g_) ? 1 : 0, staged_load_ >= 0 ? 1 : 0, ringed_load_ >= 0 ? 1 : 0,
        g_.a_mn_major >= 0 ? 1 : 0, g_.b_k_major >= 0 ? 1 : 0, g_.split_f32 ? kSplitterRegisters : kProducerRegisters,
        g_.split_f32 ? kSplitConsumerRegisters : Consumers(c_) == 3 ? kThreeConsumerRegisters : kConsumerRegisters, *c_.promote ? 1 : 0,
        g_.b_read_only && c_.cluster_m == 1 ? 1 : 0, g_.split_f32 ? 1 : 0, EpilogueWrites() ? 1 : 0, std::max<size_t>(1, g_.n_parts.size()),
        PartStart(1), PartStart(2), PartStart(3), g_.gate.empty() ? 0 : 1, g_.partner / 8, g_.row_norm ? 1 : 0, g_.scale_blocks,
        g_.b_scale_columns, StagedStoreBytes(g_), *c_.overlap_epilogue && IsFloat8(g_.operand_dtype) ? 1 : 0, RowsAtLaunch() ? 1 : 0,
        RowsAtLaunch() && g_.rows % c_.block_m == 0 ? 1 : 0, g_.amax ? 1 : 0);
  }
  // The rows passed at launch (maps.rows) where the model's symbols give them: the kernel's
  // text then holds no row count, and one compile serves every binding that makes the same
  // choices. Not with stream-K (its split of the tiles is the host's, per row count).
  bool RowsAtLaunch() const { return StreamKTiles(g_, c_) == 0 && g_.rows_size.StandsFor(g_.rows, g_.symbols); }
  // An overlapped epilogue's chunks: of a tile's output columns (a gated product's are half).
  int OutputChunks() const {
    CudaGemmConfig output = c_;
    output.block_n = TileOutputColumns(g_, c_.block_n);
    return EpilogueChunks(output);
  }
  // The first column of part p of a product grouped over N (past the last part: N).
  int64_t PartStart(size_t p) const {
    if (g_.n_parts.empty()) return g_.n;
    int64_t start = 0;
    for (size_t i = 0; i < p && i < g_.n_parts.size(); ++i) start += g_.n_parts[i].n;
    return start;  // (past the last part, the parts' sum: N)
  }

  // How the producer loads A's tiles: a matrix, a view, or an implicit GEMM's im2col.
  std::string ALoader() const {
    if (g_.a_conv) {
      const GemmConvWindow& c = *g_.a_conv;
      return fmt::format("tf::Im2colA<{}, {}, {}, {}, {}, {}, {}, {}, {}, {}>", c.channels, c.out_height * c.out_width, c.out_width,
                         c.strides[1], c.pads[1], c.strides[0], c.pads[0], c.kernel[1], c.dilations[1], c.dilations[0]);
    }
    if (g_.a_view) return fmt::format("tf::ViewA<{}, {}>", g_.a_view->head, g_.a_view->entry_rows);
    if (g_.a_mn_major >= 0) return "tf::MatrixAMnMajor";
    return "tf::MatrixA";
  }

  const GemmTemplateKernel& g_;
  CudaGemmConfig c_;
  int staged_;       // the store written through shared memory and TMA (-1: every store direct)
  int staged_load_;  // the load read from the staging tile, brought by TMA (-1: none)
  int ringed_load_;  // the load read from the residual's ring in shared memory (RingedLoad; -1: none)
};

}  // namespace

TensorMapArg GemmMatrixMap(int node, DType dtype, int64_t batch, int64_t rows, int64_t cols, int box_rows, int box_cols) {
  TensorMapArg m;
  m.node = node;
  m.dtype = dtype;
  m.dims = {cols, rows, batch, 1, 1};
  const int64_t bytes = static_cast<int64_t>(DTypeSize(dtype));
  m.strides_bytes = {cols * bytes, rows * cols * bytes, 0, 0};
  m.box = {box_cols, box_rows, 1, 1, 1};
  return m;
}

bool GemmPassesBuffer(const GemmTemplateKernel& g, const KernelBuffer& buf) {
  if (g.output_in_registers && buf.is_output) return false;  // a gate's output, handed over in registers
  if (buf.node == g.gate_value && !buf.is_output) return false;
  if (g.amax && !g.amax->stored && buf.node == g.amax->value) return false;  // (its store dropped: its amax only)
  return buf.node != g.product || buf.is_output;
}

const char* GemmIndexType(const GemmTemplateKernel& g) {
  int64_t largest = g.rows * g.batch * g.n;
  for (const KernelBuffer& b : g.epilogue.buffers) largest = std::max(largest, b.elements);
  for (const GemmTemplateKernel& p : g.n_parts)
    if (GemmIndexType(p)[0] == 'l') largest = int64_t{1} << 31;
  for (const GemmTemplateKernel& p : g.gate)
    if (GemmIndexType(p)[0] == 'l') largest = int64_t{1} << 31;
  return largest < (int64_t{1} << 31) ? "int" : "long long";
}

namespace {

// The epilogue's values given by the template rather than loaded: the product's accumulator,
// its partner column's and the staged or ringed load, named `acc`, `partner` and `loaded`
// (with `suffix`, e.g. "[1]").
std::map<int, std::string> GivenValues(const GemmTemplateKernel& g, int staged_load, int ringed_load, const std::string& suffix) {
  const Kernel& k = g.epilogue;
  std::map<int, std::string> given;
  for (size_t v = 0; v < k.values.size(); ++v)
    if (k.values[v].kind == ScalarValue::Kind::kLoad && k.buffers[k.values[v].buffer].node == g.product)
      given[static_cast<int>(v)] = "acc" + suffix;
    else if (k.values[v].kind == ScalarValue::Kind::kLoad && k.buffers[k.values[v].buffer].node == g.gate_value)
      given[static_cast<int>(v)] = "gate" + suffix;
  // (Partner loads no store depends on, at partner 0, read any value: the accumulator.)
  for (int v : g.partner_loads) given[v] = (g.partner != 0 ? "partner" : "acc") + suffix;
  if (staged_load >= 0) given[staged_load] = "loaded" + suffix;
  if (ringed_load >= 0) given[ringed_load] = "loaded" + suffix;
  return given;
}

// Whether the epilogue's Pair accesses buffer `b` as one word per column pair: 8 bytes of f32
// values, 4 of half values, 2 of 8-bit floats, where N is even and the pair's two elements are
// adjacent from an even offset (PairsAreAdjacent: the product's position, a transposed store of
// it), so the word is aligned as the buffer's start is (256 bytes: the kernels' pointers are).
// f32 pairs: a TF32 product's f32 output and residual moved element by element took a 4-byte
// access per element, half of each 32-byte sector a warp touched written per instruction
// (ResNet-50's f32 convolutions under TF32, bench/results/2026-12-07-h100-tf32-epilogues.md).
bool PairsBuffer(const GemmTemplateKernel& g, const KernelBuffer& b, const Index& index) {
  return g.n % 2 == 0 && (IsHalf(b.dtype) || IsFloat8(b.dtype) || b.dtype == DType::kF32) && PairsAreAdjacent(g, index);
}

// A column pair's word of `dtype` values: its type, its two elements from the word's name
// ({0}), and the word from the two elements' stored values ({0}, {1}). f32 pairs are a float2,
// others an integer word of two elements.
struct PairWord {
  const char* type;
  const char* first;
  const char* second;
  const char* pack;
};
PairWord PairWordOf(DType dtype) {
  if (dtype == DType::kF32) return PairWord{"float2", "{0}.x", "{0}.y", "make_float2({0}, {1})"};
  if (IsFloat8(dtype)) return PairWord{"uint16_t", "(uint8_t){0}", "(uint8_t)({0} >> 8)", "(uint16_t){0} | ((uint16_t){1} << 8)"};
  return PairWord{"uint32_t", "(uint16_t){0}", "(uint16_t)({0} >> 16)", "(uint32_t){0} | ((uint32_t){1} << 16)"};
}

// The amax's running max taking element value `value` (GemmAmax: |u| of u as stored).
std::string AmaxUpdate(const GemmTemplateKernel& g, const std::string& value, const std::string& indent) {
  const std::string_view type = DTypeName(g.amax->value_dtype);
  const std::string stored = g.amax->value_dtype == DType::kF32 ? value : fmt::format("tf_cvt_{0}(tf_pack_{0}({1}))", type, value);
  return fmt::format("{}tf_amax = tf::GemmAmaxUpdate(tf_amax, {});\n", indent, stored);
}

// The stores' values, and the amax's where its store was dropped: what the scalar program computes.
std::vector<int> EpilogueRoots(const GemmTemplateKernel& g) {
  std::vector<int> roots;
  for (const KernelStore& st : g.epilogue.stores) roots.push_back(st.value);
  if (g.amax) roots.push_back(g.amax->scalar);
  return roots;
}

// Epilogue::Pair: the epilogue of the column pair (col, col + 1) that each thread holds in the
// wgmma accumulator layout. Loads and stores of values at the product's position move both
// columns as one word (4 bytes of half values, 2 of 8-bit floats): element by element, a warp's access touches
// eight rows' 32-byte sectors for 8 bytes each (GPT-2's training forward product that stored
// tanh-GELU's four intermediates so took 344 µs where one output takes 36: H200, 2026-11-30).
// The rest is operator()'s program, once per column.
std::string GemmEpiloguePair(const GemmTemplateKernel& g, int staged, int staged_load, int ringed_load) {
  const Kernel& k = g.epilogue;
  std::string out =
      "    __device__ __forceinline__ void Pair(tf_index_t row, int col, const float (&acc)[2], const float (&loaded)[2], " +
      std::string(g.gate_value >= 0 ? "const float (&gate)[2], " : "") + (g.partner != 0 ? "const float (&partner)[2], " : "") +
      "float (&result)[2]) const {\n";
  if (g.n % 2 != 0) return out + "      result[0] = (*this)(row, col, acc[0], loaded[0]);\n      result[1] = (*this)(row, col + 1, acc[1], loaded[1]);\n    }\n";
  out += "      const int col1 = col + 1;\n";
  const std::vector<std::string> vars0 = {"row", "col"}, vars1 = {"row", "col1"};
  std::map<int, std::string> given[2] = {GivenValues(g, staged_load, ringed_load, "[0]"), GivenValues(g, staged_load, ringed_load, "[1]")};
  for (size_t v = 0; v < k.values.size(); ++v) {
    const ScalarValue& value = k.values[v];
    if (value.kind != ScalarValue::Kind::kLoad || given[0].count(static_cast<int>(v))) continue;
    const KernelBuffer& b = k.buffers[value.buffer];
    if (!PairsBuffer(g, b, value.index)) continue;
    const std::string at = fmt::format("b{} + ({})", value.buffer, PrintIndex(value.index, vars0));
    const PairWord word = PairWordOf(b.dtype);
    const std::string name = fmt::format("p{}", v);
    out += fmt::format("      const {} {} = *(const {}*)({});\n", word.type, name, word.type, at);
    given[0][static_cast<int>(v)] = fmt::format("tf_cvt_{}({})", DTypeName(value.dtype), fmt::format(fmt::runtime(word.first), name));
    given[1][static_cast<int>(v)] = fmt::format("tf_cvt_{}({})", DTypeName(value.dtype), fmt::format(fmt::runtime(word.second), name));
  }
  const std::vector<int> roots = EpilogueRoots(g);
  std::vector<size_t> paired;  // stores written as pairs after both columns' programs
  for (size_t i = 0; i < k.stores.size(); ++i)
    if (static_cast<int>(i) != staged && PairsBuffer(g, k.buffers[k.stores[i].buffer], k.stores[i].index)) {
      paired.push_back(i);
      out += fmt::format("      float s{}[2];\n", i);
    }
  for (int e = 0; e < 2; ++e) {
    const std::vector<std::string>& vars = e == 0 ? vars0 : vars1;
    out += "      {\n" + CudaElementProgram(k, roots, given[e], vars, "        ");
    for (size_t i = 0; i < k.stores.size(); ++i) {
      const KernelStore& st = k.stores[i];
      if (static_cast<int>(i) == staged) continue;
      if (std::find(paired.begin(), paired.end(), i) != paired.end()) {
        out += fmt::format("        s{}[{}] = v{};\n", i, e, st.value);
      } else {
        out += fmt::format("        b{}[{}] = tf_pack_{}(v{});\n", st.buffer, PrintIndex(st.index, vars), DTypeName(k.buffers[st.buffer].dtype),
                           st.value);
      }
    }
    if (g.amax) out += AmaxUpdate(g, fmt::format("v{}", g.amax->scalar), "        ");
    out += staged >= 0 ? fmt::format("        result[{}] = v{};\n", e, k.stores[staged].value) : fmt::format("        result[{}] = 0.0f;\n", e);
    out += "      }\n";
  }
  for (size_t i : paired) {
    const KernelStore& st = k.stores[i];
    const std::string_view dtype = DTypeName(k.buffers[st.buffer].dtype);
    const PairWord word = PairWordOf(k.buffers[st.buffer].dtype);
    const std::string packed = fmt::format(fmt::runtime(word.pack), fmt::format("tf_pack_{}(s{}[0])", dtype, i),
                                           fmt::format("tf_pack_{}(s{}[1])", dtype, i));
    out += fmt::format("      *({}*)(b{} + ({})) = {};\n", word.type, st.buffer, PrintIndex(st.index, vars0), packed);
  }
  return out + "    }\n";
}

}  // namespace

namespace {

// The Prefetch member (GemmEpilogueStruct's with_prefetch): one prefetch per distinct address
// the stores' programs load from memory, the product's own values (given) excepted.
std::string GemmEpiloguePrefetch(const GemmTemplateKernel& g, const std::vector<int>& roots, const std::vector<std::string>& vars) {
  const Kernel& k = g.epilogue;
  const std::map<int, std::string> given = GivenValues(g, -1, -1, "");
  std::vector<bool> needed(k.values.size(), false);
  std::vector<int> pending = roots;
  while (!pending.empty()) {
    const int v = pending.back();
    pending.pop_back();
    if (v < 0 || needed[static_cast<size_t>(v)]) continue;
    needed[static_cast<size_t>(v)] = true;
    for (int a : k.values[static_cast<size_t>(v)].args) pending.push_back(a);
  }
  std::string out = "    __device__ __forceinline__ void Prefetch(tf_index_t row, int col) const {\n";
  std::set<std::string> issued;
  for (size_t v = 0; v < k.values.size(); ++v) {
    const ScalarValue& value = k.values[v];
    if (!needed[v] || value.kind != ScalarValue::Kind::kLoad || given.count(static_cast<int>(v)) || UsesValue(value.index)) continue;
    const KernelBuffer& b = k.buffers[static_cast<size_t>(value.buffer)];
    if (b.is_output || !GemmPassesBuffer(g, b)) continue;
    const std::string at = fmt::format("b{} + ({})", value.buffer, PrintIndex(value.index, vars));
    if (issued.insert(at).second) out += fmt::format("      tf::PrefetchL1({});\n", at);
  }
  if (issued.empty()) out += "      (void)row, (void)col;\n";
  return out + "    }\n";
}

}  // namespace

std::string GemmEpilogueStruct(const GemmTemplateKernel& g, int staged, int staged_load, int ringed_load, const std::string& struct_name,
                               bool with_prefetch) {
  const Kernel& k = g.epilogue;
  std::string out = "  struct " + struct_name + " {\n";
  out += fmt::format("    typedef {} tf_index_t;\n", GemmIndexType(g));
  for (size_t b = 0; b < k.buffers.size(); ++b)
    if (GemmPassesBuffer(g, k.buffers[b]))
      out += fmt::format("    {}{}* __restrict__ b{};\n", k.buffers[b].is_output ? "" : "const ", StorageType(k.buffers[b].dtype), b);
  // The amax's output, and this thread's largest |u| so far (GemmAmaxUpdate).
  if (g.amax) out += fmt::format("    {}* __restrict__ amax_out;\n    mutable float tf_amax = 0.0f;\n", StorageType(g.amax->dtype));
  // (A gated product's epilogue takes its gate's value too, one reading a partner column that.)
  out += fmt::format("    __device__ __forceinline__ float operator()(tf_index_t row, int col, float acc, float loaded{}{}) const {{\n",
                     g.gate_value >= 0 ? ", float gate" : "", g.partner != 0 ? ", float partner" : "");
  const std::vector<int> roots = EpilogueRoots(g);
  const std::vector<std::string> vars = {"row", "col"};
  out += CudaElementProgram(k, roots, GivenValues(g, staged_load, ringed_load, ""), vars, "      ");
  for (size_t i = 0; i < k.stores.size(); ++i) {
    const KernelStore& st = k.stores[i];
    if (static_cast<int>(i) == staged) continue;
    out += fmt::format("      b{}[{}] = tf_pack_{}(v{});\n", st.buffer, PrintIndex(st.index, vars), DTypeName(k.buffers[st.buffer].dtype), st.value);
  }
  if (g.amax) out += AmaxUpdate(g, fmt::format("v{}", g.amax->scalar), "      ");
  out += staged >= 0 ? fmt::format("      return v{};\n", k.stores[staged].value) : "      return 0.0f;\n";
  out += "    }\n";
  out += GemmEpiloguePair(g, staged, staged_load, ringed_load);
  if (g.amax)  // (called once, by the grid's last warp: GemmAmaxFinish)
    out += fmt::format("    __device__ __forceinline__ void StoreAmax(unsigned bits) const {{ amax_out[0] = tf_pack_{}(__uint_as_float(bits)); }}\n",
                       DTypeName(g.amax->dtype));
  if (with_prefetch) out += GemmEpiloguePrefetch(g, roots, vars);
  out += "  };\n";
  return out;
}

std::string GemmEpilogueParameters(const GemmTemplateKernel& g, CudaKernelSource& s, std::string& buffers, const std::string& prefix) {
  std::string parameters;
  for (size_t b = 0; b < g.epilogue.buffers.size(); ++b) {
    const KernelBuffer& buf = g.epilogue.buffers[b];
    if (!GemmPassesBuffer(g, buf)) continue;
    parameters += fmt::format(", {}{}* __restrict__ {}b{}", buf.is_output ? "" : "const ", StorageType(buf.dtype), prefix, b);
    buffers += fmt::format("{}{}b{}", buffers.empty() ? "" : ", ", prefix, b);
    s.launch.args.push_back({LaunchArg::Kind::kBuffer, buf.node, {}, 0});
  }
  if (g.amax) {  // (after the buffers, as the Epilogue's members are)
    parameters += fmt::format(", {}* __restrict__ {}amax_out", StorageType(g.amax->dtype), prefix);
    buffers += fmt::format("{}{}amax_out", buffers.empty() ? "" : ", ", prefix);
    s.launch.args.push_back({LaunchArg::Kind::kBuffer, g.amax->output, {}, 0});
  }
  return parameters;
}

StatusOr<CudaKernelSource> EmitCudaGemm(const GemmTemplateKernel& gemm, const CudaGemmConfig& config) {
  if (gemm.layer_norm) return Unimplemented(fmt::format("{}: a layer norm of A is the skinny template's (kNormA), not gemm_sm90's", gemm.name));
  return GemmEmitter(gemm, ResolveGemmConfig(gemm, config)).Run();
}

}  // namespace tilefuse
