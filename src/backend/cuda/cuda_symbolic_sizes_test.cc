// Loop kernels of a model with symbolic dims print the sizes derived from them over launch
// parameters: the same kernel text, so the same compiled unit, at every binding that makes
// the same code decisions. Needs NVRTC for the compile check, no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "api/backend_setup.h"
#include "backend/cuda/cuda_compile_units.h"
#include "backend/cuda/cuda_program.h"
#include "backend/cuda/nvrtc_compiler.h"
#include "fusion/group_classifier.h"
#include "passes/pipeline.h"
#include "testing/symbolic_random_graph.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

// The graph `b` built, its input x's first two dims the symbols batch and seq at these values.
Graph BuiltOverBatchAndSeq(GraphBuilder& b, int64_t batch, int64_t seq) {
  StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().message();
  g->set_symbolic_inputs({{{"x", {"batch", "seq", ""}}}, {{"batch", batch}, {"seq", seq}}});
  return std::move(*g);
}

// x [batch, seq, 64] through a layer norm, GELU, a residual and a softmax over the 64
// features, plus a position's iota added along seq: the loop kernels of a transformer's
// non-product part. Bound at `batch`, `seq`.
Graph NormAndActivation(int64_t batch, int64_t seq) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {batch, seq, 64});
  Value scale = b.Parameter("scale", DType::kF32, {64});
  Value normed = b.LayerNorm(x, scale, Value{}, 2, 1e-5);
  Value positions = b.Cast(b.Iota({1, seq, 1}, 1, DType::kI64), DType::kF32);
  Value y = b.Add(b.Gelu(normed, false), b.Mul(x, b.BroadcastTo(positions, {batch, seq, 64})));
  b.Output(b.Softmax(y, 2), "y");
  return BuiltOverBatchAndSeq(b, batch, seq);
}

// x [batch, seq, 256] bf16 through a linear layer with a bias and GELU: a GEMM template kernel
// whose rows are batch · seq.
Graph Linear(int64_t batch, int64_t seq) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kBF16, {batch, seq, 256});
  Value w = b.Parameter("w", DType::kBF16, {256, 512});
  Value bias = b.Parameter("bias", DType::kBF16, {512});
  b.Output(b.Gelu(b.Add(b.MatMul(x, w), bias), false), "y");
  return BuiltOverBatchAndSeq(b, batch, seq);
}

// BERT-style self-attention over x [batch, seq, 256] bf16 (four heads of 64): the heads split
// by reshape and transpose, the scaled scores plus a padding mask's term computed once from
// mask [batch, seq] (unsqueezed to [batch, 1, 1, seq] first, as transformers does), softmax,
// P·V. The attention template's sizes: batch · 4 entries of seq × seq scores.
Graph SelfAttention(int64_t batch, int64_t seq) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kBF16, {batch, seq, 256});
  Value mask = b.Parameter("mask", DType::kBF16, {batch, seq});
  auto heads = [&](const char* name, std::vector<int64_t> perm) {
    Value w = b.Parameter(name, DType::kBF16, {256, 256});
    return b.Transpose(b.Reshape(b.MatMul(x, w), {batch, seq, 4, 64}), std::move(perm));
  };
  Value q = heads("wq", {0, 2, 1, 3}), k = heads("wk", {0, 2, 3, 1}), v = heads("wv", {0, 2, 1, 3});
  Value bias = b.Mul(b.Sub(b.Scalar(1, DType::kBF16), b.Unsqueeze(mask, {1, 2})), b.Scalar(-10000, DType::kBF16));
  Value logits = b.Add(b.Mul(b.MatMul(q, k), b.Scalar(0.125, DType::kBF16)), bias);
  b.Output(b.MatMul(b.Softmax(logits, 3), v), "y");
  StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().message();
  g->set_symbolic_inputs({{{"x", {"batch", "seq", ""}}, {"mask", {"batch", "seq"}}}, {{"batch", batch}, {"seq", seq}}});
  return std::move(*g);
}

