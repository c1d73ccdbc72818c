#include "backend/cuda/queued_timing.h"

#include <algorithm>
#include <chrono>

#include "backend/cuda/cuda_handles.h"

namespace tilefuse {

namespace {

// Calls queued behind one sleep: each is a launch or two and a pair of events, far below
// the thousands of entries a stream's queue holds.
constexpr int kChunk = 20;

// The sleep: one thread spinning on the GPU's nanosecond timer. PTX, so the driver
// compiles it for whatever GPU this is, with no NVRTC and no cache.
constexpr char kSleepPtx[] = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry tf_timing_sleep(.param .u64 nanoseconds) {
  .reg .pred %p;
  .reg .u64 %start, %now, %elapsed, %wait;
  ld.param.u64 %wait, [nanoseconds];
  mov.u64 %start, %globaltimer;
SPIN:
  mov.u64 %now, %globaltimer;
  sub.u64 %elapsed, %now, %start;
  setp.lt.u64 %p, %elapsed, %wait;
  @%p bra SPIN;
  ret;
}
)";

class SleepKernel {
 public:
  explicit SleepKernel(const CudaDevice& device) : device_(device) {}
  ~SleepKernel() {
    if (module_) device_.api().cuModuleUnload(module_);
  }
  Status Load() {
    const CudaDriverApi& api = device_.api();
    RETURN_IF_ERROR(device_.Check(api.cuModuleLoadData(&module_, kSleepPtx), "loading the timing sleep (PTX)"));
    return device_.Check(api.cuModuleGetFunction(&function_, module_, "tf_timing_sleep"), "cuModuleGetFunction tf_timing_sleep");
  }
  Status Enqueue(double seconds) const {
    uint64_t nanoseconds = static_cast<uint64_t>(seconds * 1e9);
    void* params[] = {&nanoseconds};
    return device_.Check(device_.api().cuLaunchKernel(function_, 1, 1, 1, 1, 1, 1, 0, device_.stream(), params, nullptr), "launching the timing sleep");
  }

 private:
  const CudaDevice& device_;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
};

}  // namespace

StatusOr<std::vector<double>> TimeQueuedCalls(CudaDevice& device, int count, const std::function<Status(int)>& enqueue) {
  const CudaDriverApi& api = device.api();
  RETURN_IF_ERROR(device.MakeCurrent());
  SleepKernel sleep(device);
  RETURN_IF_ERROR(sleep.Load());
  std::vector<CudaEvent> begins, ends;
  for (int i = 0; i < std::min(count, kChunk); ++i) {
    ASSIGN_OR_RETURN(CudaEvent b, CreateCudaEvent(device));
    ASSIGN_OR_RETURN(CudaEvent e, CreateCudaEvent(device));
    begins.push_back(std::move(b));
    ends.push_back(std::move(e));
  }
  CUstream stream = device.stream();
  // The host's time to queue one call, guessed high for the first chunk and then measured:
  // the sleep lasts twice a chunk's queueing plus a millisecond.
  double host_seconds_per_call = 100e-6;
  std::vector<double> us;
  for (int start = 0; start < count; start += kChunk) {
    const int n = std::min(kChunk, count - start);
    RETURN_IF_ERROR(device.Check(api.cuStreamSynchronize(stream), "waiting for the GPU before a timed chunk"));
    RETURN_IF_ERROR(sleep.Enqueue(1e-3 + 2 * n * host_seconds_per_call));
    const auto queue_start = std::chrono::steady_clock::now();
    Status queued = Status::Ok();
    int done = 0;
    for (; done < n && queued.ok(); ++done) {
      api.cuEventRecord(begins[done].get(), stream);
      queued = enqueue(start + done);
      api.cuEventRecord(ends[done].get(), stream);
    }
    host_seconds_per_call = std::chrono::duration<double>(std::chrono::steady_clock::now() - queue_start).count() / std::max(1, done);
    Status finished = device.Check(api.cuStreamSynchronize(stream), "running the timed calls");
    RETURN_IF_ERROR(queued);
    RETURN_IF_ERROR(finished);
    for (int i = 0; i < n; ++i) {
      float ms = 0;
      RETURN_IF_ERROR(device.Check(api.cuEventElapsedTime(&ms, begins[i].get(), ends[i].get()), "cuEventElapsedTime"));
      us.push_back(ms * 1000.0);
    }
  }
  return us;
}

}  // namespace tilefuse
