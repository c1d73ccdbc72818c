// CudaProgram: how each fusion group of a planned graph runs on the GPU, and the CUDA
// source of every generated kernel (all of them in one text, for people to read; the
// backend compiles a unit per distinct kernel: backend/cuda/cuda_compile_units.h).
//
//   pointwise / row_reduction / reduction  → one generated kernel
//   gemm, Hopper (sm_90a)                  → prologue kernels (if any) + the GEMM template
//                                            with the epilogue fused (codegen/cuda/cuda_gemm_emitter)
//   gemm whose epilogue cuBLASLt fuses    → prologue kernels (if any) + one cuBLASLt call with
//   (bias, ReLU, tanh GELU; --gemm auto)     that epilogue (codegen/gemm_library_epilogue)
//   gemm, otherwise or where the template   → prologue kernels (if any) + cuBLASLt product
//   does not apply (the reason is kept)       + epilogue kernel (if any)
//   attention, Hopper                      → the attention template (codegen/cuda/cuda_attention_emitter)
//   anything else                          → its member ops on the host reference kernels,
//                                            with copies (reported, never silent)
//
// Attention groups the template does not take are planned again as their parts (gemm +
// row_reduction + gemm: PlanFusionForCuda), with the reason kept.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/cublaslt_matmul.h"
#include "codegen/cuda/cuda_emitter.h"
#include "codegen/cuda/cuda_gemm_config.h"
#include "codegen/gemm_template.h"
#include "codegen/library_operand_view.h"
#include "codegen/lowering_fault.h"
#include "codegen/cuda/template_kernel.h"
#include "fusion/fusion_plan.h"
#include "fusion/planner.h"
#include "fusion/target_capabilities.h"
#include "runtime/memory_plan.h"
#include "tilefuse/graph.h"

