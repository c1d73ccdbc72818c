#include "cuda_path_options.h"

namespace tilefuse::cli {

void AddCudaPathOptions(CLI::App& command, CudaPathChoices& choices) {
  command
      .add_option("--gemm", choices.gemm,
                  "cuda: how gemm groups run: template (the generated Hopper GEMM kernel with the epilogue fused, "
                  "wherever it applies), library (cuBLASLt plus a generated epilogue kernel), or auto (the template "
                  "where it applies and has enough output tiles to fill the GPU, else cuBLASLt)")
      ->check(CLI::IsMember({"auto", "template", "library"}))
      ->default_val("auto");
  command
      .add_option("--attention", choices.attention,
                  "cuda: how attention groups run: template (one generated Hopper flash-attention kernel,\n"
                  "FlashAttention-3 style: the scores never leave registers, softmax overlaps the matmuls; groups\n"
                  "it does not take are split, with the reason), overlap or serial (the template with simpler\n"
                  "loops: no ping-pong between its consumer warpgroups / no overlap at all; for comparison), or\n"
                  "split (Q·Kᵀ, softmax and P·V as separate kernels, the scores in memory)")
      ->check(CLI::IsMember({"template", "overlap", "serial", "split"}))
      ->default_val("template");
  command
      .add_option("--precision", choices.precision,
                  "cuda: f32 matmuls as PyTorch's float32 matmul precision: highest (exact f32, the default) or high\n"
                  "(TF32 tensor cores: inputs rounded to 10 mantissa bits, f32 accumulation; --check then holds f32\n"
                  "outputs to the f16 tolerance). Half-precision models are unaffected.")
      ->check(CLI::IsMember({"highest", "high"}))
      ->default_val("highest");
}

void ApplyCudaPathChoices(const CudaPathChoices& choices, CudaCompileOptions& options) {
  options.gemm = choices.gemm == "template" ? GemmPath::kTemplate : choices.gemm == "library" ? GemmPath::kLibrary : GemmPath::kAuto;
  options.attention = choices.attention == "split"     ? AttentionPath::kSplit
                      : choices.attention == "overlap" ? AttentionPath::kOverlap
                      : choices.attention == "serial"  ? AttentionPath::kSerial
                                                       : AttentionPath::kTemplate;
  options.precision = choices.precision == "high" ? MatmulPrecision::kHigh : MatmulPrecision::kHighest;
}

}  // namespace tilefuse::cli
