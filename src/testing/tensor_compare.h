// Tensor comparison for `tilefuse run --check`, `demo` and the tests: an element matches
// when |actual - expected| <= atol + rtol * |expected| (numpy.allclose, as the ONNX
// backend tests use it), with tolerances chosen by dtype:
//   f64        rtol 1e-9, atol 1e-12   (both sides computed in f64)
//   f32        rtol 1e-3, atol 1e-7    (the ONNX backend-test defaults)
//   f16, bf16  rtol 1e-2, atol 1e-3 / 1e-2
//   integers, bool: exact
// NaN matches only NaN at the same place, and an infinity only the same infinity. A
// shape or dtype difference is a mismatch.
#pragma once

#include <cstdint>
#include <string>

#include "tilefuse/tensor.h"

namespace tilefuse {

struct Tolerance {
  double rtol = 0;
  double atol = 0;
};
Tolerance ToleranceFor(DType dtype);

struct Comparison {
  bool pass = false;
  double max_abs_err = 0;  // over elements where both sides are finite
  double max_rel_err = 0;  // |a - e| / |e|, over finite elements with e != 0
  int64_t mismatches = 0;  // elements outside tolerance, NaN or infinity disagreements
  std::string reason;      // empty on pass; else what differs first
  // The element nearest to (or furthest past) its tolerance: |a - e| / (atol + rtol·|e|)
  // largest; -1 when every pair is equal or not finite.
  int64_t worst_index = -1;
  double worst_actual = 0, worst_expected = 0;
  // That element's |a - e| / (atol + rtol·|e|): <= 1 passes. +inf when a NaN or infinity
  // disagrees (or a shape or dtype differs).
  double worst_ratio = 0;
};

Comparison CompareTensors(const Tensor& actual, const Tensor& expected);
// A comparison's worst element in units of its tolerance, as one number: <= 1 when it
// passes, > 1 when it fails (a NaN or shape difference: +inf).
double RatioToTolerance(const Comparison& c);
// The largest |value| among a tensor's finite elements (0 when none).
double MaxFiniteMagnitude(const Tensor& t);
Comparison CompareTensors(const Tensor& actual, const Tensor& expected, const Tolerance& tol);

// Generated kernels (computing in the output's precision, e.g. f32 BLAS sums) against
// the f64 reference interpreter: the dtype's rtol, and an atol of rtol times the
// largest |expected| of the tensor, since a long dot product's rounding scales with its
// terms, not with its (possibly cancelled, near-zero) result.
Comparison CompareWithReference(const Tensor& actual, const Tensor& expected);
// The same with the rtol of `computed_as`: f32 outputs of TF32 matmuls (--precision high)
// are held to f16's, whose mantissa TF32 has.
Comparison CompareWithReference(const Tensor& actual, const Tensor& expected, DType computed_as);

// The general norm-wise form: |a - e| <= tol.atol * max(1, max|expected|) + tol.rtol * |e|.
Comparison CompareNormwise(const Tensor& actual, const Tensor& expected, Tolerance tol);

// The whole-model rule, for a model's outputs against expected outputs computed elsewhere
// (onnxruntime, PyTorch): each element's error relative to its output's scale,
// |a - e| <= r · max|e| + r · |e|, r = ModelRtolFor(dtype) — f64 1e-9, f32 1e-4, f16/bf16 2e-2.
// Two correct f32 implementations of a transformer differ by ~1e-6 of the scale (summation
// order); a wrong kernel by far more. The node-test rule (CompareTensors) would fail the
// near-zero elements of such outputs on the 1e-7 atol.
double ModelRtolFor(DType dtype);
Comparison CompareModelOutput(const Tensor& actual, const Tensor& expected, double rtol);

}  // namespace tilefuse
