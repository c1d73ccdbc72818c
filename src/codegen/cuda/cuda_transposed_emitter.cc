#include "codegen/cuda/cuda_transposed_emitter.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <set>

#include "codegen/cuda/cuda_scalar_program.h"
#include "codegen/cuda/cuda_vector_store.h"
#include "codegen/emit_util.h"
#include "codegen/transposed_tile_layout.h"

namespace tilefuse {

namespace {

constexpr int64_t kSharedLimit = 48 * 1024;  // static shared memory per block

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
bool PowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// The tile's extent along a dim: the configured edge, or the dim itself rounded up to a power
// of two where shorter (16 at least: the analysis tiles no shorter dim).
int TileEdge(int edge, int64_t extent) {
  int64_t e = 16;
  while (e < extent && e < edge) e *= 2;
  return static_cast<int>(std::min<int64_t>(e, edge));
}

int NarrowestStore(const Kernel& k) {
  int narrowest = 16;
  for (const KernelStore& s : k.stores) narrowest = std::min(narrowest, DTypeSize(k.buffers[s.buffer].dtype));
  return narrowest;
}

// Elements per global load of `load` along its contiguous dim: 16 bytes, halved until every
// vector starts aligned (the offset and the other dims' coefficients multiples of it) and
// ragged tiles end on whole vectors (the dim's extent a multiple of it).
int LoadVector(const Kernel& k, const TransposedTiling& t, const StagedLoad& load, int tile_d) {
  auto aligned = [&](int lv) {
    if (lv > tile_d || t.dims[t.across] % lv != 0 || load.offset % lv != 0) return false;
    for (size_t d = 0; d < load.coefficients.size(); ++d)
      if (static_cast<int>(d) != t.across && load.coefficients[d] % lv != 0) return false;
    return true;
  };
  int lv = std::max(1, 16 / DTypeSize(k.values[load.value].dtype));
  while (lv > 1 && !aligned(lv)) lv /= 2;
  return lv;
}

struct TilePlan {
  int tile_in = 0, tile_d = 0;
  std::vector<TileLayout> layouts;  // per staged load, in tiling.loads' order
  int64_t shared_bytes = 0;
};

// The tiles for edge `tile` and store vector `vector` (both valid).
TilePlan PlanTiles(const Kernel& k, const TransposedTiling& t, int tile, int vector) {
  // A dim that is a size of the symbols takes the whole edge, whatever its extent at this
  // binding: the tile's shape is in the kernel's text, and the launch's extent may be longer.
  auto extent = [&](int d) { return d < static_cast<int>(t.dim_sizes.size()) && !t.dim_sizes[d].IsConstant() ? int64_t{tile} : t.dims[d]; };
  TilePlan p;
  p.tile_in = TileEdge(tile, extent(t.inner()));
  p.tile_d = TileEdge(tile, extent(t.across));
  const int lanes_in = std::clamp(32 / (vector * NarrowestStore(k)), 1, p.tile_in / vector);
  for (const StagedLoad& load : t.loads) {
    TileLayout layout;
    layout.tile_in = p.tile_in;
    layout.tile_d = p.tile_d;
    layout.element_bytes = DTypeSize(k.values[load.value].dtype);
    layout.load_vector = LoadVector(k, t, load, p.tile_d);
    layout.store_vector = vector;
    layout.lanes_in = lanes_in;
    p.layouts.push_back(WithBestPitch(layout));
    p.shared_bytes += p.layouts.back().Bytes();
  }
  return p;
}

}  // namespace

CudaKernelConfig ResolveTransposedConfig(const Kernel& k, const TransposedTiling& t, const CudaKernelConfig& requested) {
  CudaKernelConfig c = requested;
  c.threads_per_row = 0;
  c.cache_row = 0;
  if (c.vector == 0) {
    c.vector = 16 / NarrowestStore(k);
    while (c.vector > 1 && t.dims.back() % c.vector != 0) c.vector /= 2;
  }
  if (c.tile <= 0) c.tile = PlanTiles(k, t, 64, c.vector).shared_bytes <= kSharedLimit ? 64 : 32;
  if (c.threads == 0) {
    const TilePlan p = PlanTiles(k, t, c.tile, c.vector);
    int most = p.layouts.front().StoreVectors();
    for (const TileLayout& l : p.layouts) most = std::max(most, l.LoadVectors());
    c.threads = static_cast<int>(std::min<int64_t>(256, CeilDiv(most, 32) * 32));
  }
  return c;
}

namespace {

class TransposedEmitter {
 public:
  TransposedEmitter(const Kernel& k, const TransposedTiling& t, const CudaKernelConfig& c) : k_(k), t_(t), c_(c) {
    names_ = {"i0", "i1"};
    for (size_t d = 0; d < t.dims.size(); ++d) names_.push_back(fmt::format("x{}", d));
    // A dim is printed over the symbols where its size is one of theirs that the kernel takes
    // (its indices' symbols): the tiles' bounds, their decoding and the offsets follow it.
    const std::vector<int> passed = PrintedSymbols(k);
    for (size_t d = 0; d < t.dims.size(); ++d) {
      const SymExpr& size = t.dim_sizes.size() == t.dims.size() ? t.dim_sizes[d] : SymExpr::Constant(t.dims[d]);
      const std::set<int> ids = size.Symbols();
      const bool at_launch = PrintsSymbolically(k, size, t.dims[d]) &&
                             std::all_of(ids.begin(), ids.end(), [&](int id) { return std::find(passed.begin(), passed.end(), id) != passed.end(); });
      sizes_.push_back(at_launch ? size : SymExpr::Constant(t.dims[d]));
    }
    placed_ = k;  // every index in coordinates: the unravelling's divisions fold away
    for (ScalarValue& v : placed_.values)
      if (v.index) v.index = InCoordinates(v.index, t.dims, &sizes_);
  }

