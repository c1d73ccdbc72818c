#include "testing/tensor_compare.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>


namespace tilefuse {

Tolerance ToleranceFor(DType dtype) {
  switch (dtype) {
    case DType::kF64: return {1e-9, 1e-12};
    case DType::kF32: return {1e-3, 1e-7};
    case DType::kF16: return {1e-2, 1e-3};
    case DType::kBF16: return {1e-2, 1e-2};
    // One step of the 8-bit grid (2^-3, 2^-2 relative; the smallest subnormal absolute): a
    // value the kernel computes in f32 can round the other way from a near tie.
    case DType::kF8E4M3: return {0.125, 0x1p-9};
    case DType::kF8E5M2: return {0.25, 0x1p-16};
    case DType::kF8E4M3Fnuz: return {0.125, 0x1p-10};
    case DType::kF8E5M2Fnuz: return {0.25, 0x1p-17};
    default: return {0, 0};  // integers and bool compare exactly
  }
}

namespace {

// Why one element differs, or "" when it matches. Also folds the element into the
// running maxima when both values are finite.
std::string CompareElement(int64_t index, double actual, double expected, const Tolerance& tol, Comparison& result,
                           double& worst_ratio) {
  bool actual_nan = std::isnan(actual), expected_nan = std::isnan(expected);
  if (actual_nan || expected_nan) {
    if (actual_nan && expected_nan) return "";
    return fmt::format("{} where {} is expected", actual, expected);
  }
  if (std::isinf(actual) || std::isinf(expected)) {
    if (actual == expected) return "";
    return fmt::format("{} where {} is expected", actual, expected);
  }
  double abs_err = std::fabs(actual - expected);
  result.max_abs_err = std::max(result.max_abs_err, abs_err);
  if (expected != 0) result.max_rel_err = std::max(result.max_rel_err, abs_err / std::fabs(expected));
  const double allowed = tol.atol + tol.rtol * std::fabs(expected);
  const double ratio = allowed > 0 ? abs_err / allowed : (abs_err > 0 ? HUGE_VAL : 0);
  if (abs_err > 0 && (result.worst_index < 0 || ratio > worst_ratio)) {
    worst_ratio = ratio;
    result.worst_index = index;
    result.worst_actual = actual;
    result.worst_expected = expected;
  }
  if (abs_err <= allowed) return "";
  return fmt::format("{} where {} is expected (abs err {:.3g})", actual, expected, abs_err);
}

}  // namespace

Comparison CompareTensors(const Tensor& actual, const Tensor& expected) {
  return CompareTensors(actual, expected, ToleranceFor(expected.dtype()));
}

double RatioToTolerance(const Comparison& c) { return c.pass ? std::min(c.worst_ratio, 1.0) : std::max(c.worst_ratio, 1.0 + 1e-12); }

double MaxFiniteMagnitude(const Tensor& t) {
  double max_abs = 0;
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    double v = std::fabs(t.GetDouble(i));
    if (std::isfinite(v)) max_abs = std::max(max_abs, v);
  }
  return max_abs;
}

Comparison CompareWithReference(const Tensor& actual, const Tensor& expected) {
  return CompareWithReference(actual, expected, expected.dtype());
}

Comparison CompareWithReference(const Tensor& actual, const Tensor& expected, DType computed_as) {
  Tolerance tol = ToleranceFor(computed_as);
  tol.atol = std::max(tol.atol, tol.rtol * MaxFiniteMagnitude(expected));
  return CompareTensors(actual, expected, tol);
}

double ModelRtolFor(DType dtype) {
  switch (dtype) {
    case DType::kF64: return 1e-9;
    case DType::kF32: return 1e-4;
    case DType::kF16: case DType::kBF16: return 2e-2;
    case DType::kF8E4M3: case DType::kF8E4M3Fnuz: return 0.125;
    case DType::kF8E5M2: case DType::kF8E5M2Fnuz: return 0.25;
    default: return 0;
  }
}

Comparison CompareModelOutput(const Tensor& actual, const Tensor& expected, double rtol) {
  return CompareTensors(actual, expected, {rtol, rtol * MaxFiniteMagnitude(expected)});
}

Comparison CompareNormwise(const Tensor& actual, const Tensor& expected, Tolerance tol) {
  tol.atol *= std::max(1.0, MaxFiniteMagnitude(expected));
  return CompareTensors(actual, expected, tol);
}

Comparison CompareTensors(const Tensor& actual, const Tensor& expected, const Tolerance& tol) {
  Comparison result;
  if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape()) {
    result.reason = fmt::format("got {}{} but expected {}{}", DTypeName(actual.dtype()), ShapeToString(actual.shape()),
                                DTypeName(expected.dtype()), ShapeToString(expected.shape()));
    result.mismatches = std::max(actual.num_elements(), expected.num_elements());
    result.worst_ratio = HUGE_VAL;
    return result;
  }
  int64_t first_mismatch = -1;
  double worst_ratio = 0;
  for (int64_t i = 0; i < expected.num_elements(); ++i) {
    std::string why = CompareElement(i, actual.GetDouble(i), expected.GetDouble(i), tol, result, worst_ratio);
    if (why.empty()) continue;
    if (!std::isfinite(actual.GetDouble(i)) || !std::isfinite(expected.GetDouble(i))) result.worst_ratio = HUGE_VAL;
    if (first_mismatch < 0) {
      first_mismatch = i;
      result.reason = fmt::format("element {}: {}", i, why);
    }
    ++result.mismatches;
  }
  result.pass = result.mismatches == 0;
  result.worst_ratio = std::max(result.worst_ratio, worst_ratio);
  if (!result.pass) {
    result.reason = fmt::format("{} of {} elements differ (rtol {:g}, atol {:g}); first at {}", result.mismatches,
                                expected.num_elements(), tol.rtol, tol.atol, result.reason);
  }
  return result;
}

}  // namespace tilefuse
