// The measurement harness both backends' executables share: what a whole run and each
// plan group cost, as the tuner, `bench` and `demo` read them.
#pragma once

#include <vector>

#include "runtime/executable.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse {

// The median of `samples` (0 when empty).
double MedianOf(std::vector<double> samples);

// Each plan group's time in one run (µs, plan order): the median over several runs timed
// step by step (Executable::Run with timings), the first run a warm-up.
StatusOr<std::vector<double>> GroupTimesUs(Executable& executable, const std::vector<Tensor>& inputs);

}  // namespace tilefuse