namespace tilefuse {

// A generated kernel and the graph values of its parameters.
struct CudaLaunchable {
  Kernel kernel;                  // the IR it was emitted from (the tuner re-emits it)
  CudaKernelSource source;
  std::vector<int> buffer_nodes;  // Kernel::buffers order
  std::vector<int> outputs;       // the nodes it writes
  // A compute-bound template (its source is not re-emitted from `kernel` by the loop
  // tuner; `kernel` is its epilogue).
  bool is_template = false;
  std::shared_ptr<const TemplateKernel> template_kernel;  // the template's problem (measurement and the tuner re-emit it)
  // A kernel of the same name and problem that compiles in a fraction of this one's time, to
  // run while this one compiles in the background (CudaTarget::stand_ins); null: none.
  std::shared_ptr<const CudaLaunchable> stand_in;
  // The IR of the kernels launched together with this one's (codegen/cuda/cuda_launch_together.h),
  // verified and dumped beside `kernel`; such a launch is not re-emitted from `kernel` alone.
  std::vector<Kernel> launched_with_it;
};

struct CudaGroupProgram {
  enum class Mode { kGenerated, kGemm, kGemmTemplate, kAttentionTemplate, kAttentionBackwardTemplate, kHost };
  int group = -1;
  GroupKind kind = GroupKind::kPointwise;
  Mode mode = Mode::kHost;
  std::optional<CudaLaunchable> kernel;    // generated; gemm: the epilogue; templates: the whole group
  std::vector<CudaLaunchable> prologue;    // gemm: materialise the product's operands (one per shape)
  int matmul = -1;                         // gemm
  std::vector<int> host_nodes;             // host: the members, in order
  std::string why_host;
  std::string why_library;                 // gemm: why the template does not apply
  // gemm template taken by the --gemm auto rule: cuBLASLt's own epilogue that would also
  // fuse the group's (the tuner times both); unset where none would.
  std::optional<LtEpilogue> library_alternative;
  // gemm: the epilogue cuBLASLt fuses into the product (no epilogue kernel), its bias
  // vector (or -1) and the value it writes in place of the product.
  LtEpilogue lt_epilogue = LtEpilogue::kNone;
  int lt_bias = -1;
  int lt_output = -1;
  // gemm: A's and B's views that cuBLASLt reads where they lie (their prologues dropped;
  // codegen/library_operand_view.h); unset: the operand itself.
  std::optional<LibraryOperandView> lt_a, lt_b;
  // gemm template: the group whose kernel computes this group's product and epilogue too, a
  // product grouped over N (codegen/gemm_n_groups.h); attention backward template: the group
  // whose kernels compute this gradient with the call's others
  // (backend/cuda/cuda_attention_backward_program.h). This group then has no kernel of its own
  // and its outputs are written at that group's step; -1: none.
  int grouped_into = -1;
  // gemm template: the group whose product this group's is the gate of, computed in its tiles
  // (codegen/gemm_gates.h): this group has no kernel of its own and its output is never stored
  // (no memory: no step writes or reads it); -1: none.
  int gated_into = -1;
  // generated: the group whose GEMM template kernel computes this group's RMS norm of its A
  // (codegen/gemm_row_norms.h): this group has no kernel of its own and its output is never
  // stored (no step writes or reads it); -1: none.
  int normed_into = -1;
  // gemm template: the skinny chain's first product (codegen/cuda/cuda_skinny_chain_emitter.h),
  // whose one output its kernel hands to the second product in shared memory and never stores
  // (no step writes or reads it).
  bool output_unstored = false;
  // gemm template: outputs of the group its kernel does not write, as no step reads them (an
  // amax's u, whose reader's reduction the kernel computes: codegen/gemm_amax.h).
  std::vector<int> unstored_outputs;
  // generated: the group whose kernel runs this group's too, launched together
  // (codegen/cuda/cuda_launch_together.h; this group then has no kernel of its own and its
  // outputs are written at that group's step); -1: none.
  int launched_with = -1;
};

// The generated kernels of a group: prologues, then the main or epilogue kernel.
std::vector<const CudaLaunchable*> Launchables(const CudaGroupProgram& p);

// The graph values a launch's parameters address, in order (CudaLaunchable::buffer_nodes of a
// template's kernel): buffers and tensor maps; scalars and scratch memory are no graph value.
std::vector<int> GraphValuesOf(const LaunchSpec& launch);

// The reason a gemm group goes to cuBLASLt's own epilogue under --gemm auto by the rule
// (the tuner then measures the template too).
inline constexpr char kLibraryEpilogueRule[] = "cuBLASLt fuses this epilogue";
// Products of at most this many rows that the GEMM template would split K for go to cuBLASLt
// under that rule (it read B faster at 16 and 64 rows); larger ones stay on the template.
inline constexpr int64_t kDecodeLikeRows = 64;

struct CudaProgram {
  std::vector<CudaGroupProgram> groups;  // plan order
  std::string source;                    // every kernel, one translation unit (the dump)
};
// Every generated kernel's source, in launch order (what `source` is made of).
std::vector<CudaKernelSource> KernelSources(const CudaProgram& program);

// A product grouped over N (CudaGroupProgram::grouped_into) writes the other groups' outputs
// at its own step, as kernels launched together (launched_with) do: `schedule` (one step per
// group, ScheduleFromFusionPlan) says so, so that their live ranges start there and no value
// that step reads shares their bytes. A gate computed in another product's tiles (gated_into)
// is neither written nor read, nor is an RMS norm computed in its product's kernel (normed_into),
// nor the output of a skinny chain's first product (output_unstored).
void WriteGroupedOutputsAtTheirKernel(const CudaProgram& program, Schedule& schedule);

// What the program is built for. The Hopper templates need sm_90a.
// How gemm groups run (auto: cuBLASLt with its own fused epilogue where the group's epilogue
// is one, else the Hopper GEMM template with the epilogue fused where it applies)
// and fills the GPU (auto), wherever it applies (template), or cuBLASLt with a generated
// epilogue kernel (library).
enum class GemmPath { kAuto, kTemplate, kLibrary };
// How attention runs: the attention template where it applies (template: FlashAttention-3's
// loop, softmax overlapping the matmuls within and across the consumer warpgroups; overlap
// and serial: its simpler loops, AttentionLoop, for comparison), or always as its parts,
// Q·Kᵀ, softmax and P·V, with the scores in memory (split).
enum class AttentionPath { kTemplate, kOverlap, kSerial, kSplit };
// f32 matmuls, as PyTorch's float32 matmul precision: exact f32 (highest, the default), or
// TF32 tensor cores (high: inputs rounded to 10 mantissa bits, f32 accumulation).
enum class MatmulPrecision { kHighest, kHigh };

// Overrides of the templates' own configuration rules, to measure the alternatives
// (tilefuse_bench_gpu_cases --attention-block-n, --attention-poly-exp, --attention-lazy-margin,
// --attention-consumers, --attention-tiles, --attention-q-slots, --gemm-pingpong, --gemm-overlap).
struct TemplateOverrides {
  int attention_block_n = 0;          // keys per step; 0: the rule
  int attention_poly_exp_every = -1;  // CudaAttentionConfig::poly_exp_every; -1: the rule
  std::optional<float> attention_lazy_margin;  // CudaAttentionConfig::lazy_margin
  int attention_consumers = 0;                 // CudaAttentionConfig::consumers; 0: the rule
  int attention_tiles = 0;                     // CudaAttentionConfig::tiles; 0: the rule
  int attention_q_slots = 0;                   // CudaAttentionConfig::q_slots; 0: the rule
  std::optional<bool> gemm_pingpong;  // unset: the rule (ResolveGemmConfig)
  std::optional<bool> gemm_overlap_epilogue;  // unset: the rule; true: wherever the template can overlap
  std::optional<bool> gemm_stream_k;          // unset: the rule; true: wherever tiles leave a partial last round
  int gemm_block_n = 0, gemm_stages = 0, gemm_splits = 0, gemm_group_m = 0;  // CudaGemmConfig's; 0: the rule
  int gemm_max_stages = 0;  // CudaGemmConfig::max_stages (TILEFUSE_GEMM_MAX_STAGES); 0: the rule
  // Products of one A by several weights, each of few output tiles, grouped over N into one
  // kernel (codegen/gemm_n_groups.h; false, TILEFUSE_GEMM_GROUP_N=0: a kernel each).
  bool gemm_group_n = true;
  // Grouped over N whatever their output tiles (TILEFUSE_GEMM_GROUP_N_ANY=1), for measurement:
  // LLaMA-style q, k and v at 8x512 (256 + 128 + 128 tiles) are apart by the rule.
  bool gemm_group_n_any = false;
  // f32 outputs staged and stored by TMA (GemmTemplateKernel::stage_f32_output;
  // TILEFUSE_GEMM_F32_STAGED=1), for measurement.
  bool gemm_f32_staged = false;
  // A product that only another's epilogue reads, element by element, computed in that one's
  // tiles (codegen/gemm_gates.h; false, TILEFUSE_GEMM_GATES=0: a kernel each).
  bool gemm_gates = true;
  // An RMS norm that only a GEMM template kernel reads, as its A, computed in that kernel
  // (codegen/gemm_row_norms.h; true, TILEFUSE_GEMM_ROW_NORMS=1). Off by default: measured no
  // faster than the norm's own kernel (bench/results/2026-12-03-h200-row-norms.md).
  bool gemm_row_norms = false;
  // Layer and RMS norms computed in the skinny products that read them (gemm_skinny_sm90.cuh's
  // kNormA; TILEFUSE_SKINNY_NORMS=0 turns it off). On since 2026-12-06: with the cache-update
  // fold below, GPT-2 small's bf16 decode 0.498 -> 0.416 ms a token on one H100 host
  // (bench/results/2026-12-06-h100-decode-defaults.md). The LLaMA config's wrong logits of
  // the forty-eighth session were the matcher's: it took a final norm whose f32 cast the down
  // product computes, reading a sum no kernel stored (gemm_row_norms.cc's ThroughCasts).
  bool skinny_norms = true;
  // A skinny product's split-K summed in a thread-block cluster's shared memory where a form
  // fits one wave (gemm_skinny_sm90.cuh's kSplitsInCluster; false, TILEFUSE_SKINNY_CLUSTERS=0:
  // through scratch memory). GPT-2's decode step 339.6 -> 281.1 µs of device time on an H200
  // (bench/results/2026-12-05-h200-skinny-clusters.md).
  bool skinny_clusters = true;
  // A skinny product's epilogue loads (a bias, a residual) asked of L1 as its consumers start,
  // not after the sums (CudaSkinnyGemmConfig::prefetch_epilogue; TILEFUSE_SKINNY_PREFETCH=0
  // turns it off, for comparison). Expected: an L2 or DRAM round trip (~0.3-0.7 µs) off each
  // decode product's critical path, 48 of them in GPT-2's step.
  bool skinny_prefetch = true;
  // A skinny product whose output only another reads, as its A, computed with it in one kernel
  // (codegen/cuda/cuda_skinny_chain_emitter.h; TILEFUSE_SKINNY_CHAINS=1 turns it on): a decode
  // step's MLP products. Off: the whole form was correct on an H100 (the checks, memcheck, the
  // decode tests) but slower, GPT-2's step 256.7 -> 302.6 µs of device time (2026-12-06): 48
  // CTAs each streaming 192 KB of weights, too large to share an SM with the kernel ahead, so
  // the weights no longer cross while it runs (bench/results/2026-12-06-h100-decode-host-path.md).
  // The pair form (the rule's since 2026-12-07: clusters of two CTAs, each half of both
  // weights) was correct and slower too: 260.7-261.3 -> 284.8-285.1 µs (H100, 2026-12-07; the
  // grid barrier and the blocks' partial sums through memory cost more than the launch saved:
  // bench/results/2026-12-07-h100-decode-chain-pair.md).
  bool skinny_chains = false;
  // A KV cache's update at one position written by the decode attention that reads the
  // updated cache (backend/cuda/cuda_cache_update_fold.h; TILEFUSE_CACHE_UPDATE_IN_ATTENTION=0
  // turns it off). On since 2026-12-06, with the norms above (their measurement). A position
  // the graph holds as a constant (a step Dynamo specialized) keeps the update's kernel: the
  // fold reads it from memory.
  bool cache_updates_in_attention = true;
  // A decode attention's output projection computed in the attention's kernel, a cluster of its
  // heads sharing their rows (attention_decode_projection.cuh; TILEFUSE_PROJECTION_IN_ATTENTION=1
  // turns it on): a launch and its dependency edge fewer a layer. Expected ~1.5-2 µs a layer
  // of GPT-2's decode step (its projection ~2.5 µs on an H100's timeline); measured correct and
  // slower, the step 261.5 -> 289.4 µs of device time (the attention with its projection 8.7 µs
  // a layer against 3.8 + 3.1 apart; H100, bench/results/2026-12-07-h100-decode-projection.md).
  bool projection_in_attention = false;
  // The amax of a GEMM template's output (ReduceMax(Abs(u)) over all of u) computed in its
  // epilogue, u not stored where only the amax reads it (codegen/gemm_amax.h;
  // TILEFUSE_AMAX_IN_EPILOGUE=0 turns it off, for comparison).
  bool amax_in_epilogue = true;
  // Every kernel releases the one behind before its own wait for the grid ahead
  // (tilefuse_device.cuh's TF_TRIGGER_BEFORE_WAIT; TILEFUSE_TRIGGER_FIRST=1 turns it on): a decode
  // step's weights then cross during two kernels ahead rather than one (GPT-2's first MLP
  // product, 4.7 MB, loads during the attention's short projection and adds 4.2-5.4 µs). Off:
  // measured no faster (with the projection above 289.4 -> 291.9 µs a step, H100, 2026-12-07).
  bool trigger_before_wait = false;
  // The decode attention's keys and values prefetched to L2 before it waits for the grid ahead
  // (CudaAttentionConfig::decode_prefetch; TILEFUSE_DECODE_PREFETCH=0 turns it off): GPT-2's
  // 12 decode attentions 53 -> 45 us of a step on an H100 (2026-12-06-h100-decode-defaults.md).
  bool decode_prefetch = true;
  // Independent generated kernels whose inputs are ready launched as one
  // (codegen/cuda/cuda_launch_together.h; false, TILEFUSE_LAUNCH_TOGETHER=0: a launch each).
  bool launch_together = true;
  // cuBLASLt reads operands that their prologues only view where they lie
  // (codegen/library_operand_view.h; false, TILEFUSE_LT_VIEWS=0: the prologues copy them).
  bool lt_views = true;
  // The skinny GEMM template for products of at most kSkinnyMaxRows rows (false: the GEMM
  // template's forms instead, for comparison).
  bool gemm_skinny = true;
  int gemm_cluster_m = 0;  // 0: the rule; 2: clusters of two wherever they fit (gemm_layout::ClustersFit)
  bool depthwise = true;   // the depthwise template where it applies (false: the pointwise loop template)
  int depthwise_vector = 0, depthwise_pixels = 0;  // CudaDepthwiseConfig's channels and pixels a thread; 0: the rule
  int row_cluster = 0;  // the row template's CudaKernelConfig::cluster (where it applies); 0: the rule
};

struct CudaTarget {
  std::string arch = "sm_90a";
  int sm_count = 132;
  GemmPath gemm = GemmPath::kAuto;
  std::map<int, GemmPath> gemm_path_at;  // per matmul node: the tuner's measured choice (over `gemm`)
  AttentionPath attention = AttentionPath::kTemplate;
  bool tf32 = false;  // --precision high: f32 products may take the GEMM template as TF32
  TemplateOverrides overrides;
  // Per template problem (TemplateKernel::Fingerprint), the configuration the tuner measured
  // best (over the rule and `overrides`).
  std::map<std::string, nlohmann::json> template_configs;
  LoweringFault fault;  // tests only: a deliberate lowering bug in the loop kernels
  // The graph's symbolic sizes (set by BuildCudaProgram): loop kernels print their extents
  // over them, so a new binding of the model's symbolic dims reuses the compiled kernels.
  const SymbolicShapes* symbolic = nullptr;
  // Template kernels that take seconds to compile get a quick stand-in (CudaLaunchable::
  // stand_in): CudaCompileOptions::background_compile.
  bool stand_ins = false;
  bool stand_ins_only = false;  // the stand-ins in place of those kernels (CudaCompileOptions::stand_ins_only)
};

// What the GPU's gemm kernels fuse, for the planner (fusion/target_capabilities.h): an
// epilogue is fused where cuBLASLt's own epilogue takes it (--gemm auto) or the GEMM
// template applies; otherwise the product makes a round trip through memory to an
// epilogue kernel. Answers are remembered per member set (the planner asks again and again).
class CudaCapabilities : public TargetCapabilities {
 public:
  explicit CudaCapabilities(CudaTarget target) : target_(std::move(target)) {}
  FusionDecision FusesGemmEpilogue(const Graph& graph, const std::vector<int>& members, int matmul) const override;

