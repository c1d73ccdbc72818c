#include "backend/cuda/cublaslt_matmul.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>

#include <algorithm>
#include <limits>

#include "backend/cuda/shared_library.h"

// The toolkit's headers give cuBLASLt's types and enums (the library itself is dlopen'ed).
// A build without them still links: Create then says there is no cuBLASLt support.
#if __has_include(<cublasLt.h>)
#include <cublasLt.h>

#include <map>
#include <mutex>
#include <type_traits>
#define TILEFUSE_HAVE_CUBLASLT 1
#endif

namespace tilefuse {

namespace {

constexpr const char* kSoname = "libcublasLt.so.13";

Status ValidateLtMatmul(const LtMatmulProblem& p, uint64_t a, uint64_t b, uint64_t d, uint64_t bias,
                        uint64_t workspace, size_t workspace_bytes) {
  auto invalid = [&](const char* why) {
    return InvalidArgument(fmt::format("cuBLASLt matmul {}: {}", DescribeLtMatmulProblem(p), why));
  };
  if (p.dtype != DType::kF32 && p.dtype != DType::kF16 && p.dtype != DType::kBF16) {
    return Unimplemented(fmt::format("cuBLASLt matmul {}: only f32, f16 and bf16", DescribeLtMatmulProblem(p)));
  }
  if (p.m < 1 || p.n < 1 || p.k < 1 || p.batch < 1) return invalid("every dimension must be at least 1");
  if (p.batch > std::numeric_limits<int32_t>::max()) return invalid("batch exceeds cuBLASLt's int32 batch count");
  if (p.batch_stride_a < 0 || p.batch_stride_b < 0) return invalid("negative batch stride");
  if ((p.lda != 0 && p.lda < (p.trans_a ? p.m : p.k)) || (p.ldb != 0 && p.ldb < (p.trans_b ? p.k : p.n)))
    return invalid("a leading dimension shorter than its stored rows");
  if (p.batch > 1 && p.batch_stride_d < p.m * p.n) return invalid("batch entries of D overlap (stride < m*n)");
  if (a == 0 || b == 0 || d == 0) return invalid("null operand");
  if (LtEpilogueHasBias(p.epilogue) && bias == 0) return invalid("bias epilogue without a bias pointer");
  if (workspace_bytes > 0 && workspace == 0) return invalid("null workspace of nonzero size");
  return Status::Ok();
}

}  // namespace

bool LtEpilogueHasBias(LtEpilogue epilogue) {
  return epilogue == LtEpilogue::kBias || epilogue == LtEpilogue::kBiasRelu ||
         epilogue == LtEpilogue::kBiasGelu;
}

const char* LtEpilogueName(LtEpilogue epilogue) {
  switch (epilogue) {
    case LtEpilogue::kNone: return "none";
    case LtEpilogue::kBias: return "bias";
    case LtEpilogue::kRelu: return "relu";
    case LtEpilogue::kBiasRelu: return "bias_relu";
    case LtEpilogue::kGelu: return "gelu";
    case LtEpilogue::kBiasGelu: return "bias_gelu";
  }
  return "?";
}

std::string DescribeLtMatmulProblem(const LtMatmulProblem& p) {
  return fmt::format("{}{} batch {} [{}x{}]{}·[{}x{}]{} strides a={} b={} d={}{} epilogue {}",
                     DTypeName(p.dtype), p.tf32 ? " (tf32)" : "", p.batch, p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k,
                     p.trans_a ? "ᵀ" : "", p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n,
                     p.trans_b ? "ᵀ" : "", p.batch_stride_a, p.batch_stride_b, p.batch_stride_d,
                     p.lda || p.ldb ? fmt::format(" rows a={} b={}", p.lda, p.ldb) : "", LtEpilogueName(p.epilogue));
}

StatusOr<std::unique_ptr<LtMatmul>> LtMatmul::Create() { return Create(CudaLibraryCandidates(kSoname)); }

LtMatmul::LtMatmul(std::unique_ptr<State> state) : state_(std::move(state)) {}

#ifdef TILEFUSE_HAVE_CUBLASLT

namespace {

// The cuBLASLt entry points we call, typed from the header's own declarations.
struct CublasLtApi {
  decltype(&cublasLtCreate) Create = nullptr;
  decltype(&cublasLtDestroy) Destroy = nullptr;
  decltype(&cublasLtGetStatusName) GetStatusName = nullptr;
  decltype(&cublasLtGetStatusString) GetStatusString = nullptr;
  decltype(&cublasLtMatmulDescCreate) MatmulDescCreate = nullptr;
  decltype(&cublasLtMatmulDescDestroy) MatmulDescDestroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) MatrixLayoutCreate = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy = nullptr;
  decltype(&cublasLtMatrixLayoutSetAttribute) MatrixLayoutSetAttribute = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic = nullptr;
  decltype(&cublasLtMatmul) Matmul = nullptr;
};

// The path the loader actually opened (a bare soname resolves through its search path).
std::string LoadedPath(void* library) {
  link_map* map = nullptr;
  if (::dlinfo(library, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr) return "?";
  return map->l_name;
}

template <typename Function>
Status Resolve(void* library, const std::string& path, const char* name, Function& function) {
  function = reinterpret_cast<Function>(::dlsym(library, name));
  if (function == nullptr) return Internal(fmt::format("{} has no symbol {}: not a cuBLASLt 13 library", path, name));
  return Status::Ok();
}

#define TF_RESOLVE(field, symbol) RETURN_IF_ERROR(Resolve(library, path, #symbol, api.field))

StatusOr<CublasLtApi> ResolveApi(void* library, const std::string& path) {
  CublasLtApi api;
  TF_RESOLVE(Create, cublasLtCreate);
  TF_RESOLVE(Destroy, cublasLtDestroy);
  TF_RESOLVE(GetStatusName, cublasLtGetStatusName);
  TF_RESOLVE(GetStatusString, cublasLtGetStatusString);
  TF_RESOLVE(MatmulDescCreate, cublasLtMatmulDescCreate);
  TF_RESOLVE(MatmulDescDestroy, cublasLtMatmulDescDestroy);
  TF_RESOLVE(MatmulDescSetAttribute, cublasLtMatmulDescSetAttribute);
  TF_RESOLVE(MatrixLayoutCreate, cublasLtMatrixLayoutCreate);
  TF_RESOLVE(MatrixLayoutDestroy, cublasLtMatrixLayoutDestroy);
  TF_RESOLVE(MatrixLayoutSetAttribute, cublasLtMatrixLayoutSetAttribute);
  TF_RESOLVE(MatmulPreferenceCreate, cublasLtMatmulPreferenceCreate);
  TF_RESOLVE(MatmulPreferenceDestroy, cublasLtMatmulPreferenceDestroy);
  TF_RESOLVE(MatmulPreferenceSetAttribute, cublasLtMatmulPreferenceSetAttribute);
  TF_RESOLVE(MatmulAlgoGetHeuristic, cublasLtMatmulAlgoGetHeuristic);
  TF_RESOLVE(Matmul, cublasLtMatmul);
  return api;
}

#undef TF_RESOLVE

// Largest power of two (capped at cuBLASLt's default 256) dividing a device address: the
// heuristic must only offer algorithms that accept the operands' actual alignment.
uint32_t AlignmentOf(uint64_t address) {
  if (address == 0) return 256;
  uint64_t lowest_bit = address & (~address + 1);
  return static_cast<uint32_t>(std::min<uint64_t>(lowest_bit, 256));
}

cudaDataType_t CudaDataType(DType dtype) {
  switch (dtype) {
    case DType::kF16: return CUDA_R_16F;
    case DType::kBF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

cublasLtEpilogue_t CublasLtEpilogue(LtEpilogue epilogue) {
  switch (epilogue) {
    case LtEpilogue::kNone: return CUBLASLT_EPILOGUE_DEFAULT;
    case LtEpilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case LtEpilogue::kRelu: return CUBLASLT_EPILOGUE_RELU;
    case LtEpilogue::kBiasRelu: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case LtEpilogue::kGelu: return CUBLASLT_EPILOGUE_GELU;
    case LtEpilogue::kBiasGelu: return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// Everything that selects descriptors and an algorithm. Alignments matter because the
// heuristic's choice is only valid for operands at least as aligned as it was told.
struct PlanKey {
  LtMatmulProblem problem;
  uint32_t align_a = 0, align_b = 0, align_d = 0, align_bias = 0;
  size_t workspace_bytes = 0;
  auto operator<=>(const PlanKey&) const = default;
};

// Descriptors and the chosen algorithm for one PlanKey. cuBLASLt's operand 1 is our B and
// its operand 2 our A (see the header: it computes Dᵀ = op(B)ᵀ·op(A)ᵀ column-major).
struct Plan {
  const CublasLtApi* api = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout_b = nullptr, layout_a = nullptr, layout_d = nullptr;
  cublasLtMatmulAlgo_t algo{};

  explicit Plan(const CublasLtApi* api) : api(api) {}
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    for (cublasLtMatrixLayout_t layout : {layout_b, layout_a, layout_d}) {
      if (layout) api->MatrixLayoutDestroy(layout);
    }
    if (desc) api->MatmulDescDestroy(desc);
  }
};

}  // namespace

struct LtMatmul::State {
  CublasLtApi api;
  std::string path;
  cublasLtHandle_t handle = nullptr;
  std::mutex mutex;  // guards plans, and each plan's descriptor while a Run sets its bias
  std::map<PlanKey, std::unique_ptr<Plan>> plans;

  ~State() {
    plans.clear();
    if (handle) api.Destroy(handle);
  }

  // Internal status naming the call, cuBLASLt's status and (when there is one) the problem.
  Status Check(cublasStatus_t status, const char* call, const LtMatmulProblem* problem) const {
    if (status == CUBLAS_STATUS_SUCCESS) return Status::Ok();
    std::string message = fmt::format("cuBLASLt {} failed: {} ({})", call, api.GetStatusName(status),
                                      api.GetStatusString(status));
    if (problem) message += " for " + DescribeLtMatmulProblem(*problem);
    if (status == CUBLAS_STATUS_NOT_SUPPORTED) return Unimplemented(message);
    if (status == CUBLAS_STATUS_ALLOC_FAILED) return ResourceExhausted(message);
    return Internal(message);
  }

  Status MakeLayout(const LtMatmulProblem& p, int64_t rows, int64_t cols, int64_t stride, int64_t ld,
                    cublasLtMatrixLayout_t& out) const;
  StatusOr<std::unique_ptr<Plan>> MakePlan(const PlanKey& key, uint64_t bias) const;
};

Status LtMatmul::State::MakeLayout(const LtMatmulProblem& p, int64_t rows, int64_t cols, int64_t stride, int64_t ld,
                                   cublasLtMatrixLayout_t& out) const {
  // Column-major rows×cols with leading dimension rows (or `ld`, a view's row stride): the
  // row-major matrix read as its transpose (the caller passes rows = the row-major column count).
  RETURN_IF_ERROR(Check(api.MatrixLayoutCreate(&out, CudaDataType(p.dtype), rows, cols, ld > 0 ? ld : rows),
                        "MatrixLayoutCreate", &p));
  if (p.batch > 1) {
    int32_t batch = static_cast<int32_t>(p.batch);
    RETURN_IF_ERROR(Check(api.MatrixLayoutSetAttribute(out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                       sizeof(batch)), "MatrixLayoutSetAttribute(BATCH_COUNT)", &p));
    RETURN_IF_ERROR(Check(api.MatrixLayoutSetAttribute(out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                       &stride, sizeof(stride)),
                          "MatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)", &p));
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Plan>> LtMatmul::State::MakePlan(const PlanKey& key, uint64_t bias) const {
  const LtMatmulProblem& p = key.problem;
  auto plan = std::make_unique<Plan>(&api);
  // f32 data with CUBLAS_COMPUTE_32F is full f32, with COMPUTE_32F_FAST_TF32 TF32 tensor
  // cores; half types accumulate in f32 too.
  const cublasComputeType_t compute = p.dtype == DType::kF32 && p.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  RETURN_IF_ERROR(Check(api.MatmulDescCreate(&plan->desc, compute, CUDA_R_32F), "MatmulDescCreate", &p));
  auto set_desc = [&](cublasLtMatmulDescAttributes_t attribute, const void* value, size_t size, const char* name) {
    return Check(api.MatmulDescSetAttribute(plan->desc, attribute, value, size), name, &p);
  };
  int32_t trans_first = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  int32_t trans_second = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  uint32_t epilogue = CublasLtEpilogue(p.epilogue);
  RETURN_IF_ERROR(set_desc(CUBLASLT_MATMUL_DESC_TRANSA, &trans_first, sizeof(int32_t), "DescSetAttribute(TRANSA)"));
  RETURN_IF_ERROR(set_desc(CUBLASLT_MATMUL_DESC_TRANSB, &trans_second, sizeof(int32_t), "DescSetAttribute(TRANSB)"));
  RETURN_IF_ERROR(set_desc(CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue), "DescSetAttribute(EPILOGUE)"));
  if (LtEpilogueHasBias(p.epilogue)) {
    int32_t bias_type = CudaDataType(p.dtype);
    const void* bias_pointer = reinterpret_cast<const void*>(bias);  // the heuristic reads its alignment
    RETURN_IF_ERROR(set_desc(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type),
                             "DescSetAttribute(BIAS_DATA_TYPE)"));
    RETURN_IF_ERROR(set_desc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_pointer, sizeof(bias_pointer),
                             "DescSetAttribute(BIAS_POINTER)"));
  }
  // Stored shapes, column-major: B is n×k (k×n when trans_b), A is k×m (m×k when trans_a), D is n×m.
  RETURN_IF_ERROR(MakeLayout(p, p.trans_b ? p.k : p.n, p.trans_b ? p.n : p.k, p.batch_stride_b, p.ldb, plan->layout_b));
  RETURN_IF_ERROR(MakeLayout(p, p.trans_a ? p.m : p.k, p.trans_a ? p.k : p.m, p.batch_stride_a, p.lda, plan->layout_a));
  RETURN_IF_ERROR(MakeLayout(p, p.n, p.m, p.batch_stride_d, 0, plan->layout_d));

  cublasLtMatmulPreference_t preference = nullptr;
  RETURN_IF_ERROR(Check(api.MatmulPreferenceCreate(&preference), "MatmulPreferenceCreate", &p));
  std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, decltype(api.MatmulPreferenceDestroy)> preference_owner(preference, api.MatmulPreferenceDestroy);
  auto set_preference = [&](cublasLtMatmulPreferenceAttributes_t attribute, auto value, const char* name) {
    return Check(api.MatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value)), name, &p);
  };
  RETURN_IF_ERROR(set_preference(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t{key.workspace_bytes},
                                 "PreferenceSetAttribute(MAX_WORKSPACE_BYTES)"));
  RETURN_IF_ERROR(set_preference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b, "PreferenceSetAttribute(ALIGNMENT_A)"));
  RETURN_IF_ERROR(set_preference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a, "PreferenceSetAttribute(ALIGNMENT_B)"));
  RETURN_IF_ERROR(set_preference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_d, "PreferenceSetAttribute(ALIGNMENT_C)"));
  RETURN_IF_ERROR(set_preference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d, "PreferenceSetAttribute(ALIGNMENT_D)"));

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  RETURN_IF_ERROR(Check(api.MatmulAlgoGetHeuristic(handle, plan->desc, plan->layout_b, plan->layout_a, plan->layout_d,
                                                   plan->layout_d, preference, 1, &result, &found),
                        "MatmulAlgoGetHeuristic", &p));
  if (found == 0) {
    return Unimplemented(fmt::format("cuBLASLt has no algorithm for {} with {} bytes of workspace",
                                     DescribeLtMatmulProblem(p), key.workspace_bytes));
  }
  plan->algo = result.algo;
  return plan;
}

