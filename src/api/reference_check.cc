// The oracle and the comparison rules of the facade (tilefuse/tilefuse.h): what `demo` and
// a library user check compiled runs with.
#include "reference/conditioning.h"
#include "reference/interpreter.h"
#include "testing/tensor_compare.h"
#include "tilefuse/tilefuse.h"

namespace tilefuse {

StatusOr<std::vector<Tensor>> RunReferenceInterpreter(const Graph& graph, const std::vector<Tensor>& inputs) {
  return RunReference(graph, inputs);
}

OutputComparison CompareOutput(const Tensor& actual, const Tensor& expected, CompareRule rule) {
  const Comparison c =
      rule == CompareRule::kKernels ? CompareWithReference(actual, expected) : CompareTensors(actual, expected);
  return {c.pass, c.max_abs_err, c.max_rel_err, c.mismatches, c.reason};
}

StatusOr<OutputConditioning> MeasureOutputConditioning(const Graph& graph, const std::vector<Tensor>& inputs,
                                                       const std::vector<Tensor>& expected, const ToleranceRatio& ratio) {
  ASSIGN_OR_RETURN(Sensitivity s, MeasureSensitivity(graph, inputs, expected, ComputePrecision(graph), ratio));
  return OutputConditioning{std::move(s.ratios), std::move(s.summaries)};
}

bool ConditioningExplainsFailure(double kernel_ratio, double sensitivity_ratio) {
  return ExplainedByConditioning(kernel_ratio, sensitivity_ratio);
}

}  // namespace tilefuse
