// The oracle and the comparison rules of the facade (tilefuse/tilefuse.h): what `demo` and
// a library user check compiled runs with.
#include <algorithm>

#include "reference/conditioning.h"
#include "reference/interpreter.h"
#include "testing/tensor_compare.h"
#include "tilefuse/tilefuse.h"

namespace tilefuse {

StatusOr<std::vector<Tensor>> RunReferenceInterpreter(const Graph& graph, const std::vector<Tensor>& inputs) {
  return RunReference(graph, inputs);
}

namespace {

Comparison Compare(const Tensor& actual, const Tensor& expected, const CompareOptions& o) {
  const bool overridden = o.rtol || o.atol;
  switch (o.rule) {
    case CompareRule::kElementwise: {
      if (!overridden) return CompareTensors(actual, expected);
      const Tolerance tol = ToleranceFor(expected.dtype());
      return CompareTensors(actual, expected, {o.rtol.value_or(tol.rtol), o.atol.value_or(tol.atol)});
    }
    case CompareRule::kKernels: {
      const DType computed_as = o.computed_as.value_or(expected.dtype());
      if (!overridden) return CompareWithReference(actual, expected, computed_as);
      Tolerance tol = ToleranceFor(computed_as);
      tol.atol = std::max(tol.atol, tol.rtol * MaxFiniteMagnitude(expected));
      return CompareTensors(actual, expected, {o.rtol.value_or(tol.rtol), o.atol.value_or(tol.atol)});
    }
    case CompareRule::kModel: {
      const double rtol = o.rtol.value_or(ModelRtolFor(o.computed_as.value_or(expected.dtype())));
      if (o.atol) return CompareTensors(actual, expected, {rtol, *o.atol});
      return CompareModelOutput(actual, expected, rtol);
    }
  }
  return CompareTensors(actual, expected);
}

}  // namespace

OutputComparison CompareOutput(const Tensor& actual, const Tensor& expected, const CompareOptions& options) {
  const Comparison c = Compare(actual, expected, options);
  return {c.pass, c.max_abs_err, c.max_rel_err, c.mismatches, c.reason, c.worst_index, c.worst_actual, c.worst_expected, c.worst_ratio};
}

double RatioToTolerance(const OutputComparison& c) {
  Comparison internal;
  internal.pass = c.pass;
  internal.worst_ratio = c.worst_ratio;
  internal.worst_index = c.worst_index;
  internal.mismatches = c.mismatches;
  return RatioToTolerance(internal);
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