// Causal self-attention over q, k, v [batch, 4, seq, 64] bf16: the mask key <= row from iotas
// (generators: recomputed in the kernel), -inf above the diagonal.
Graph CausalAttention(int64_t batch, int64_t seq) {
  GraphBuilder b;
  Value q = b.Parameter("q", DType::kBF16, {batch, 4, seq, 64});
  Value k = b.Parameter("k", DType::kBF16, {batch, 4, seq, 64});
  Value v = b.Parameter("v", DType::kBF16, {batch, 4, seq, 64});
  Value scores = b.Mul(b.MatMul(q, b.Transpose(k, {0, 1, 3, 2})), b.Scalar(0.125, DType::kBF16));
  Value above = b.Binary(OpCode::kGreater, b.Iota({seq, seq}, 1, DType::kI64), b.Iota({seq, seq}, 0, DType::kI64));
  Value logits = b.Where(above, b.Scalar(-INFINITY, DType::kBF16), scores);
  b.Output(b.MatMul(b.Softmax(logits, 3), v), "y");
  StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().message();
  const std::vector<std::string> dims = {"batch", "", "seq", ""};
  g->set_symbolic_inputs({{{"q", dims}, {"k", dims}, {"v", dims}}, {{"batch", batch}, {"seq", seq}}});
  return std::move(*g);
}

std::vector<CudaKernelSource> Kernels(Graph graph, const TemplateOverrides& overrides = {}) {
  StatusOr<Graph> passed = RunGraphPasses(std::move(graph), PassOptions{});
  EXPECT_TRUE(passed.ok()) << passed.status().message();
  CudaTarget target;
  target.gemm = GemmPath::kTemplate;
  target.overrides = overrides;
  StatusOr<CudaPlan> plan = PlanFusionForCuda(*passed, PlannerOptions{}, target);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  StatusOr<CudaProgram> program = BuildCudaProgram(*passed, plan->plan, FindInlinedGenerators(*passed), "", {}, target);
  EXPECT_TRUE(program.ok()) << program.status().message();
  std::vector<CudaKernelSource> sources;
  for (const CudaGroupProgram& g : program->groups)
    for (const CudaLaunchable* k : Launchables(g)) sources.push_back(k->source);
  return sources;
}

std::set<std::string> UnitSources(const std::vector<CudaKernelSource>& kernels) {
  std::set<std::string> units;
  for (const CudaCompileUnit& u : SplitIntoCompileUnits(kernels)) units.insert(u.source);
  return units;
}

TEST(CudaSymbolicSizesTest, LoopKernelsAreTheSameTextAtEveryBinding) {
  const std::vector<CudaKernelSource> first = Kernels(NormAndActivation(2, 24));
  ASSERT_FALSE(first.empty());
  for (const CudaKernelSource& k : first) {
    EXPECT_NE(k.function.find("const long long tf_sym"), std::string::npos) << k.function;
    // The binding's values travel as the launch's scalars, after the buffers.
    std::vector<int64_t> scalars;
    for (const LaunchArg& a : k.launch.args)
      if (a.kind == LaunchArg::Kind::kScalar) scalars.push_back(a.scalar);
    EXPECT_FALSE(scalars.empty()) << k.name;
    for (int64_t s : scalars) EXPECT_TRUE(s == 2 || s == 24) << k.name << ": " << s;
  }
  for (auto [batch, seq] : {std::pair<int64_t, int64_t>{3, 24}, {5, 40}, {16, 128}})
    EXPECT_EQ(UnitSources(Kernels(NormAndActivation(batch, seq))), UnitSources(first)) << batch << " x " << seq;
}

// Reductions along seq of x [batch, seq, 64]: a softmax over seq pooling x (a row re-read per
// pass, a thread per row), its max and the mean subtracted (column reductions, split over seq
// where the tiles alone leave the SMs idle). Their rows are seq long.
Graph SeqReductions(int64_t batch, int64_t seq) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {batch, seq, 64});
  b.Output(b.Reduce(OpCode::kReduceSum, b.Mul(b.Softmax(x, 1), x), {1}, true), "pooled");
  b.Output(b.Reduce(OpCode::kReduceMax, x, {1}, true), "peak");
  b.Output(b.Sub(x, b.Reduce(OpCode::kReduceMean, x, {1}, true)), "centered");
  return BuiltOverBatchAndSeq(b, batch, seq);
}

