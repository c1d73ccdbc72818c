// RMS norms computed in the product that reads them: a LLaMA-style layer's input norm feeds only
// its q, k and v products (one kernel grouped over N) and its post-attention norm only the gate
// and up products (one gated kernel). Such a product reads the norm's input x in place of A,
// multiplies x by the norm's scale as its consumers bring A into registers, sums each row's
// squares on the way, and scales its accumulators' rows by rsqrt(mean + epsilon) before the
// epilogue (GemmTemplateKernel::row_norm; gemm_sm90's kNormA). The normed A is never written nor
// read back, and the norm's kernel is not launched: at batch 1 a launch, its ramp and its
// dependency edge each, two a layer.
//
// Rounding: the graph computes scale · round(x · r) with r = rsqrt(mean(x²) + epsilon) rounded
// to the 16-bit type, then the product; the kernel computes r · Σ_k round(x · scale) · w. Both
// round each element of A once to the operands' type (a relative 2^-8 for bf16), in different
// places; the sums agree to that rounding.
#pragma once

#include <optional>
#include <vector>

#include "codegen/gemm_template.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

// The RMS norm whose output is node `value`, written as transformers' LlamaRMSNorm (and T5's,
// Mistral's, Qwen's) traces:
//   scale · cast(cast(x, f32) · rsqrt(mean(cast(x, f32)², last axis) + epsilon))
// (casts between float types anywhere or nowhere, the square as pow(·, 2) or a product, the
// reciprocal square root as rsqrt, 1 / sqrt or a division by sqrt, the scale on either side).
// Every op of it but x, scale and the constants must be in `member`; x and scale must be of one
// 16-bit float type, scale [K] (up to reshapes and broadcasts), x's last axis K.
struct RmsNormMatch {
  int input = -1;  // x
  int scale = -1;
  double epsilon = 0;
};
std::optional<RmsNormMatch> MatchRmsNorm(const Graph& graph, int value, const std::vector<bool>& member);

// The layer norm whose output is node `value`, as decompose.h writes LayerNormalization (and
// PyTorch's native_layer_norm through the FX frontend) over the last axis of a 16-bit x:
//   cast(((xf - mean(xf)) · rsqrt(mean((xf - mean(xf))²) + epsilon)) · scale [+ bias], x's type)
// with xf = cast(x, f32) and scale, bias [K] of x's type cast to f32 (broadcasts and reshapes
// anywhere, each product and sum in either order). Every op but x, scale, bias and the
// constants must be in `member`.
struct LayerNormMatch {
  int input = -1;  // x
  int scale = -1;
  int bias = -1;  // -1: none
  double epsilon = 0;
};
std::optional<LayerNormMatch> MatchLayerNorm(const Graph& graph, int value, const std::vector<bool>& member);

// Why `gemm`'s A cannot be normed in its kernel, or OK: one batch entry, A a plain [rows][K]
// matrix (no view, im2col or MN-major read) of a 16-bit type, K a whole number of 64-column
// steps.
Status RowNormFits(const GemmTemplateKernel& gemm);
// RowNormFits, and A not normed already.
Status RowNormFoldable(const GemmTemplateKernel& gemm);
// `gemm` (its gate and its parts too) reading `norm.input` in place of A, with the norm in its
// kernel. `normed` is the norm's output, the product's A as the graph has it.
GemmTemplateKernel FoldRowNorm(GemmTemplateKernel gemm, int normed, const RmsNormMatch& norm);

}  // namespace tilefuse