  StatusOr<CudaKernelSource> Run() {
    RETURN_IF_ERROR(Validate());
    plan_ = PlanTiles(k_, t_, c_.tile, c_.vector);
    if (plan_.shared_bytes > kSharedLimit)
      return InvalidArgument(fmt::format("{}: tiles of {} need {} bytes of shared memory (at most {})", k_.name, c_.tile, plan_.shared_bytes, kSharedLimit));
    EmitTileOrigin();
    EmitLoadPhase();
    out_ += "  __syncthreads();\n";
    EmitStorePhase();
    return LoopKernelSource(k_, c_, out_, Tiles(), fmt::format("pointwise transposed {}x{} x{}", plan_.tile_in, plan_.tile_d, c_.vector));
  }

 private:
  Status Validate() const {
    if (c_.threads < 32 || c_.threads > 1024 || c_.threads % 32 != 0)
      return InvalidArgument(fmt::format("{}: {} threads per block (need a multiple of 32 in [32, 1024])", k_.name, c_.threads));
    if (!PowerOfTwo(c_.tile) || c_.tile < 16 || c_.tile > 128)
      return InvalidArgument(fmt::format("{}: tile edge {} (need a power of two in [16, 128])", k_.name, c_.tile));
    if (!PowerOfTwo(c_.vector) || c_.vector > 16 || t_.dims.back() % c_.vector != 0)
      return InvalidArgument(fmt::format("{}: vector width {} (need a power of two up to 16 dividing the output's last dim {})", k_.name,
                                         c_.vector, t_.dims.back()));
    return Status::Ok();
  }

  int Inner() const { return t_.inner(); }
  bool AtLaunch(int d) const { return !sizes_[d].IsConstant(); }
  bool AnyAtLaunch() const {
    for (size_t d = 0; d < sizes_.size(); ++d)
      if (AtLaunch(static_cast<int>(d))) return true;
    return false;
  }
  // Dim d's extent as the kernel prints it: the launch's where it is a size of the symbols.
  std::string Dim(int d) const { return KernelSizeText(k_, sizes_[d], t_.dims[d]); }
  int64_t TilesIn() const { return CeilDiv(t_.dims.back(), plan_.tile_in); }
  int64_t TilesD() const { return CeilDiv(t_.dims[t_.across], plan_.tile_d); }
  int64_t Tiles() const { return TilesIn() * TilesD() * (k_.outer / (t_.dims.back() * t_.dims[t_.across])); }
  std::string Coordinate(int d) const { return names_[kCoordinateVar + d]; }
  // `index` (in coordinates) printed with coordinate `d` named `name` instead.
  std::string Print(const Index& index, int d = -1, const std::string& name = "") const {
    std::vector<std::string> names = names_;
    if (d >= 0) names[kCoordinateVar + d] = name;
    return PrintIndex(index, names);
  }