TEST(CudaSymbolicSizesTest, ReductionsAlongASymbolTakeTheRowLengthAtLaunch) {
  const std::vector<CudaKernelSource> first = Kernels(SeqReductions(16, 128));
  int columns = 0, rows = 0;
  for (const CudaKernelSource& k : first) {
    if (k.strategy.rfind("column", 0) == 0) {
      ++columns;
      EXPECT_NE(k.function.find("const tf_index_t kRows = (tf_sym1);"), std::string::npos) << k.function;
      EXPECT_NE(k.function.find("kSplits = (tf_index_t)gridDim.x / kTiles;"), std::string::npos) << k.function;
      EXPECT_EQ(k.function.find("128"), std::string::npos) << k.function;
    } else if (k.strategy.rfind("row", 0) == 0) {
      ++rows;
      EXPECT_NE(k.function.find("const int64_t kInner = (tf_sym1);"), std::string::npos) << k.function;
    }
  }
  EXPECT_EQ(columns, 3) << "the max, the mean and the pooled sum";
  EXPECT_EQ(rows, 1) << "the softmax's";
  // 16 x 128 splits the columns' rows over 2 blocks, 24 x 100 not at all, 9 x 333 over 5:
  // one text for all (the grid tells the splits).
  for (auto [batch, seq] : {std::pair<int64_t, int64_t>{24, 100}, {9, 333}, {3, 40}})
    EXPECT_EQ(UnitSources(Kernels(SeqReductions(batch, seq))), UnitSources(first)) << batch << " x " << seq;
  std::set<int64_t> grids;
  for (auto [batch, seq] : {std::pair<int64_t, int64_t>{16, 128}, {24, 100}, {9, 333}})
    for (const CudaKernelSource& k : Kernels(SeqReductions(batch, seq)))
      if (k.strategy.rfind("column", 0) == 0) grids.insert(k.launch.grid[0] / batch);
  EXPECT_EQ(grids, (std::set<int64_t>{1, 2, 5})) << "tiles of 64 outputs: batch tiles times the splits";
}

// A decode step's softmax over its keys in f32 (the attention split where the template does
// not take f32): x [batch, seq], each row held in registers. The row's length comes at launch,
// its chunk count stays in the text: lengths of one count and vector width share the kernel.
// x [batch, 2 heads, seq].
Graph SoftmaxOverSeq(int64_t batch, int64_t seq) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {batch, 2, seq});
  b.Output(b.Softmax(b.Mul(x, b.Scalar(0.125, DType::kF32)), 2), "y");
  StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().message();
  g->set_symbolic_inputs({{{"x", {"batch", "", "seq"}}}, {{"batch", batch}, {"seq", seq}}});
  return std::move(*g);
}

TEST(CudaSymbolicSizesTest, AHeldRowTakesItsLengthAtLaunch) {
  const std::vector<CudaKernelSource> first = Kernels(SoftmaxOverSeq(4, 201));
  ASSERT_EQ(first.size(), 1u);
  const CudaKernelSource& k = first.front();
  EXPECT_NE(k.strategy.find("row in registers"), std::string::npos) << k.strategy;
  EXPECT_NE(k.function.find("const int64_t kInner = (tf_sym1);"), std::string::npos) << k.function;
  EXPECT_NE(k.function.find("kChunks = 4"), std::string::npos) << k.function;
  EXPECT_NE(k.function.find("if (i1b < kInner)"), std::string::npos) << "every chunk guarded: " << k.function;
  EXPECT_EQ(k.function.find("201"), std::string::npos) << k.function;
  // 201, 203 and 255 keys: one chunk count (4 of 64 threads) and vector width (1); 128 keys, an
  // exact multiple there, is guarded too, so only its width (4) and count change its text.
  for (int64_t seq : {203, 255}) EXPECT_EQ(UnitSources(Kernels(SoftmaxOverSeq(4, seq))), UnitSources(first)) << seq;
  EXPECT_NE(UnitSources(Kernels(SoftmaxOverSeq(4, 128))), UnitSources(first));
}

