// The compiled-model cache: a second compile of a graph with the same options skips the passes
// and the planning and runs as the first did; other options, or other constants, miss; a
// damaged entry is a miss, never a wrong model.
#include "api/model_cache.h"

#include <stdlib.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "api/model_inputs.h"
#include "fusion/plan_serialization.h"
#include "fusion/planner.h"
#include "ir/graph_serialization.h"
#include "reference/interpreter.h"
#include "support/kernel_cache.h"
#include "testing/tensor_compare.h"
#include "tilefuse/tilefuse.h"

namespace tilefuse {
namespace {

namespace fs = std::filesystem;

std::string Example(const std::string& name) { return std::string(TILEFUSE_SOURCE_DIR) + "/examples/" + name; }

class ModelCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tilefuse-model-cache-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    options_.backend = "cpu";
    options_.cache_dir = pattern;
  }
  void TearDown() override { fs::remove_all(options_.cache_dir); }

  // Compiles the example, runs it on fresh inputs against the reference interpreter, and says
  // whether the compiled-model cache answered.
  bool CompileAndCheck(const std::string& example, const ModelOptions& options) {
    StatusOr<ImportedModel> imported = LoadModel(Example(example));
    EXPECT_TRUE(imported.ok());
    StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromGraph(imported->graph, options);
    EXPECT_TRUE(model.ok()) << model.status().ToString();
    if (!model.ok()) return false;
    StatusOr<std::vector<Tensor>> inputs = MakeRandomInputs(imported->graph, 11);
    StatusOr<std::vector<Tensor>> actual = (*model)->Run(*inputs);
    StatusOr<std::vector<Tensor>> expected = RunReference(imported->graph, *inputs);
    EXPECT_TRUE(actual.ok() && expected.ok());
    for (size_t i = 0; actual.ok() && i < actual->size(); ++i) {
      Comparison c = CompareWithReference((*actual)[i], (*expected)[i]);
      EXPECT_TRUE(c.pass) << c.reason;
    }
    bool hit = false, passes = false;
    for (const auto& [stage, ms] : (*model)->compile_stages_ms()) {
      hit |= stage.starts_with("compiled-model cache");
      passes |= stage.starts_with("graph passes");
    }
    EXPECT_NE(hit, passes) << "a compile either reuses the passes and the plan or runs them";
    return hit;
  }

  std::vector<fs::path> Entries() const {
    std::vector<fs::path> out;
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(options_.cache_dir))
      if (e.is_regular_file() && e.path().filename() == "content.model") out.push_back(e.path());
    return out;
  }

  ModelOptions options_;
};

TEST_F(ModelCacheTest, ASecondCompileReusesThePassesAndThePlan) {
  EXPECT_FALSE(CompileAndCheck("layernorm_manual.onnxtxt", options_));
  EXPECT_EQ(Entries().size(), 1u);
  EXPECT_TRUE(CompileAndCheck("layernorm_manual.onnxtxt", options_));
  EXPECT_FALSE(CompileAndCheck("softmax_manual.onnxtxt", options_));  // another graph
  ModelOptions unfused = options_;
  unfused.fuse = false;
  EXPECT_FALSE(CompileAndCheck("layernorm_manual.onnxtxt", unfused));  // other options
  EXPECT_TRUE(CompileAndCheck("layernorm_manual.onnxtxt", unfused));
}