  // The block's tile: its first coordinates along the two tiled dims (in0, d0) and the other
  // dims' coordinates, from blockIdx.x = (rest · tiles_d + tile_d) · tiles_in + tile_in.
  void EmitTileOrigin() {
    // (The tiled dims' sizes only: the outer dims' are the grid's, and a kernel text that holds
    // no more of the shape serves other batch sizes of a model's symbolic dims.)
    out_ += fmt::format("  // A {}x{} tile: rows along dim {} of {} (contiguous in the output), columns along dim {} of {} (contiguous in the "
                        "staged loads).\n",
                        plan_.tile_in, plan_.tile_d, Inner(), Dim(Inner()), t_.across, Dim(t_.across));
    for (size_t l = 0; l < t_.loads.size(); ++l) {
      const TileLayout& layout = plan_.layouts[l];
      out_ += fmt::format("  __shared__ __align__(16) {} s{}[{} * {}];  // v{}, rows {} elements apart\n", StorageType(k_.values[t_.loads[l].value].dtype),
                          l, layout.tile_in, layout.pitch, t_.loads[l].value, layout.pitch);
    }
    out_ += "  const tf_index_t tile = blockIdx.x;\n";
    if (AnyAtLaunch()) {
      EmitTileOriginAtLaunch();
      return;
    }
    out_ += TilesIn() == 1 ? "  const tf_index_t in0 = 0;\n" : fmt::format("  const tf_index_t in0 = tile % {} * {};\n", TilesIn(), plan_.tile_in);
    if (TilesD() == 1) out_ += "  const tf_index_t d0 = 0;\n";
    else if (TilesIn() == 1) out_ += fmt::format("  const tf_index_t d0 = tile % {} * {};\n", TilesD(), plan_.tile_d);
    else out_ += fmt::format("  const tf_index_t d0 = tile / {} % {} * {};\n", TilesIn(), TilesD(), plan_.tile_d);
    int64_t later = TilesIn() * TilesD();  // the product of the extents decoded after dim d
    for (int d = Inner() - 1; d >= 0; --d) {
      if (d == t_.across) continue;
      const bool outermost = [&] {
        for (int o = 0; o < d; ++o)
          if (o != t_.across) return false;
        return true;
      }();
      out_ += fmt::format("  [[maybe_unused]] const tf_index_t {} = tile / {}{};\n", Coordinate(d), later,
                          outermost ? std::string() : fmt::format(" % {}", t_.dims[d]));
      later *= t_.dims[d];
    }
  }

  // The same where a dim's extent is the launch's: the tile counts computed, every step of the
  // decoding over them (one text for the bindings of the symbols).
  void EmitTileOriginAtLaunch() {
    auto tiles = [&](int d, int edge) {
      return AtLaunch(d) ? fmt::format("({} + {} - 1) / {}", Dim(d), edge, edge) : fmt::format("{}", CeilDiv(t_.dims[d], edge));
    };
    out_ += fmt::format("  const tf_index_t tiles_in = {}, tiles_d = {};\n", tiles(Inner(), plan_.tile_in), tiles(t_.across, plan_.tile_d));
    out_ += fmt::format("  const tf_index_t in0 = tile % tiles_in * {};\n", plan_.tile_in);
    out_ += fmt::format("  const tf_index_t d0 = tile / tiles_in % tiles_d * {};\n", plan_.tile_d);
    std::string later = "tiles_in * tiles_d";  // the product of the extents decoded after dim d
    for (int d = Inner() - 1; d >= 0; --d) {
      if (d == t_.across) continue;
      bool outermost = true;
      for (int o = 0; o < d; ++o) outermost = outermost && o == t_.across;
      out_ += fmt::format("  [[maybe_unused]] const tf_index_t {} = tile / ({}){};\n", Coordinate(d), later,
                          outermost ? std::string() : fmt::format(" % {}", Dim(d)));
      later += " * " + Dim(d);
    }
  }