// x [batch, seq, 64] transposed to [batch, 64, seq] through a ReLU: the tiled-transpose
// kernel, its tile along seq and along the 64 features.
Graph TransposedAlongSeq(int64_t batch, int64_t seq) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {batch, seq, 64});
  b.Output(b.Unary(OpCode::kRelu, b.Transpose(x, {0, 2, 1})), "y");
  return BuiltOverBatchAndSeq(b, batch, seq);
}

TEST(CudaSymbolicSizesTest, TransposedTilesTakeTheSequenceAtLaunch) {
  const std::vector<CudaKernelSource> first = Kernels(TransposedAlongSeq(3, 40));
  ASSERT_EQ(first.size(), 1u);
  const CudaKernelSource& k = first.front();
  EXPECT_NE(k.strategy.find("pointwise transposed 64x64"), std::string::npos) << k.strategy << " (a sequence of 40 still tiles by 64)";
  EXPECT_NE(k.function.find("tiles_in = ((tf_sym1) + 64 - 1) / 64"), std::string::npos) << k.function;
  EXPECT_NE(k.function.find("x0 * (tf_sym1 * 64)"), std::string::npos) << "the load's stride along the batch: " << k.function;
  EXPECT_NE(k.function.find("* (tf_sym1) + first)"), std::string::npos) << "the store's offset: " << k.function;
  EXPECT_EQ(k.function.find("40"), std::string::npos) << k.function;
  for (auto [batch, seq] : {std::pair<int64_t, int64_t>{4, 56}, {2, 300}, {7, 1000}})
    EXPECT_EQ(UnitSources(Kernels(TransposedAlongSeq(batch, seq))), UnitSources(first)) << batch << " x " << seq;
  // The grid covers the binding's tiles: 1000 rows of seq in 16 tiles of 64, one along the features.
  EXPECT_EQ(Kernels(TransposedAlongSeq(7, 1000)).front().launch.grid[0], 7 * 16);
}

// [past; x] along seq, scaled by its max over the whole length, and x's part sliced back:
// the slice starts at the past length, a size in the symbols, so it is read there at launch
// and the text does not change with past.
Graph PastThenSlice(int64_t past, int64_t seq) {
  GraphBuilder b;
  Value cache = b.Parameter("cache", DType::kF32, {2, past, 32});
  Value x = b.Parameter("x", DType::kF32, {2, seq, 32});
  Value joined = b.Concat({cache, x}, 1);
  Value scaled = b.Mul(joined, b.Unary(OpCode::kTanh, joined));
  b.Output(b.Slice(scaled, {past}, {past + seq}, {1}, {}), "y");
  StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().message();
  g->set_symbolic_inputs({{{"cache", {"", "past", ""}}, {"x", {"", "seq", ""}}}, {{"past", past}, {"seq", seq}}});
  return std::move(*g);
}

TEST(CudaSymbolicSizesTest, ASliceAfterThePastStartsAtThePastLengthAtLaunch) {
  // (A seq of 1 is another text, a dim of 1 reads no index; and a seq of 2, the batch's size,
  // is not told apart from it.)
  const std::set<std::string> first = UnitSources(Kernels(PastThenSlice(29, 3)));
  for (auto [past, seq] : {std::pair<int64_t, int64_t>{100, 4}, {7, 5}, {9, 16}})
    EXPECT_EQ(UnitSources(Kernels(PastThenSlice(past, seq))), first) << past << " + " << seq;
  for (const std::string& unit : first) EXPECT_EQ(unit.find("+ 29"), std::string::npos) << unit;
}

