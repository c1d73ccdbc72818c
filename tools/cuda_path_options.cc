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
                  "cuda: f32 matmuls as PyTorch's float32 matmul precision: highest (f32's accuracy, the default: the\n"
                  "GEMM template's 3xTF32 form, each operand split into two TF32 parts and three products summed on the\n"
                  "tensor cores, within about 2^-22 of each product; cuBLASLt's f32 where the template does not apply) or\n"
                  "high (TF32 tensor cores: inputs rounded to 10 mantissa bits, f32 accumulation; --check then holds f32\n"
                  "outputs to the f16 tolerance). Half-precision models are unaffected. FP8 products (dequantized 8-bit\n"
                  "floats multiplied) sum each K step apart and add it into f32 under highest; under high the tensor\n"
                  "cores' own FP8 accumulation (about 14 bits) sums all of K, as torch._scaled_mm's use_fast_accum.")
      ->check(CLI::IsMember({"highest", "high"}))
      ->default_val("highest");
  command
      .add_option("--gemm-form", choices.gemm_form,
                  "cuda, the GEMM template's consumers (for comparison): rule (as its rule picks), tail (cooperative, the\n"
                  "epilogue in the main loop's tail), overlap (cooperative, a tile's epilogue beside the next tile's main\n"
                  "loop, wherever one unit runs a tile), pingpong (two consumers taking whole tiles in turn) or streamk (tail,\n"
                  "with the tiles of a partial last round shared by every SM as one run of K steps, wherever there is such a\n"
                  "round); rule and skinny give products of at most 64 rows (decode steps) to the skinny GEMM template, which\n"
                  "streams B through every SM; tail, overlap, pingpong and streamk give them to the GEMM template")
      ->check(CLI::IsMember({"rule", "tail", "overlap", "pingpong", "streamk", "skinny"}))
      ->default_val("rule");
  command
      .add_option("--gemm-cluster", choices.gemm_cluster,
                  "cuda, the GEMM template: 0 (the rule), 1 (single CTAs) or 2 (clusters of two CTAs sharing B tiles by\n"
                  "multicast, wherever they fit)")
      ->check(CLI::IsMember({0, 1, 2}))
      ->default_val(0);
  command
      .add_option("--depthwise", choices.depthwise,
                  "cuda, channels-last depthwise convolutions: on (the depthwise template, its rule's thread shape), off\n"
                  "(the pointwise loop template, for comparison), or VxP (V channels and P output pixels a thread, e.g. 8x2)")
      ->default_val("on");
  command.add_flag("--stand-ins", choices.stand_ins,
                   "cuda: template kernels whose own form takes seconds to compile (the GEMM template's overlapped\n"
                   "epilogue, the attention template's ping-pong and overlap loops) run the quick stand-in that\n"
                   "Python's background compiles run first (ping-pong GEMM tiles; the serial attention loop with the\n"
                   "mask on every block), and their own forms are not compiled: the fastest compile, and how the\n"
                   "stand-ins are checked");
}

void AddDeviceOption(CLI::App& command, int& device) {
  command
      .add_option("--device", device,
                  "cuda (and auto, when it runs on the GPU): the GPU to run on, by CUDA's numbering (0 is the first);\n"
                  "an ordinal this machine does not have is an error (exit 2), and so is any but 0 with --backend cpu")
      ->capture_default_str();
}

void ApplyCudaPathChoices(const CudaPathChoices& choices, ModelOptions& options) {
  options.gemm = choices.gemm;
  options.attention = choices.attention;
  options.precision = choices.precision;
  options.gemm_form = choices.gemm_form;
  options.gemm_cluster = choices.gemm_cluster;
  options.depthwise = choices.depthwise;
  options.stand_ins_only = choices.stand_ins;
}

}  // namespace tilefuse::cli