TEST_F(ModelCacheTest, OtherConstantsAreAnotherGraph) {
  StatusOr<ImportedModel> imported = LoadModel(Example("layernorm_manual.onnxtxt"));
  ASSERT_TRUE(imported.ok());
  std::optional<CompiledModelKey> key = KeyOfCompile(imported->graph, options_, "");
  ASSERT_TRUE(key);
  // The same graph with one constant's bytes changed.
  Graph changed;
  bool done = false;
  for (Node n : imported->graph.nodes()) {
    if (!done && n.attrs.value && n.attrs.value->num_bytes() > 0) {
      Tensor copy = *n.attrs.value;
      Tensor other = Tensor::Uninitialized(copy.dtype(), copy.shape());
      std::copy(copy.data(), copy.data() + copy.num_bytes(), other.data());
      other.data()[0] ^= std::byte{1};
      n.attrs.value = std::make_shared<const Tensor>(std::move(other));
      done = true;
    }
    changed.AddNode(std::move(n));
  }
  for (const Graph::Output& o : imported->graph.outputs()) changed.AddOutput(o.node, o.name);
  ASSERT_TRUE(done);
  std::optional<CompiledModelKey> other = KeyOfCompile(changed, options_, "");
  ASSERT_TRUE(other);
  EXPECT_NE(key->key, other->key);
  ModelOptions tuned = options_;
  tuned.tune = true;
  EXPECT_FALSE(KeyOfCompile(imported->graph, tuned, "")) << "a tuned compile measures: not cached";
  // A plan for one GPU is not another's (the cost model and the tiles follow its SMs).
  EXPECT_NE(KeyOfCompile(imported->graph, options_, "NVIDIA H100 80GB HBM3, 132 SMs")->key,
            KeyOfCompile(imported->graph, options_, "NVIDIA H200, 132 SMs")->key);
}

TEST_F(ModelCacheTest, AnEntryKeepsWhatTheBackendSaidOfItsPlan) {
  StatusOr<ImportedModel> imported = LoadModel(Example("softmax_manual.onnxtxt"));
  ASSERT_TRUE(imported.ok());
  std::optional<CompiledModelKey> key = KeyOfCompile(imported->graph, options_, "");
  ASSERT_TRUE(key);
  StatusOr<FusionPlan> plan = PlanFusion(imported->graph, PlannerOptions{});
  ASSERT_TRUE(plan.ok());
  plan->backend_notes = {"attention at %7 split into its parts: head dims 96 and 96"};
  StoreCompiledModel(*key, imported->graph, "cuda", *plan);
  std::optional<CachedCompile> cached = LoadCompiledModel(*key);
  ASSERT_TRUE(cached);
  EXPECT_EQ(cached->backend, "cuda");
  EXPECT_EQ(cached->plan.backend_notes, plan->backend_notes);
  EXPECT_EQ(cached->plan.groups.size(), plan->groups.size());
}

TEST_F(ModelCacheTest, ADamagedEntryIsAMissAndTheModelIsCompiledAgain) {
  EXPECT_FALSE(CompileAndCheck("layernorm_manual.onnxtxt", options_));
  StatusOr<ImportedModel> imported = LoadModel(Example("layernorm_manual.onnxtxt"));
  ASSERT_TRUE(imported.ok());
  std::optional<CompiledModelKey> key = KeyOfCompile(imported->graph, options_, "");
  ASSERT_TRUE(key);
  // Entries a wrong writer could leave, whole as far as the kernel cache's integrity record
  // goes: the parse must refuse them (and the cache discard them), not a hash.
  // The last: a whole plan of another graph before this graph.
  StatusOr<ImportedModel> other = LoadModel(Example("softmax_manual.onnxtxt"));
  ASSERT_TRUE(other.ok());
  StatusOr<FusionPlan> other_plan = PlanFusion(other->graph, PlannerOptions{});
  ASSERT_TRUE(other_plan.ok());
  const std::string plan_text = SerializePlan(*other_plan);
  const std::string foreign = "cpu\n" + std::to_string(plan_text.size()) + "\n" + plan_text + SerializeGraph(imported->graph);
  for (const std::string& damaged : {std::string("cuda\n5\n{\"x\":tilefuse-graph v1\n"), std::string("gpu\n2\n{}"),
                                     std::string("cpu\n99999\n{}"), foreign}) {
    for (const fs::path& entry : Entries()) fs::remove_all(entry.parent_path());
    StatusOr<KernelCache> cache = KernelCache::Open(options_.cache_dir);
    ASSERT_TRUE(cache.ok());
    ASSERT_TRUE(cache->Insert(key->key, ".model", damaged).ok());
    EXPECT_FALSE(LoadCompiledModel(*key)) << damaged.substr(0, 40);
    EXPECT_FALSE(CompileAndCheck("layernorm_manual.onnxtxt", options_)) << damaged.substr(0, 40);
    EXPECT_TRUE(CompileAndCheck("layernorm_manual.onnxtxt", options_)) << damaged.substr(0, 40);
  }
}

}  // namespace
}  // namespace tilefuse
