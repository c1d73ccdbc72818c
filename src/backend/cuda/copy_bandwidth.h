// The device's measured copy bandwidth: the ceiling memory-bound kernels are judged by.
#pragma once

#include "backend/cuda/cuda_driver.h"

namespace tilefuse {

// A device-to-device copy of `bytes` (default 1 GiB), median of 20 after 5 warm-ups,
// in bytes per second counting bytes read plus bytes written.
StatusOr<double> MeasureCopyBandwidth(CudaDevice* device, int64_t bytes = int64_t{1} << 30);

}  // namespace tilefuse