TEST(CudaSymbolicSizesTest, WithoutSymbolsTheSizesAreLiterals) {
  Graph bound = NormAndActivation(2, 24);
  bound.set_symbolic_inputs({});
  const std::vector<CudaKernelSource> kernels = Kernels(std::move(bound));
  ASSERT_FALSE(kernels.empty());
  for (const CudaKernelSource& k : kernels) EXPECT_EQ(k.function.find("tf_sym"), std::string::npos) << k.function;
  // ... and the kernels differ from another binding's: what the symbols save.
  Graph other = NormAndActivation(3, 24);
  other.set_symbolic_inputs({});
  EXPECT_NE(UnitSources(Kernels(std::move(other))), UnitSources(kernels));
}

// The attention template kernel among `kernels`.
CudaKernelSource AttentionKernelOf(const std::vector<CudaKernelSource>& kernels) {
  for (const CudaKernelSource& k : kernels)
    if (k.function.find("AttentionFwdSm90") != std::string::npos) return k;
  ADD_FAILURE() << "no attention template kernel";
  return CudaKernelSource{};
}

// The GEMM template takes its rows at launch (maps.rows) where the symbols give them: the same
// text for row counts its rule gives the same form (here 128x128 tiles, cooperative consumers).
TEST(CudaSymbolicSizesTest, TheGemmTemplateTakesItsRowsAtLaunch) {
  TemplateOverrides fixed;
  fixed.gemm_block_n = 128;
  fixed.gemm_pingpong = false;
  fixed.gemm_overlap_epilogue = false;
  fixed.gemm_splits = 1;
  fixed.gemm_stream_k = false;
  fixed.gemm_cluster_m = 1;
  const std::vector<CudaKernelSource> first = Kernels(Linear(4, 512), fixed);
  ASSERT_EQ(first.size(), 1u);
  const CudaKernelSource& k = first.front();
  EXPECT_NE(k.function.find("kRows = 0, kN = 512, kK = 256"), std::string::npos) << k.function;
  EXPECT_NE(k.function.find("kRowsAtLaunch = 1"), std::string::npos) << k.function;
  EXPECT_NE(k.function.find("maps.rows = (int)(tf_sym0 * tf_sym1);"), std::string::npos) << k.function;
  std::vector<int64_t> scalars;
  for (const LaunchArg& a : k.launch.args)
    if (a.kind == LaunchArg::Kind::kScalar) scalars.push_back(a.scalar);
  EXPECT_EQ(scalars, (std::vector<int64_t>{4, 512}));
  EXPECT_NE(k.function.find("kWholeRowTiles = 1"), std::string::npos) << "2048 rows: whole 128-row tiles, no edge checked";
  for (auto [batch, seq] : {std::pair<int64_t, int64_t>{8, 512}, {5, 256}, {16, 2048}})
    EXPECT_EQ(UnitSources(Kernels(Linear(batch, seq), fixed)), UnitSources(first)) << batch << " x " << seq;
  // Rows that end in a partial tile: a kernel checking the edges, the same for every such count.
  const std::set<std::string> ragged = UnitSources(Kernels(Linear(3, 1000), fixed));
  EXPECT_NE(ragged, UnitSources(first));
  EXPECT_NE(ragged.begin()->find("kWholeRowTiles = 0"), std::string::npos);
  EXPECT_EQ(UnitSources(Kernels(Linear(7, 333), fixed)), ragged);
  // Stream-K splits the last round of tiles for one tile count: its rows stay in the text.
  TemplateOverrides streamed = fixed;
  streamed.gemm_stream_k = true;
  for (const CudaKernelSource& s : Kernels(Linear(3, 1000), streamed))
    if (s.function.find("kStreamTiles = 0,") == std::string::npos) {
      EXPECT_NE(s.function.find("kRows = 3000,"), std::string::npos) << s.function;
      EXPECT_NE(s.function.find("kRowsAtLaunch = 0"), std::string::npos);
    }
}