// The library stays loaded for the life of the process (never dlclose'd): cuBLASLt keeps
// per-process state that must not be unmapped under a live handle.
StatusOr<std::unique_ptr<LtMatmul>> LtMatmul::Create(const std::vector<std::string>& candidates) {
  ASSIGN_OR_RETURN(void* library, OpenFirstLibrary("cuBLASLt", "TILEFUSE_CUBLASLT", candidates));
  auto state = std::make_unique<State>();
  state->path = LoadedPath(library);
  ASSIGN_OR_RETURN(state->api, ResolveApi(library, state->path));
  RETURN_IF_ERROR(state->Check(state->api.Create(&state->handle), "Create", nullptr)
                      .WithContext(fmt::format("loaded {}", state->path)));
  return std::unique_ptr<LtMatmul>(new LtMatmul(std::move(state)));
}

LtMatmul::~LtMatmul() = default;

Status LtMatmul::Run(const LtMatmulProblem& problem, uint64_t a, uint64_t b, uint64_t d, uint64_t bias,
                     uint64_t workspace, size_t workspace_bytes, void* stream) {
  RETURN_IF_ERROR(ValidateLtMatmul(problem, a, b, d, bias, workspace, workspace_bytes));
  PlanKey key{problem, AlignmentOf(a), AlignmentOf(b), AlignmentOf(d), 0, workspace_bytes};
  // Only batch > 1 reads strides: one key for single products however callers fill them.
  if (problem.batch == 1) key.problem.batch_stride_a = key.problem.batch_stride_b = key.problem.batch_stride_d = 0;
  bool has_bias = LtEpilogueHasBias(problem.epilogue);
  if (has_bias) key.align_bias = AlignmentOf(bias);

  std::lock_guard<std::mutex> lock(state_->mutex);
  auto it = state_->plans.find(key);
  if (it == state_->plans.end()) {
    ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan, state_->MakePlan(key, bias));
    it = state_->plans.emplace(key, std::move(plan)).first;
  }
  Plan& plan = *it->second;
  if (has_bias) {
    const void* bias_pointer = reinterpret_cast<const void*>(bias);
    RETURN_IF_ERROR(state_->Check(state_->api.MatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                                     &bias_pointer, sizeof(bias_pointer)),
                                  "DescSetAttribute(BIAS_POINTER)", &problem));
  }
  const float one = 1.0f, zero = 0.0f;  // scale type is f32 for every dtype
  auto* d_pointer = reinterpret_cast<void*>(d);
  return state_->Check(
      state_->api.Matmul(state_->handle, plan.desc, &one, reinterpret_cast<const void*>(b), plan.layout_b,
                         reinterpret_cast<const void*>(a), plan.layout_a, &zero, d_pointer, plan.layout_d,
                         d_pointer, plan.layout_d, &plan.algo, reinterpret_cast<void*>(workspace), workspace_bytes,
                         static_cast<cudaStream_t>(stream)),
      "Matmul", &problem);
}

std::string LtMatmul::library_path() const { return state_->path; }

size_t LtMatmul::cached_plans() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->plans.size();
}

#else  // no <cublasLt.h> at build time

struct LtMatmul::State {};

StatusOr<std::unique_ptr<LtMatmul>> LtMatmul::Create(const std::vector<std::string>&) {
  return Unimplemented("this tilefuse was built without the CUDA toolkit headers: no cuBLASLt support");
}
LtMatmul::~LtMatmul() = default;
Status LtMatmul::Run(const LtMatmulProblem& problem, uint64_t a, uint64_t b, uint64_t d, uint64_t bias,
                     uint64_t workspace, size_t workspace_bytes, void*) {
  RETURN_IF_ERROR(ValidateLtMatmul(problem, a, b, d, bias, workspace, workspace_bytes));
  return Unimplemented("no cuBLASLt support in this build");
}
std::string LtMatmul::library_path() const { return ""; }
size_t LtMatmul::cached_plans() const { return 0; }

#endif

}  // namespace tilefuse
