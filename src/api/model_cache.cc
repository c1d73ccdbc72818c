#include "api/model_cache.h"

#include <fmt/format.h>

#include "api/backend_setup.h"
#include "fusion/plan_serialization.h"
#include "fusion/plan_verifier.h"
#include "ir/graph_serialization.h"
#include "support/build_id.h"
#include "support/kernel_cache.h"
#include "support/private_folder.h"

namespace tilefuse {

namespace {

constexpr std::string_view kSuffix = ".model";

// An entry: "<backend>\n<plan's length>\n<plan>" then the serialized graph.
std::string EntryBytes(const Graph& passed, const std::string& backend, const FusionPlan& plan) {
  const std::string text = SerializePlan(plan);
  return fmt::format("{}\n{}\n{}{}", backend, text.size(), text, SerializeGraph(passed));
}

StatusOr<CachedCompile> ParseEntry(std::string_view bytes) {
  CachedCompile out;
  auto line = [&]() -> std::optional<std::string> {
    const size_t end = bytes.find('\n');
    if (end == std::string_view::npos) return std::nullopt;
    std::string text(bytes.substr(0, end));
    bytes.remove_prefix(end + 1);
    return text;
  };
  std::optional<std::string> backend = line(), length = line();
  if (!backend || !length || (*backend != "cuda" && *backend != "cpu")) return InvalidArgument("not a compiled-model entry");
  size_t plan_size = 0;
  try {
    plan_size = std::stoul(*length);
  } catch (const std::exception&) {
    return InvalidArgument("not a compiled-model entry");
  }
  if (plan_size > bytes.size()) return InvalidArgument("a compiled-model entry cut short");
  out.backend = *backend;
  ASSIGN_OR_RETURN(out.plan, DeserializePlan(bytes.substr(0, plan_size)));
  ASSIGN_OR_RETURN(out.passed, DeserializeGraph(bytes.substr(plan_size)));
  // A plan of the right form for another graph would fail the compile: a miss instead.
  RETURN_IF_ERROR(VerifyPlan(out.passed, out.plan).WithContext("the cached plan"));
  return out;
}

std::optional<KernelCache> OpenCache(const std::string& directory) {
  StatusOr<KernelCache> cache = KernelCache::Open(directory);
  if (!cache.ok() || !cache->enabled()) return std::nullopt;
  return std::move(cache).value();
}

}  // namespace

std::optional<CompiledModelKey> KeyOfCompile(const Graph& graph, const ModelOptions& options, const std::string& gpu) {
  if (options.tune || !options.dump_dir.empty() || options.backend == "reference") return std::nullopt;
  if (ConstantBytes(graph) > kMaxCachedConstantBytes) return std::nullopt;
  const std::string serialized = SerializeGraph(graph);
  return CompiledModelKey{options.cache_dir, KernelCache::Key({"tilefuse compiled model v1", BuildId(), CompileWords(options, gpu), serialized})};
}

std::string CompileWords(const ModelOptions& options, const std::string& gpu) {
  // Everything in the options that shapes the passes, the plan or the kernels; not where the
  // cache is, the GPU's ordinal, background compiles, poisoning or run-time fallbacks.
  const std::string words = fmt::format("backend {} gpu '{}' fuse {} precision {} gemm {} attention {} form {} cluster {} depthwise {} "
                                        "stand-ins {} strict {}",
                                        options.backend, gpu, options.fuse, options.precision, options.gemm,
                                        options.attention, options.gemm_form, options.gemm_cluster, options.depthwise,
                                        options.stand_ins_only, options.strict);
  // The passes' switches read from the environment (backend_setup.h) shape the passed graph
  // too: a model compiled with them off is another entry.
  const PassOptions passes = CudaPassOptions();
  return words + fmt::format(" channels-last {} heads {}", passes.channels_last, passes.heads_layout);
}

std::optional<CachedCompile> LoadCompiledModel(const CompiledModelKey& key) {
  std::optional<KernelCache> cache = OpenCache(key.directory);
  if (!cache) return std::nullopt;
  const std::string& entry = key.key;
  std::optional<std::string> path = cache->Lookup(entry, kSuffix);
  if (!path) return std::nullopt;
  StatusOr<std::string> bytes = ReadPrivateFile(*path);
  if (!bytes.ok()) return std::nullopt;
  StatusOr<CachedCompile> parsed = ParseEntry(*bytes);
  if (!parsed.ok()) {
    cache->Discard(entry, kSuffix, parsed.status().message());
    return std::nullopt;
  }
  return std::move(parsed).value();
}

void StoreCompiledModel(const CompiledModelKey& key, const Graph& passed, const std::string& backend, const FusionPlan& plan) {
  if (std::optional<KernelCache> cache = OpenCache(key.directory)) (void)cache->Insert(key.key, kSuffix, EntryBytes(passed, backend, plan));
}

}  // namespace tilefuse
