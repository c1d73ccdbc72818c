#include "passes/pipeline.h"

#include <chrono>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/attention_grads.h"
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/decompose.h"
#include "passes/fold_constants.h"
#include "passes/fp8_products.h"
#include "passes/infer.h"
#include "passes/k_major_weights.h"
#include "passes/outer_products.h"
#include "passes/column_padding_into_products.h"
#include "passes/pad_gemm_columns.h"
#include "passes/pad_gemm_depth.h"
#include "passes/sink_transposes.h"
#include "passes/stage_conv_inputs.h"
#include "passes/unshare_reshapes.h"
#include "passes/unshare_window_views.h"
#include "passes/window_ops.h"
#include "support/file_util.h"

namespace tilefuse {

namespace {

// Runs the passes in order, numbering them for the dump files.
class PassRunner {
 public:
  PassRunner(Graph graph, const PassOptions& options, PassTimes* times)
      : graph_(std::move(graph)), options_(options), times_(times) {}

  Status Prepare() {
    if (options_.dump_dir.empty()) return Status::Ok();
    std::error_code error;
    std::filesystem::create_directories(options_.dump_dir, error);
    if (error) return Internal(fmt::format("cannot create dump directory '{}': {}", options_.dump_dir, error.message()));
    return Status::Ok();
  }

  template <typename Pass>
  Status Run(const char* name, Pass pass) {
    const auto start = std::chrono::steady_clock::now();
    StatusOr<Graph> result = pass(graph_);
    if (!result.ok()) return result.status().WithContext(fmt::format("pass '{}'", name));
    graph_ = std::move(result).value();
    Time(name, start);
    return Dump(name);
  }

  Status Verify() {
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(VerifyGraph(graph_).WithContext("verify"));
    Time("verify", start);
    return Dump("verify");
  }

  Graph TakeGraph() { return std::move(graph_); }

 private:
  Status Dump(const char* name) {
    if (options_.dump_dir.empty()) return Status::Ok();
    std::string file = fmt::format("{:02}-{}.txt", next_dump_++, name);
    return WriteFileAtomically((std::filesystem::path(options_.dump_dir) / file).string(), PrintGraph(graph_));
  }

  void Time(const char* name, std::chrono::steady_clock::time_point start) {
    if (times_)
      times_->push_back({name, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count()});
  }

