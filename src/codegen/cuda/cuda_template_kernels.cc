#include "codegen/cuda/cuda_template_kernels.h"

#include <fmt/format.h>

#include "codegen/cuda/cuda_gemm_emitter.h"
#include "codegen/cuda/cuda_gemm_search_space.h"
#include "codegen/cuda/cuda_skinny_chain_emitter.h"
#include "codegen/cuda/cuda_skinny_gemm_emitter.h"
#include "codegen/gemm_n_groups.h"
#include "codegen/kernel_fingerprint.h"
#include "support/content_hash.h"

namespace tilefuse {

namespace {

// A fingerprint from what the rule's kernel (emitted under a fixed name) computes.
std::string SourceFingerprint(const std::string& kind, const StatusOr<CudaKernelSource>& rule) {
  if (!rule.ok()) return kind + " (no kernel: " + rule.status().message() + ")";
  return kind + " " + HashBytes(rule->function).ToHex();
}

class GemmTemplate : public TemplateKernel {
 public:
  GemmTemplate(GemmTemplateKernel gemm, CudaGemmConfig requested) : gemm_(std::move(gemm)), requested_(requested) {}
  std::string Kind() const override { return "gemm template"; }
  // As the tuning cache has always keyed GEMM configurations; an FP8 product's accumulation
  // (promoted or the tensor cores' own) is part of what it computes.
  std::string Fingerprint() const override {
    return GemmFingerprint(gemm_) + (IsFloat8(gemm_.operand_dtype) && requested_.promote == false ? " fast accumulation" : "");
  }
  std::vector<nlohmann::json> SearchSpace(int sm_count) const override {
    std::vector<nlohmann::json> out;
    for (const CudaGemmConfig& c : GemmCandidates(gemm_, sm_count, requested_.promote).candidates) out.push_back(GemmConfigToJson(c));
    return out;
  }
  StatusOr<CudaKernelSource> Emit(const std::string& name, const nlohmann::json& config, int sm_count) const override {
    GemmTemplateKernel named = gemm_;
    named.name = name;
    CudaGemmConfig c = config.empty() ? requested_ : GemmConfigFromJson(config);
    c.sm_count = sm_count;
    return EmitCudaGemm(named, c);
  }
  // The overlapped epilogue's main-loop step is printed once per epilogue chunk (16): cold,
  // 3.0-3.9 s of NVRTC on a GPU host (H200, 2026-11-29). Ping-pong consumers on 128x64 tiles
  // stand in, 0.24-0.36 s there: their epilogue, unrolled over a thread's accumulators, is half
  // as long as on 128x128 tiles (bias+GELU's 128x128 ping-pong took 0.53 s).
  std::optional<nlohmann::json> StandIn(const nlohmann::json& config) const override {
    const CudaGemmConfig c = config.empty() ? requested_ : GemmConfigFromJson(config);
    if (!ResolveGemmConfig(gemm_, c).overlap_epilogue.value_or(false)) return std::nullopt;
    CudaGemmConfig pingpong;
    pingpong.pingpong = true;
    pingpong.overlap_epilogue = false;
    pingpong.block_n = NarrowestTileWidth(gemm_);  // (a gated product's tiles hold whole boxes of both)
    pingpong.sm_count = c.sm_count;
    return GemmConfigToJson(ResolveGemmConfig(gemm_, pingpong));
  }
  const GemmTemplateKernel* GemmProblem() const override { return &gemm_; }

 private:
  GemmTemplateKernel gemm_;
  CudaGemmConfig requested_;
};

// The skinny GEMM template (cuda_skinny_gemm_emitter.h): the GEMM template's problem, a
// skeleton of its own.
class SkinnyGemmTemplate : public TemplateKernel {
 public:
  SkinnyGemmTemplate(GemmTemplateKernel gemm, bool clusters, bool prefetch_epilogue)
      : gemm_(std::move(gemm)), clusters_(clusters), prefetch_epilogue_(prefetch_epilogue) {}
  std::string Kind() const override { return "skinny gemm template"; }
  const GemmTemplateKernel* SkinnyProblem() const override { return &gemm_; }
  std::string Fingerprint() const override { return "skinny " + GemmFingerprint(gemm_); }
  std::vector<nlohmann::json> SearchSpace(int sm_count) const override {
    std::vector<nlohmann::json> out;
    for (const CudaSkinnyGemmConfig& c : SkinnyGemmCandidates(gemm_, sm_count, clusters_)) out.push_back(SkinnyGemmConfigToJson(c));
    return out;
  }
  StatusOr<CudaKernelSource> Emit(const std::string& name, const nlohmann::json& config, int sm_count) const override {
    GemmTemplateKernel named = gemm_;
    named.name = name;
    CudaSkinnyGemmConfig c = SkinnyGemmConfigFromJson(config);
    c.sm_count = sm_count;
    c.clusters = clusters_;
    c.prefetch_epilogue = prefetch_epilogue_;
    return EmitCudaSkinnyGemm(named, c);
  }

 private:
  GemmTemplateKernel gemm_;
  bool clusters_;  // the rule may sum the splits in a cluster (TemplateOverrides::skinny_clusters)
  bool prefetch_epilogue_;  // TemplateOverrides::skinny_prefetch
};

// Two skinny products in one kernel (codegen/cuda/cuda_skinny_chain_emitter.h): its forms, in
// pairs of CTAs or whole.
class SkinnyChainTemplate : public TemplateKernel {
 public:
  SkinnyChainTemplate(GemmTemplateKernel first, GemmTemplateKernel second) : first_(std::move(first)), second_(std::move(second)) {}
  std::string Kind() const override { return "skinny chain template"; }
  std::string Fingerprint() const override { return "skinny chain " + GemmFingerprint(first_) + " then " + GemmFingerprint(second_); }
  std::vector<nlohmann::json> SearchSpace(int) const override { return SkinnyChainForms(first_, second_); }
  StatusOr<CudaKernelSource> Emit(const std::string& name, const nlohmann::json& config, int sm_count) const override {
    GemmTemplateKernel named = first_;
    named.name = name;
    return EmitCudaSkinnyChain(named, second_, sm_count, config);
  }