  // A staged load's address in the coordinates: offset + Σ coefficient · x. Where dims are the
  // launch's, a coefficient that is the product of some other dims' extents (the load's
  // layout a permutation of the output's) is printed as the product of their sizes.
  Index StagedAddress(const StagedLoad& staged) const {
    if (!AnyAtLaunch()) return AffineInCoordinates(t_.dims, staged.coefficients, staged.offset);
    Index address = IndexConst(staged.offset);
    for (size_t d = 0; d < t_.dims.size(); ++d) {
      const Index x = IndexVar(kCoordinateVar + static_cast<int>(d), t_.dims[d]);
      const int64_t c = staged.coefficients[d];
      address = IndexAdd(IndexMul(x, IndexSize(c, ProductOfDims(c, static_cast<int>(d)))), address);
    }
    return address;
  }
  // The size of `value` as the product of the extents of dims other than `except`, the
  // largest such set; SymExpr::Constant(value) where none multiplies to it.
  SymExpr ProductOfDims(int64_t value, int except) const {
    const size_t n = t_.dims.size();
    int best = -1;
    SymExpr size = SymExpr::Constant(value);
    for (uint32_t set = 1; set < (1u << n); ++set) {
      if (set & (1u << except)) continue;
      int64_t product = 1;
      SymExpr product_size = SymExpr::Constant(1);
      int count = 0;
      for (size_t d = 0; d < n; ++d)
        if (set & (1u << d)) {
          product *= t_.dims[d];
          product_size = product_size * sizes_[d];
          ++count;
        }
      if (product == value && count > best) {
        best = count;
        size = product_size;
      }
    }
    return size;
  }

  // Each staged load: every vector of the thread's share read first (all in flight), then
  // written into the tile.
  void EmitLoadPhase() {
    const std::string in_name = Coordinate(Inner()), d_name = Coordinate(t_.across);
    for (size_t l = 0; l < t_.loads.size(); ++l) {
      const TileLayout& layout = plan_.layouts[l];
      const StagedLoad& staged = t_.loads[l];
      const ScalarValue& load = k_.values[staged.value];
      const int iterations = static_cast<int>(CeilDiv(layout.LoadVectors(), c_.threads));
      const int per_row = layout.tile_d / layout.load_vector;
      const std::string slot = fmt::format(
          "      const int q = threadIdx.x + it * {0}, row = q / {1}, column = q % {1} * {2};\n"
          "      const tf_index_t {3} = in0 + row, {4} = d0 + column;\n"
          "      if ({5}{3} < {6} && {4} < {7}) {{\n",
          c_.threads, per_row, layout.load_vector, in_name, d_name, layout.LoadVectors() % c_.threads ? fmt::format("q < {} && ", layout.LoadVectors()) : "",
          Dim(Inner()), Dim(t_.across));
      const char* type = StorageType(load.dtype);
      out_ += fmt::format("  {{  // v{} of b{} into s{}: {} elements a load\n    {} r[{}][{}];\n", staged.value, load.buffer, l, layout.load_vector, type,
                          iterations, layout.load_vector);
      out_ += fmt::format("#pragma unroll\n    for (int it = 0; it < {}; ++it) {{\n{}", iterations, slot);
      out_ += fmt::format("        tf_vload<{}>(b{} + ({}), r[it]);\n      }}\n    }}\n", layout.load_vector, load.buffer, Print(StagedAddress(staged)));
      out_ += fmt::format("#pragma unroll\n    for (int it = 0; it < {}; ++it) {{\n{}", iterations, slot);
      if (layout.shared_vector == layout.load_vector)
        out_ += fmt::format("        tf_vstore<{}>(s{} + row * {} + column, r[it]);\n", layout.load_vector, l, layout.pitch);
      else  // rows aligned to less than the load's vector: several narrower stores
        out_ += fmt::format("#pragma unroll\n        for (int h = 0; h < {0}; h += {1}) tf_vstore<{1}>(s{2} + row * {3} + column + h, "
                            "*reinterpret_cast<const {4}(*)[{1}]>(r[it] + h));\n",
                            layout.load_vector, layout.shared_vector, l, layout.pitch, type);
      out_ += "      }\n    }\n  }\n";
    }
  }

