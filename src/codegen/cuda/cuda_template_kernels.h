// The TemplateKernel (codegen/cuda/template_kernel.h) of each CUDA template: the problem its
// lowering found and the configuration the rules and the compile options ask for.
#pragma once

#include <memory>

#include "codegen/attention_template.h"
#include "codegen/cuda/cuda_attention_emitter.h"
#include "codegen/cuda/cuda_depthwise_emitter.h"
#include "codegen/cuda/cuda_gemm_config.h"
#include "codegen/depthwise_template.h"
#include "codegen/gemm_template.h"
#include "codegen/cuda/template_kernel.h"

namespace tilefuse {

// `requested`: the configuration asked for (its zeros and unset fields the rule's); the
// tuner's candidates (GemmCandidates) replace it field by field.
std::shared_ptr<const TemplateKernel> MakeGemmTemplate(GemmTemplateKernel gemm, CudaGemmConfig requested);
// The skinny GEMM template for a problem SkinnyGemmFits takes: its rule's configuration, the
// tuner's candidates (SkinnyGemmCandidates) in its search space; `clusters`: the rule may sum
// the splits in a thread-block cluster (CudaSkinnyGemmConfig::clusters).
std::shared_ptr<const TemplateKernel> MakeSkinnyGemmTemplate(GemmTemplateKernel gemm, bool clusters = false, bool prefetch_epilogue = true);
// `first` then `second`, which reads first's output as its A, in one kernel (SkinnyChainFits).
std::shared_ptr<const TemplateKernel> MakeSkinnyChainTemplate(GemmTemplateKernel first, GemmTemplateKernel second);
// `resolved`: ResolveAttentionConfigForMask's configuration (the mask's key blocks need the
// graph, which the kernel does not keep). Only it is listed: the loops and tiles have rules
// measured against each other, not a search.
std::shared_ptr<const TemplateKernel> MakeAttentionTemplate(AttentionTemplateKernel attention, CudaAttentionConfig resolved);
// `requested`: the thread shape asked for (zeros: the rule's); the rule's alone is listed.
std::shared_ptr<const TemplateKernel> MakeDepthwiseTemplate(DepthwiseTemplateKernel depthwise, CudaDepthwiseConfig requested);

}  // namespace tilefuse
