// The attention template with several query blocks per CTA (CudaAttentionConfig::tiles) on a
// GPU against the f64 reference, outputs poisoned first: causal masks whose query blocks pair
// heavy with light (an odd count leaves a CTA one block), a mask under which some rows see no
// key, and full attention whose last CTA has fewer blocks than the others. The rule takes
// several blocks per CTA only at sizes far beyond what the reference can check, so the tests
// ask for them. Needs a GPU; skipped without one, and run by scripts/gpu-check.sh.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "backend/cuda/cuda_driver.h"
#include "backend/cuda/cuda_executable.h"
#include "driver/driver.h"
#include "testing/random_inputs.h"
#include "testing/reference_check.h"

namespace tilefuse {
namespace {

struct TilesCase {
  const char* model;  // under tests/attention
  int tiles;
  int q_slots = 0;  // Q tiles in shared memory; 0: the rule (two where they fit)
};

class CudaAttentionTilesTest : public testing::TestWithParam<TilesCase> {};

TEST_P(CudaAttentionTilesTest, MatchesTheReference) {
  auto device = CudaDevice::Get();
  if (!device.ok()) GTEST_SKIP() << "no GPU: " << device.status().ToString() << "; the attention template's tiles not run";
  const TilesCase& c = GetParam();
  auto graph = ImportAndPass(fmt::format("{}/tests/attention/{}.onnxtxt", TILEFUSE_SOURCE_DIR, c.model));
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  CudaCompileOptions options;
  options.poison_outputs = true;
  options.overrides.attention_tiles = c.tiles;
  options.overrides.attention_q_slots = c.q_slots;
  auto compiled = CompileForCuda(*graph, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  EXPECT_NE((*compiled)->source().find(fmt::format("kTiles = {}, kQSlots = ", c.tiles)), std::string::npos)
      << "the attention template did not take " << c.tiles << " query blocks per CTA";
  if (c.q_slots)
    EXPECT_NE((*compiled)->source().find(fmt::format("kQSlots = {} }};", c.q_slots)), std::string::npos)
        << "the attention template did not take " << c.q_slots << " Q tiles";
  std::vector<Tensor> inputs = RandomInputs(*graph, 900);
  ExpectMatchesReference(*graph, inputs, (*compiled)->Run(inputs));
}

// 300 causal tokens: three query blocks (pairs 2 + 0, then 1 alone); 1100 tokens under a band
// mask: nine blocks whose key ranges and interiors differ; 200 tokens, full: two blocks per
// head, so four per CTA leaves half of each CTA's slots empty. Several blocks per CTA take two
// Q tiles by rule: one is run too.
INSTANTIATE_TEST_SUITE_P(Attention, CudaAttentionTilesTest,
                         testing::Values(TilesCase{"attention_causal_d128_bf16", 2}, TilesCase{"attention_causal_d128_bf16", 4},
                                         TilesCase{"attention_rows_masked_everywhere_bf16", 2},
                                         TilesCase{"attention_rows_masked_everywhere_bf16", 4}, TilesCase{"attention_ragged_d64_bf16", 2},
                                         TilesCase{"attention_ragged_d64_bf16", 4}, TilesCase{"attention_causal_d128_bf16", 4, 1},
                                         TilesCase{"attention_ragged_d64_bf16", 4, 1}),
                         [](const testing::TestParamInfo<TilesCase>& info) {
                           return std::string(info.param.model) + "_tiles" + std::to_string(info.param.tiles) +
                                  (info.param.q_slots ? "_q" + std::to_string(info.param.q_slots) : "");
                         });

}  // namespace
}  // namespace tilefuse
