#include "codegen/cuda/cuda_skinny_chain_emitter.h"

#include <fmt/format.h>

#include "codegen/cuda/cuda_gemm_config.h"
#include "codegen/cuda/cuda_gemm_emitter.h"
#include "codegen/cuda/cuda_scalar_program.h"
#include "codegen/cuda/cuda_skinny_gemm_emitter.h"
#include "codegen/emit_util.h"
#include "codegen/index_expr.h"
#include "codegen/launch_spec.h"

namespace tilefuse {

namespace {

using gemm_layout::kBlockK;
using gemm_layout::KSteps;
using gemm_layout::kSharedLimit;

constexpr int kPaddedRows = 16;     // A's rows as wgmma's N side: one row to 16
constexpr int64_t kMaxTiles2 = 12;  // N2's tiles: 12 × 8 accumulators a thread

// The skeleton's shared memory: the skinny skeleton's with every K step of W1 a CTA takes a
// stage (and its barriers, a flag each for two consumers and their `gathered` barriers), then
// W2's tiles, h's tile and a barrier, each region 1024-byte aligned, then the pair's exchange
// (at most 8 sums a thread: 16 padded rows over 128 threads).
int64_t ChainSharedBytes(const GemmTemplateKernel& first, const GemmTemplateKernel& second, bool pair) {
  const int64_t ranks = pair ? 2 : 1, stages = KSteps(first) / ranks;
  const int64_t skinny = 1024 + stages * (64 + kPaddedRows) * kBlockK * 2 + 2 * stages * 8 + 2 * 4 + 2 * 8;
  return skinny + 1024 + second.n / 64 / ranks * 64 * kBlockK * 2 + kPaddedRows * kBlockK * 2 + 8 + (pair ? kPaddedRows / 2 * 128 * 4 : 0);
}

// Whether the pair form takes the chain: K1's steps and N2's tiles halve evenly.
bool PairFits(const GemmTemplateKernel& first, const GemmTemplateKernel& second) {
  return KSteps(first) % 2 == 0 && second.n % 128 == 0;
}

// The value `first`'s epilogue stores at the product's position (row·N + col), its one store.
bool StoresAtTheProduct(const GemmTemplateKernel& first) {
  if (first.epilogue.stores.size() != 1) return false;
  AffineIndex index;
  return AsAffine(first.epilogue.stores[0].index, &index) && index.c0 == first.n && index.c1 == 1 && index.offset == 0;
}

}  // namespace

Status SkinnyChainFits(const GemmTemplateKernel& first, const GemmTemplateKernel& second) {
  RETURN_IF_ERROR(SkinnyGemmFits(first));
  RETURN_IF_ERROR(SkinnyGemmFits(second));
  if (first.rows != second.rows || first.rows > kPaddedRows) return Unimplemented("the chain takes two products of the same rows, at most 16");
  if (first.dtype != second.dtype || first.operand_dtype != first.dtype || second.operand_dtype != second.dtype)
    return Unimplemented("the chain takes two products of one 16-bit type");
  if (!first.b_read_only || !second.b_read_only) return Unimplemented("the chain loads both weights before the kernel ahead ends: constants or inputs only");
  if (first.n % 64 != 0 || second.k != first.n) return Unimplemented("the chain's first N is the second's K, in whole tiles of 64");
  if (second.n % 64 != 0 || second.n / 64 > kMaxTiles2) return Unimplemented("the chain's second N: 64 to 768 columns in whole tiles");
  if (!first.n_parts.empty() || !second.n_parts.empty() || !first.gate.empty() || !second.gate.empty() || first.partner != 0 ||
      second.partner != 0 || first.store_product || second.store_product || first.output_in_registers || second.layer_norm ||
      first.b_rows || first.b_k_rows || second.b_rows || second.b_k_rows)
    return Unimplemented("the chain takes plain products: no part, gate, partner column, stored product or padded B; the second's A not normed");
  if (!StoresAtTheProduct(first) || first.outputs.size() != 1)
    return Unimplemented("the chain's first epilogue stores one value, at the product's position");
  const int h = first.epilogue.buffers[static_cast<size_t>(first.epilogue.stores[0].buffer)].node;
  if (second.a != h) return Unimplemented("the chain's second product reads the first's epilogue as its A");
  for (const ScalarValue& v : second.epilogue.values)
    if (v.kind == ScalarValue::Kind::kLoad && second.epilogue.buffers[static_cast<size_t>(v.buffer)].node == h)
      return Unimplemented("the chain's second epilogue reads the first's output, which is never stored");
  const bool pair = PairFits(first, second);
  if (ChainSharedBytes(first, second, pair) > kSharedLimit)
    return Unimplemented(fmt::format("the chain holds both weights' tiles: {} bytes of shared memory a CTA (the limit is {})",
                                     ChainSharedBytes(first, second, pair), kSharedLimit));
  return Status::Ok();
}

std::vector<nlohmann::json> SkinnyChainForms(const GemmTemplateKernel& first, const GemmTemplateKernel& second) {
  std::vector<nlohmann::json> forms;
  if (PairFits(first, second)) forms.push_back({{"pair", true}});
  if (ChainSharedBytes(first, second, false) <= kSharedLimit) forms.push_back({{"pair", false}});
  return forms;
}

StatusOr<CudaKernelSource> EmitCudaSkinnyChain(const GemmTemplateKernel& first, const GemmTemplateKernel& second, int sm_count,
                                               const nlohmann::json& form) {
  RETURN_IF_ERROR(SkinnyChainFits(first, second));
  for (const auto& [key, value] : form.items())
    if (key != "pair" || !value.is_boolean()) return InvalidArgument(fmt::format("{}: the skinny chain's form takes \"pair\" (true or false) only", first.name));
  const bool pair = form.value("pair", PairFits(first, second));
  if (pair && !PairFits(first, second)) return Unimplemented("the chain's pair halves K1's steps and N2's tiles: they do not halve evenly");
  if (ChainSharedBytes(first, second, pair) > kSharedLimit)
    return Unimplemented(fmt::format("the chain's {} form needs {} bytes of shared memory a CTA (the limit is {})", pair ? "pair" : "whole",
                                     ChainSharedBytes(first, second, pair), kSharedLimit));
  const int64_t ranks = pair ? 2 : 1, steps = KSteps(first) / ranks, blocks = first.n / 64, ctas = blocks * ranks;
  // Every CTA waits for every other at the grid barrier: all resident at once, one an SM (a pair
  // in one GPC's SMs).
  const int64_t room = pair ? SkinnyClusterCapacity(sm_count, 2) : sm_count;
  if (ctas > room) return Unimplemented(fmt::format("the chain's {} CTAs wait for each other: more than the {} SMs can hold", ctas, room));
  CudaKernelSource s;
  s.name = first.name;
  s.threads = 256;
  s.includes = {"gemm_skinny_chain_sm90.cuh"};
  s.work_blocks = ctas;
  if (pair) s.launch.cluster = {2, 1, 1};
  s.strategy = fmt::format(
      "skinny chain template: {} rows, a product of {} by {} then its output by {} x {} in one kernel, {} CTAs of 64 columns{}, every "
      "weight tile loaded before the grid ahead ends, the second's partials summed after a grid-wide barrier",
      first.rows, first.k, first.n, second.k, second.n, ctas, pair ? " in pairs, each half of K1 and of N2" : "");
  s.launch.args.push_back({LaunchArg::Kind::kTensorMap, first.a, GemmMatrixMap(first.a, first.dtype, 1, first.rows, first.k, kPaddedRows, kBlockK), 0});
  for (const GemmTemplateKernel* g : {&first, &second}) {
    const TensorMapArg map = SkinnyWeightMap(*g);
    s.launch.args.push_back({LaunchArg::Kind::kTensorMap, map.node, map, 0});
  }
  std::string parameters =
      "const __grid_constant__ tf::TensorMap map_a, const __grid_constant__ tf::TensorMap map_b, const __grid_constant__ tf::TensorMap map_b2";
  std::string buffers1, buffers2;
  // The first product's output is handed over in shared memory: its buffer is not passed.
  GemmTemplateKernel handed_over = first;
  handed_over.output_in_registers = true;
  parameters += GemmEpilogueParameters(handed_over, s, buffers1, "e1_");
  parameters += GemmEpilogueParameters(second, s, buffers2, "e2_");
  const std::string norm = SkinnyNormArguments(first, s, parameters);
  parameters += ", unsigned* __restrict__ counters, float* __restrict__ partials";
  s.launch.args.push_back({LaunchArg::Kind::kScratch, -1, {}, 0});
  s.launch.args.push_back({LaunchArg::Kind::kScratch, -1, {}, kScratchCounterBytes});
  std::string out = fmt::format("extern \"C\" __global__ void __launch_bounds__(256, 1) {}({}) {{\n", first.name, parameters);
  out += fmt::format(
      "  struct Config {{\n    using Element = {};\n    using Index = {};\n"
      "    enum : int {{ kRows = {}, kN = {}, kK = {}, kMP = {}, kBN = 64, kStages = {}, kSplits = 1, kSplitSteps = {}, kBKMajor = {} }};\n"
      "    enum : int {{ kBBeforeWait = 1, kNormA = {}, kSplitsInCluster = 0, kPrefetchEpilogue = 0, kN2 = {}, kB2KMajor = {}, kPair = {} }};\n"
      "  }};\n",
      TileElementType(first.dtype), GemmIndexType(first)[0] == 'l' ? GemmIndexType(first) : GemmIndexType(second),
      first.rows, first.n, first.k, kPaddedRows, steps, KSteps(first), first.b_k_major >= 0 ? 1 : 0,
      !first.layer_norm ? 0 : first.layer_norm->rms ? 2 : 1, second.n, second.b_k_major >= 0 ? 1 : 0, pair ? 1 : 0);
  out += GemmEpilogueStruct(handed_over, /*staged=*/0, -1, -1, "Epilogue1");
  out += GemmEpilogueStruct(second, -1, -1, -1, "Epilogue2", /*with_prefetch=*/true);
  out += fmt::format("  tf::GemmSkinnyChainSm90<Config>(map_a, map_b, map_b2, Epilogue1{{{}}}, Epilogue2{{{}}}, counters, partials{});\n}}\n",
                     buffers1, buffers2, norm);
  FinishTemplateSource(s, std::move(out), ChainSharedBytes(first, second, pair), /*awaits_in_skeleton=*/true);
  s.launch.scratch_bytes = kScratchCounterBytes + blocks * first.rows * second.n * 4;
  return s;
}

}  // namespace tilefuse