  Graph graph_;
  const PassOptions& options_;
  PassTimes* times_;
  int next_dump_ = 0;
};

// The attention gradients the CUDA backend's attention backward template takes (as
// backend/cuda/cuda_attention_backward_program.cc checks again, saying why where it does not):
// half precision, one head dim of 64 or 128 for q, k and v, an f32 logsumexp, and all three
// gradients of the call in the graph (the template writes them together).
bool TakenByAttentionBackwardTemplate(const Graph& graph, const Node& node) {
  const Node& q = graph.node(node.inputs[1]);
  const Node& v = graph.node(node.inputs[3]);
  const int64_t d = q.shape[3];
  if (!IsHalf(q.dtype) || (d != 64 && d != 128) || v.shape[3] != d || graph.node(node.inputs[5]).dtype != DType::kF32) return false;
  int gradients = 0;
  for (const Node& n : graph.nodes())
    gradients += IsAttentionGrad(n.op) && n.inputs == node.inputs && n.attrs.scale == node.attrs.scale && n.attrs.causal == node.attrs.causal;
  return gradients == 3;
}

}  // namespace

// Every rewriting pass also ends in VerifyGraph (GraphRewriter::Finish builds through
// GraphBuilder::Build), so a pass that breaks an invariant is caught at its own step.
StatusOr<Graph> RunGraphPasses(Graph graph, const PassOptions& options, PassTimes* times) {
  PassRunner passes(std::move(graph), options, times);
  RETURN_IF_ERROR(passes.Prepare());
  RETURN_IF_ERROR(passes.Verify());
  RETURN_IF_ERROR(passes.Run("infer", InferTypes));
  // Before the folding of constants, which would dequantize a constant weight to f32.
  auto fp8_products = [&](const Graph& g) { return MakeFp8Products(g, {.block_scales = options.fp8_block_scales, .int8 = options.int8_products}); };
  if (options.fp8_products) RETURN_IF_ERROR(passes.Run("fp8-products", fp8_products));
  // Transposes of weights the CUDA backend reads K-major stay (FoldConstantsOptions).
  const FoldConstantsOptions fold{.k_major = options.k_major_weights};
  auto fold_constants = [&](const Graph& g) { return FoldConstants(g, fold); };
  RETURN_IF_ERROR(passes.Run("fold-constants", fold_constants));
  RETURN_IF_ERROR(passes.Run("cse", EliminateCommonSubexpressions));
  RETURN_IF_ERROR(passes.Run("dce", EliminateDeadCode));
  if (options.column_padding_into_products)
    RETURN_IF_ERROR(passes.Run("column-padding-into-products", MoveColumnPaddingIntoProducts));
  if (options.decompose) {
    RETURN_IF_ERROR(passes.Run("decompose", DecomposeComposites));
    RETURN_IF_ERROR(passes.Run("outer-products", RewriteOuterProducts));  // after: it tells P·V by its decomposed softmax
    RETURN_IF_ERROR(passes.Run("attention-grads", [&](const Graph& g) {
      return options.keep_attention_grads ? RewriteAttentionGrads(g, TakenByAttentionBackwardTemplate) : RewriteAttentionGrads(g);
    }));
    RETURN_IF_ERROR(passes.Run("window-ops", [&](const Graph& g) {
      return RewriteWindowOps(g, WindowOpsOptions{.keep_f32_conv = options.library_conv,
                                                  .keep_f32_pool = options.library_conv,
                                                  .channels_last = options.channels_last});
    }));
    // The transposes the channels-last forms put around each convolution cancel between
    // consecutive ones: the ops in between then read and write NHWC.
    if (options.channels_last)
      RETURN_IF_ERROR(passes.Run("sink-transposes", [&](const Graph& g) { return SinkTransposes(g, {.heads = options.heads_layout}); }));
    // Weights reshaped (and, for half types, cast) by the window rewrite become constants
    // of the shape the product reads, once at compile time.
    RETURN_IF_ERROR(passes.Run("fold-constants", fold_constants));
    // Half-precision weights with unaligned rows, and 8-bit float ones (the FP8 tensor cores
    // read both operands K-major), go K-major instead of being padded; f32 ones are padded
    // first, then go K-major with the rest. (An 8-bit LM head padded to 50272 columns left its
    // slice and scales to a kernel of their own: GPT-2's at 8x512 841 + 444 µs; H200,
    // 2026-12-04.)
    if (options.k_major_weights.unaligned_half || options.k_major_weights.eight_bit) {
      const KMajorWeightsOptions k_major{.unaligned_half = options.k_major_weights.unaligned_half, .eight_bit = options.k_major_weights.eight_bit};
      RETURN_IF_ERROR(passes.Run("k-major-weights", [&](const Graph& g) { return StoreWeightsKMajor(g, k_major); }));
    }
    if (options.pad_gemm_columns) RETURN_IF_ERROR(passes.Run("pad-gemm-columns", PadGemmColumns));
    if (options.pad_gemm_depth) RETURN_IF_ERROR(passes.Run("pad-gemm-depth", PadGemmDepth));
    if (options.k_major_weights.f32 || options.k_major_weights.eight_bit) {
      const KMajorWeightsOptions k_major{.f32 = options.k_major_weights.f32, .eight_bit = options.k_major_weights.eight_bit};
      RETURN_IF_ERROR(passes.Run("k-major-weights", [&](const Graph& g) { return StoreWeightsKMajor(g, k_major); }));
    }
    RETURN_IF_ERROR(passes.Run("cse", EliminateCommonSubexpressions));
    RETURN_IF_ERROR(passes.Run("dce", EliminateDeadCode));
    // After CSE, which would merge the copies again.
    RETURN_IF_ERROR(passes.Run("unshare-reshapes", UnshareReshapes));
    RETURN_IF_ERROR(passes.Run("dce", EliminateDeadCode));
    if (options.channels_last) {  // after CSE, which would merge the copies again
      RETURN_IF_ERROR(passes.Run("unshare-window-views", UnshareWindowViews));
      RETURN_IF_ERROR(passes.Run("dce", EliminateDeadCode));
      RETURN_IF_ERROR(passes.Run("stage-conv-inputs", StageConvInputs));
    }
  }
  RETURN_IF_ERROR(passes.Verify());
  return passes.TakeGraph();
}

}  // namespace tilefuse