  // Each thread: `vector` consecutive outputs along the output's contiguous dim per step.
  void EmitStorePhase() {
    const int vec = c_.vector, lanes_in = plan_.layouts.front().lanes_in;
    const int store_vectors = plan_.tile_d * (plan_.tile_in / vec);
    const int iterations = static_cast<int>(CeilDiv(store_vectors, c_.threads));
    const std::string in_name = Coordinate(Inner()), d_name = Coordinate(t_.across);
    out_ += fmt::format("#pragma unroll\n  for (int it = 0; it < {}; ++it) {{\n", iterations);
    out_ += fmt::format("    const int q = threadIdx.x + it * {0}, column = q / {1} % {2}, row = (q / {3} * {1} + q % {1}) * {4};\n", c_.threads,
                        lanes_in, plan_.tile_d, lanes_in * plan_.tile_d, vec);
    out_ += fmt::format("    const tf_index_t {} = d0 + column, first = in0 + row;\n", d_name);
    out_ += fmt::format("    if ({}{} < {} && first < {}) {{\n", store_vectors % c_.threads ? fmt::format("q < {} && ", store_vectors) : "", d_name,
                        Dim(t_.across), Dim(Inner()));
    out_ += fmt::format("      const tf_index_t offset = {};  // of the vector's first output\n",
                        Print(FlatFromCoordinates(t_.dims, kCoordinateVar, &sizes_), Inner(), "first"));
    std::map<int, std::string> given;
    for (size_t l = 0; l < t_.loads.size(); ++l)
      given[t_.loads[l].value] = fmt::format("tf_cvt_{}(s{}[(row + j) * {} + column])", DTypeName(k_.values[t_.loads[l].value].dtype), l,
                                             plan_.layouts[l].pitch);
    for (size_t v = 0; v < k_.values.size(); ++v) {  // operands at the element's own offset: a vector each
      const ScalarValue& value = k_.values[v];
      AffineIndex a;
      if (value.kind != ScalarValue::Kind::kLoad || given.count(static_cast<int>(v)) || UsesValue(value.index) || !AsAffine(value.index, &a) ||
          a.c0 != 1 || a.c1 != 0 || a.offset % vec != 0)
        continue;
      out_ += fmt::format("      {} c{}[{}];\n      tf_vload<{}>(b{} + offset + {}, c{});\n", StorageType(value.dtype), v, vec, vec, value.buffer, a.offset, v);
      given[static_cast<int>(v)] = fmt::format("tf_cvt_{}(c{}[j])", DTypeName(value.dtype), v);
    }
    std::vector<int> roots;
    for (const KernelStore& st : k_.stores) {
      roots.push_back(st.value);
      out_ += "      " + VectorStore(st).Declaration() + "\n";
    }
    out_ += fmt::format("#pragma unroll\n      for (int j = 0; j < {}; ++j) {{\n", vec);
    out_ += fmt::format("        [[maybe_unused]] const tf_index_t {} = first + j;\n", in_name);
    out_ += CudaElementProgram(placed_, roots, given, names_, "        ");
    for (const KernelStore& st : k_.stores) out_ += "        " + VectorStore(st).Element(fmt::format("v{}", st.value)) + "\n";
    out_ += "      }\n";
    for (const KernelStore& st : k_.stores) out_ += VectorStore(st).Store(fmt::format("b{} + offset", st.buffer), "      ");
    out_ += "    }\n  }\n";
  }

  // Store `st`'s register array o<buffer> (half types convert two at a time on the store).
  CudaVectorStore VectorStore(const KernelStore& st) const {
    return CudaVectorStore(k_.buffers[st.buffer].dtype, fmt::format("o{}", st.buffer), c_.vector, /*literal_length=*/true);
  }

  const Kernel& k_;
  const TransposedTiling& t_;
  CudaKernelConfig c_;
  Kernel placed_;
  std::vector<SymExpr> sizes_;  // per dim: its size where printed over the symbols, else its value
  std::vector<std::string> names_;
  TilePlan plan_;
  std::string out_;
};

}  // namespace

StatusOr<CudaKernelSource> EmitTransposedKernel(const Kernel& kernel, const TransposedTiling& tiling, const CudaKernelConfig& config) {
  if (!tiling.tiled()) return InvalidArgument(fmt::format("{}: no tiled form ({})", kernel.name, tiling.why_not));
  return TransposedEmitter(kernel, tiling, config).Run();
}

}  // namespace tilefuse
