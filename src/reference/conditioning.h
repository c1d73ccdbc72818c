// How well-conditioned a graph's outputs are for a check against the reference: how far
// legitimate computations of the same graph land from the reference's outputs, in units
// of the check's tolerance. A kernel's op need only be faithfully rounded and may sum in
// another order, so these are as right as the reference's own outputs:
//   - the reference on inputs moved by a few ulps of the compute precision (two patterns);
//   - every rounded intermediate moved by up to one, and up to two, ulps of its dtype (as
//     faithfully rounded ops, and libm's or the GPU's 2-ulp functions, may; three patterns
//     each; ReferenceRounding);
//   - sums, means and matmuls accumulated term by term in their dtype, in order (a plain
//     f32 loop, where the reference adds in f64).
// When these alone already leave the tolerance, a check that fails cannot tell a wrong
// kernel from a right one there: the differential fuzzer's judge calls such graphs
// ill-conditioned, and `tilefuse run --check` says so beside a failure.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tilefuse/dtype.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"

namespace tilefuse {

// Output `output` of a probe (`got`) against the reference's (`expected`), in units of
// the check's tolerance: <= 1 passes.
using ToleranceRatio = std::function<double(size_t output, const Tensor& got, const Tensor& expected)>;

struct Sensitivity {
  std::vector<double> ratios;          // per output, the worst probe
  std::vector<std::string> summaries;  // per output, e.g. "inputs moved by up to 4 f32 ulps: 0x, ..."
};

// Whether a check that a kernel failed by `kernel_ratio` times its tolerance is explained
// by the graph's conditioning: legitimate computations already fail it
// (`sensitivity_ratio` > 1) and the kernel is no further off than `factor` times their
// worst (a few random probes only sample the worst legitimate rounding).
constexpr double kConditioningExplainFactor = 10;
inline bool ExplainedByConditioning(double kernel_ratio, double sensitivity_ratio, double factor = kConditioningExplainFactor) {
  return sensitivity_ratio > 1 && kernel_ratio <= factor * sensitivity_ratio;
}

// The precision kernels compute `graph` in, by which the probes move its inputs: f64 for a
// graph whose every float value is f64, else f32.
DType ComputePrecision(const Graph& graph);

// `expected`: the reference's outputs on `inputs`; `compute`: ComputePrecision(graph).
StatusOr<Sensitivity> MeasureSensitivity(const Graph& graph, const std::vector<Tensor>& inputs, const std::vector<Tensor>& expected,
                                         DType compute, const ToleranceRatio& ratio);

}  // namespace tilefuse
