// The device's measured copy bandwidth: the ceiling memory-bound kernels are judged by.
#pragma once

#include "backend/cuda/cuda_driver.h"

namespace tilefuse {

// A device-to-device copy of `bytes` (default 1 GiB) timed as MeasureCopyMicroseconds does,
// median of 20, in bytes per second counting bytes read plus bytes written.
StatusOr<double> MeasureCopyBandwidth(CudaDevice* device, int64_t bytes = int64_t{1} << 30);

// The median time in microseconds of one device-to-device copy of `bytes`, timed as the
// benchmarks time kernels (queued ahead of the GPU, queued_timing.h), source and destination
// rotated over enough buffers that no copy finds its data in L2. What a kernel that reads
// `bytes` and writes as many could take at best: below a few hundred MB a copy reaches less
// than the 1 GiB copy's rate too (its ramp and tail weigh more).
StatusOr<double> MeasureCopyMicroseconds(CudaDevice* device, int64_t bytes, int repeats);

// MeasureCopyMicroseconds of a copy moving `moved_bytes` in all (read plus written, as the
// benchmarks count a kernel's bytes): the best a kernel moving as many could take.
StatusOr<double> MeasureSameSizeCopyMicroseconds(CudaDevice* device, double moved_bytes, int repeats);

}  // namespace tilefuse