// The attention template takes the batch and the sequence length at launch, and the padding
// mask's logits program reads the mask over them: one text for every length whose last key
// block is partial, another for whole key blocks.
TEST(CudaSymbolicSizesTest, TheAttentionTemplateTakesItsLengthsAtLaunch) {
  const CudaKernelSource k = AttentionKernelOf(Kernels(SelfAttention(2, 100)));
  EXPECT_NE(k.function.find("tf::AttentionLengths{(int)(tf_sym1), (int)(tf_sym1), 0, 0}"), std::string::npos) << k.function;
  EXPECT_NE(k.function.find("const int o0 = batch / 4 % (tf_sym0);"), std::string::npos) << k.function;
  EXPECT_NE(k.function.find("kWholeKeyBlocks = 0"), std::string::npos) << k.function;
  EXPECT_NE(k.function.find("* (tf_sym1) + key)]"), std::string::npos) << "the mask read at [batch][key]: " << k.function;
  EXPECT_EQ(k.function.find("100"), std::string::npos) << k.function;
  std::vector<int64_t> scalars;
  for (const LaunchArg& a : k.launch.args)
    if (a.kind == LaunchArg::Kind::kScalar) scalars.push_back(a.scalar);
  EXPECT_EQ(scalars, (std::vector<int64_t>{2, 100}));
  EXPECT_EQ(k.launch.grid[0], 2 * 4 * 1) << "one 128-row query block per head";
  for (auto [batch, seq] : {std::pair<int64_t, int64_t>{3, 333}, {4, 1000}, {8, 77}})
    EXPECT_EQ(AttentionKernelOf(Kernels(SelfAttention(batch, seq))).function, k.function) << batch << " x " << seq;
  const CudaKernelSource whole = AttentionKernelOf(Kernels(SelfAttention(4, 256)));
  EXPECT_NE(whole.function.find("kWholeKeyBlocks = 1"), std::string::npos) << whole.function;
  EXPECT_EQ(AttentionKernelOf(Kernels(SelfAttention(2, 1024))).function, whole.function);
  // Without symbols the sizes are literals.
  Graph fixed = SelfAttention(2, 100);
  fixed.set_symbolic_inputs({});
  EXPECT_NE(AttentionKernelOf(Kernels(std::move(fixed))).function.find("tf::AttentionLengths{(int)100, (int)100, 0, 0}"), std::string::npos);
}

// Causal attention skips the key blocks above the diagonal: with the lengths at launch, its
// key-block tables are a parameter of this binding (a power of two of query blocks in the text),
// so lengths with as many query blocks' capacity share the kernel.
TEST(CudaSymbolicSizesTest, ACausalMasksKeyBlockTablesArePassedAtLaunch) {
  TemplateOverrides one_tile;
  one_tile.attention_tiles = 1;  // (the rule's tiles a CTA follow the CTA count)
  const CudaKernelSource k = AttentionKernelOf(Kernels(CausalAttention(2, 1000), one_tile));
  EXPECT_NE(k.function.find("const __grid_constant__ tf::AttentionTableParameter<16> tables"), std::string::npos) << k.function;
  EXPECT_NE(k.function.find("kSkipsKeyBlocks = 1"), std::string::npos) << k.function;
  EXPECT_NE(k.function.find("tables.Tables()"), std::string::npos) << k.function;
  EXPECT_EQ(k.function.find("_key_block[]"), std::string::npos) << "no tables in the text: " << k.function;
  const LaunchArg* tables = nullptr;
  for (const LaunchArg& a : k.launch.args)
    if (a.kind == LaunchArg::Kind::kBytes) tables = &a;
  ASSERT_NE(tables, nullptr);
  ASSERT_EQ(tables->bytes.size(), 5u * 16 * 2);
  std::vector<int16_t> t(5 * 16);
  std::memcpy(t.data(), tables->bytes.data(), tables->bytes.size());
  // 1000 rows: 8 query blocks of 128; block m reads key blocks 0..m, the heaviest first.
  for (int m = 0; m < 8; ++m) {
    EXPECT_EQ(t[16 + m], 0) << m;      // first key block
    EXPECT_EQ(t[32 + m], m) << m;      // last key block
    EXPECT_EQ(t[m], 7 - m) << m;       // the order: most key blocks first
  }
  EXPECT_EQ(t[8], -1) << "past the query blocks: none";
  for (int64_t seq : {1500, 1100, 2047})
    EXPECT_EQ(AttentionKernelOf(Kernels(CausalAttention(2, seq), one_tile)).function, k.function) << seq;
  EXPECT_NE(AttentionKernelOf(Kernels(CausalAttention(2, 2049), one_tile)).function.find("AttentionTableParameter<32>"), std::string::npos)
      << "17 query blocks: a capacity of 32";
}