 private:
  GemmTemplateKernel first_, second_;
};

// A template with only its rule's configuration to offer (nothing to tune until its
// alternatives are measured): its fingerprint from what that kernel computes.
class RuleOnlyTemplate : public TemplateKernel {
 public:
  std::string Fingerprint() const override { return SourceFingerprint(Kind(), EmitRule("K", 0)); }
  std::vector<nlohmann::json> SearchSpace(int) const override { return {nlohmann::json::object()}; }
  StatusOr<CudaKernelSource> Emit(const std::string& name, const nlohmann::json& config, int sm_count) const override {
    if (!config.empty()) return InvalidArgument(fmt::format("{}: the {} takes its rule's configuration only", name, Kind()));
    return EmitRule(name, sm_count);
  }

 protected:
  virtual StatusOr<CudaKernelSource> EmitRule(const std::string& name, int sm_count) const = 0;
};

class AttentionTemplate : public RuleOnlyTemplate {
 public:
  AttentionTemplate(AttentionTemplateKernel attention, CudaAttentionConfig resolved)
      : attention_(std::move(attention)), resolved_(std::move(resolved)) {}
  std::string Kind() const override { return "attention template"; }
  // The rule's configuration, or the stand-in's (StandIn).
  StatusOr<CudaKernelSource> Emit(const std::string& name, const nlohmann::json& config, int sm_count) const override {
    if (config != StandInConfig()) return RuleOnlyTemplate::Emit(name, config, sm_count);
    CudaAttentionConfig c = resolved_;
    c.loop = AttentionLoop::kSerial;
    c.interior = {};
    return EmitWith(name, c, sm_count);
  }
  // The ping-pong and overlap loops print their step longer than the serial loop, and a mask
  // with interior key blocks prints it twice (with and without the mask). Cold NVRTC on a GPU
  // host (H200, 2026-11-29, whole compile / its build stage): causal d128 0.89 s, unmasked d128
  // 0.55 s, causal d64 0.58 s; with the serial loop and the mask on every block standing in,
  // d128 0.45-0.46 s (here, on 2 cores: causal d128 0.82-1.0 s against 0.41-0.43 s).
  std::optional<nlohmann::json> StandIn(const nlohmann::json& config) const override {
    if (!config.empty() || resolved_.loop == AttentionLoop::kSerial || UsesDecodeForm(attention_)) return std::nullopt;
    return StandInConfig();
  }

 private:
  static nlohmann::json StandInConfig() { return {{"loop", "serial"}, {"mask", "every block"}}; }
  StatusOr<CudaKernelSource> EmitRule(const std::string& name, int sm_count) const override { return EmitWith(name, resolved_, sm_count); }
  StatusOr<CudaKernelSource> EmitWith(const std::string& name, CudaAttentionConfig c, int sm_count) const {
    AttentionTemplateKernel named = attention_;
    named.name = name;
    if (sm_count > 0) c.sm_count = sm_count;
    if (UsesDecodeForm(named)) return EmitCudaDecodeAttention(named, c);
    return EmitCudaAttention(named, c);
  }

  AttentionTemplateKernel attention_;
  CudaAttentionConfig resolved_;
};

class DepthwiseTemplate : public RuleOnlyTemplate {
 public:
  DepthwiseTemplate(DepthwiseTemplateKernel depthwise, CudaDepthwiseConfig requested)
      : depthwise_(std::move(depthwise)), resolved_(ResolveDepthwiseConfig(depthwise_, requested)) {}
  std::string Kind() const override { return "depthwise template"; }

 private:
  StatusOr<CudaKernelSource> EmitRule(const std::string& name, int) const override {
    DepthwiseTemplateKernel named = depthwise_;
    named.name = named.epilogue.name = name;
    return EmitCudaDepthwise(named, resolved_);
  }

  DepthwiseTemplateKernel depthwise_;
  CudaDepthwiseConfig resolved_;
};

}  // namespace

std::shared_ptr<const TemplateKernel> MakeGemmTemplate(GemmTemplateKernel gemm, CudaGemmConfig requested) {
  return std::make_shared<GemmTemplate>(std::move(gemm), requested);
}

std::shared_ptr<const TemplateKernel> MakeSkinnyGemmTemplate(GemmTemplateKernel gemm, bool clusters, bool prefetch_epilogue) {
  return std::make_shared<SkinnyGemmTemplate>(std::move(gemm), clusters, prefetch_epilogue);
}

std::shared_ptr<const TemplateKernel> MakeSkinnyChainTemplate(GemmTemplateKernel first, GemmTemplateKernel second) {
  return std::make_shared<SkinnyChainTemplate>(std::move(first), std::move(second));
}

std::shared_ptr<const TemplateKernel> MakeAttentionTemplate(AttentionTemplateKernel attention, CudaAttentionConfig resolved) {
  return std::make_shared<AttentionTemplate>(std::move(attention), std::move(resolved));
}

std::shared_ptr<const TemplateKernel> MakeDepthwiseTemplate(DepthwiseTemplateKernel depthwise, CudaDepthwiseConfig requested) {
  return std::make_shared<DepthwiseTemplate>(std::move(depthwise), requested);
}

}  // namespace tilefuse
