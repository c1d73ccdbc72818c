// Scalar semantics of the pointwise ops. The expressions in ops.def are written with
// these names; the reference interpreter instantiates them for double, and the code
// generators print the same expressions against device/host headers that define the
// same names for float and double. Keep the two in step: one name, one meaning.
#pragma once

#include <cmath>

namespace tilefuse::scalar {

using std::acos;
using std::asin;
using std::atan;
using std::atan2;
using std::ceil;
using std::cos;
using std::erf;
using std::exp;
using std::fabs;
using std::floor;
using std::fmod;
using std::log;
using std::pow;
using std::sin;
using std::sqrt;
using std::tanh;

template <typename T> T rsqrt(T a) { return T(1) / std::sqrt(a); }
template <typename T> T recip(T a) { return T(1) / a; }
template <typename T> T sigmoid(T a) { return T(1) / (T(1) + std::exp(-a)); }
template <typename T> T relu(T a) { return a < T(0) ? T(0) : a; }  // NaN propagates
template <typename T> T is_nan(T a) { return std::isnan(a) ? T(1) : T(0); }
template <typename T> T is_inf(T a) { return std::isinf(a) ? T(1) : T(0); }
// max/min propagate NaN, like numpy and PyTorch. `|`, not `||`: no short-circuit branch
// for the host compiler to if-convert in a vectorised loop that also does other work.
template <typename T> T max_nan(T a, T b) { return ((a != a) | (a > b)) ? a : b; }
template <typename T> T min_nan(T a, T b) { return ((a != a) | (a < b)) ? a : b; }
// Python-style modulo: the result takes the sign of the divisor.
template <typename T> T floor_mod(T a, T b) {
  T r = std::fmod(a, b);
  return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? r + b : r;
}
template <typename T> T logical_not(T a) { return a == T(0) ? T(1) : T(0); }
template <typename T> T logical_and(T a, T b) { return (a != T(0) && b != T(0)) ? T(1) : T(0); }
template <typename T> T logical_or(T a, T b) { return (a != T(0) || b != T(0)) ? T(1) : T(0); }
template <typename T> T logical_xor(T a, T b) { return ((a != T(0)) != (b != T(0))) ? T(1) : T(0); }
template <typename T> T compare_eq(T a, T b) { return a == b ? T(1) : T(0); }
template <typename T> T compare_lt(T a, T b) { return a < b ? T(1) : T(0); }
template <typename T> T compare_le(T a, T b) { return a <= b ? T(1) : T(0); }
template <typename T> T compare_gt(T a, T b) { return a > b ? T(1) : T(0); }
template <typename T> T compare_ge(T a, T b) { return a >= b ? T(1) : T(0); }
// The condition may have another type than the values (a bool mask over floats).
template <typename C, typename T> T select(C c, T x, T y) { return c != C(0) ? x : y; }

}  // namespace tilefuse::scalar