TEST(CudaSymbolicSizesTest, SymbolicKernelsCompileForHopper) {
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create((std::filesystem::temp_directory_path() / "tilefuse_test_cache").string());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available, CUDA kernels not compiled: " << nvrtc.status().ToString();
  std::vector<CudaKernelSource> kernels = Kernels(NormAndActivation(2, 24));
  for (const CudaKernelSource& k : Kernels(Linear(4, 512))) kernels.push_back(k);
  for (const CudaKernelSource& k : Kernels(SeqReductions(16, 128))) kernels.push_back(k);
  for (const CudaKernelSource& k : Kernels(TransposedAlongSeq(3, 40))) kernels.push_back(k);
  // Each model's kernels are their own program (their names repeat across models).
  for (const std::vector<CudaKernelSource>& program :
       {kernels, Kernels(SelfAttention(3, 333)), Kernels(CausalAttention(2, 1000)), Kernels(SoftmaxOverSeq(4, 201))}) {
    StatusOr<CudaCubins> cubins = CompileUnits(*nvrtc, SplitIntoCompileUnits(program), "sm_90a");
    ASSERT_TRUE(cubins.ok()) << cubins.status().ToString();
    // No spills, no serialized wgmma, as every generated kernel.
    const std::string log = cubins->PtxasLog();
    for (const PtxasKernelInfo& k : ParsePtxasLog(log)) EXPECT_EQ(k.spill_store_bytes + k.spill_load_bytes, 0) << k.line;
    EXPECT_EQ(log.find("are serialized"), std::string::npos) << log;
  }
}

// The differential fuzzer's graphs over symbolic dims (testing/symbolic_random_graph.h), at
// each of their bindings: every distinct kernel compiles for Hopper. (The fuzzer runs them
// against the reference on a GPU: `tilefuse fuzz --symbolic --backend cuda`.)
TEST(CudaSymbolicSizesTest, SymbolicFuzzGraphsCompileForHopper) {
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create((std::filesystem::temp_directory_path() / "tilefuse_test_cache").string());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available, CUDA kernels not compiled: " << nvrtc.status().ToString();
  std::set<std::string> compiled;
  int units = 0;
  for (uint64_t seed = 0; seed < 6; ++seed) {
    for (const SymbolicBinding& at : SymbolicBindingsFor(seed)) {
      StatusOr<Graph> graph = GenerateSymbolicGraph(seed, at, DType::kF32);
      ASSERT_TRUE(graph.ok()) << graph.status().ToString();
      std::vector<CudaCompileUnit> fresh;
      for (CudaCompileUnit& u : SplitIntoCompileUnits(Kernels(std::move(*graph)))) {
        ++units;
        if (compiled.insert(u.source).second) fresh.push_back(std::move(u));
      }
      if (fresh.empty()) continue;
      StatusOr<CudaCubins> cubins = CompileUnits(*nvrtc, fresh, "sm_90a");
      ASSERT_TRUE(cubins.ok()) << "seed " << seed << " at " << at.ToString() << ": " << cubins.status().ToString();
    }
  }
  std::printf("symbolic fuzz graphs: %d units at 18 bindings, %zu distinct texts compiled\n", units, compiled.size());
  EXPECT_LT(compiled.size(), static_cast<size_t>(units)) << "no unit's text was the same at two bindings";
}

}  // namespace
}  // namespace tilefuse
