// Many small device-to-device copies as one kernel launch: the values RunOnDevice reads and
// writes through the model's own buffers (a decode step's fresh token ids, position and
// logits, whose pointers change every call; cuda_executable.cc) and the outputs it copies
// after a run. One cuMemcpyAsync each cost GPT-2's decode step 74 host calls and ~85 us of
// device time (H200, 2026-12-05); the table rides in the kernel's parameters, so a launch
// needs no upload and the copies run side by side.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/cuda_driver.h"
#include "tilefuse/status.h"

namespace tilefuse {

struct StagedCopy {
  CUdeviceptr from = 0, to = 0;
  int64_t bytes = 0;
};

// Copies that fit one launch's parameters; more go in further launches.
inline constexpr size_t kStagedCopiesPerLaunch = 128;

// The copy kernel's CUDA source (compiled by NVRTC for the device; CI compiles it for sm_90a).
const std::string& StagedCopiesSource();

// Queues `copies` on `stream`: those at 16-byte aligned addresses in one launch per
// kStagedCopiesPerLaunch, any other by the copy engine; all by the copy engine, in order,
// where one's destination is another's source. Partly overlapping ranges are not taken. The
// kernel is compiled (or found in the kernel cache under `cache_dir`) and loaded on first use,
// once per device and process.
Status LaunchStagedCopies(const CudaDevice& device, const std::string& cache_dir, const std::vector<StagedCopy>& copies,
                          CUstream stream);

}  // namespace tilefuse