 private:
  CudaTarget target_;
  mutable const Graph* graph_ = nullptr;  // what users_ and inlined_ were computed for
  mutable std::vector<std::vector<int>> users_;
  mutable std::vector<bool> inlined_;
  mutable std::map<std::vector<int>, FusionDecision> answers_;
};

// A fusion plan for the CUDA backend, and why attention candidates were split.
struct CudaPlan {
  FusionPlan plan;
  std::vector<std::string> split_attention;  // "attention at %12 split: <reason>"
};

// Plans `graph` with the user's `options` (and, unless they name others, the target's
// CudaCapabilities); attention groups the target's attention
// template does not take (or every one, on another architecture or with
// AttentionPath::kSplit) are planned again as their parts.
StatusOr<CudaPlan> PlanFusionForCuda(const Graph& graph, PlannerOptions options, const CudaTarget& target);

// Lowers and emits every group of `plan`. `prefix` keeps kernel names of several graphs
// of one build apart.
// `configs` (KernelFingerprint → configuration, from the tuner) overrides the templates'
// defaults for the kernels it names.
StatusOr<CudaProgram> BuildCudaProgram(const Graph& graph, const FusionPlan& plan, const std::vector<bool>& inlined,
                                       const std::string& prefix = "",
                                       const std::map<std::string, CudaKernelConfig>& configs = {},
                                       const CudaTarget& target = {});

}  // namespace tilefuse
