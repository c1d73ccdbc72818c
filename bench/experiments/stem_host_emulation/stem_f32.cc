// ResNet stem (tests/gemm/gemm_conv_stem_constant_weight_f32, batch 10): the padded NHWC copy and the
// im2col prologue as generated for CUDA, run on the host (every block and thread serially) and
// compared element by element with the im2col computed here. See run.sh.
// Host emulation of generated pointwise CUDA kernels: every (block, thread) run serially.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <vector>
#include <random>
#include <algorithm>
struct Dim3 { unsigned x = 1, y = 1, z = 1; };
static Dim3 blockIdx, blockDim, threadIdx, gridDim;
#define __global__
#define __launch_bounds__(...)
#define __restrict__
namespace tf {
inline void tf_await_prior_grid() {}
inline float tf_cvt_f32(float x) { return x; }
inline float tf_pack_f32(float x) { return x; }
template <int N, typename T> inline void tf_vstore(T* p, const T* v) { for (int i = 0; i < N; ++i) p[i] = v[i]; }
template <typename T, typename L, typename H> inline T tf_clamp(T x, L lo, H hi) { return x < (T)lo ? (T)lo : (x > (T)hi ? (T)hi : x); }
inline float select(float c, float a, float b) { return c != 0 ? a : b; }
inline float logical_and(float a, float b) { return (a != 0 && b != 0) ? 1.f : 0.f; }
#include KERNELS
}  // namespace tf
template <typename F> void Launch(F f, unsigned grid, unsigned block) {
  gridDim.x = grid; blockDim.x = block;
  for (unsigned b = 0; b < grid; ++b) for (unsigned t = 0; t < block; ++t) { blockIdx.x = b; threadIdx.x = t; f(); }
}
int main() {
  const int N = 10, C = 3, H = 224, W = 224, OH = 112, OW = 112, K = 147, KP = 148;
  std::vector<float> x(N * C * H * W);
  std::mt19937 rng(1); std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : x) v = u(rng);
  std::vector<float> staged(N * 230 * 230 * C, NAN), a((size_t)N * OH * OW * KP, NAN);
  Launch([&] { tf::tf_group0_pointwise(x.data(), staged.data()); }, 97, 256);
  Launch([&] { tf::tf_group1_gemm_prologue0(staged.data(), a.data()); }, 131, 256);
  size_t bad = 0, nans = 0;
  for (int n = 0; n < N; ++n) for (int oh = 0; oh < OH; ++oh) for (int ow = 0; ow < OW; ++ow) {
    size_t row = ((size_t)n * OH + oh) * OW + ow;
    for (int k = 0; k < KP; ++k) {
      float want = 0;
      if (k < K) {
        int kh = k / 21, kw = (k / 3) % 7, c = k % 3;
        int ih = oh * 2 + kh - 3, iw = ow * 2 + kw - 3;
        if (ih >= 0 && ih < H && iw >= 0 && iw < W) want = x[((n * C + c) * H + ih) * W + iw];
      }
      float got = a[row * KP + k];
      if (std::isnan(got)) ++nans; else if (got != want) ++bad;
    }
  }
  std::printf("elements %zu, wrong %zu, unwritten %zu\n", a.size(), bad, nans);
  return bad || nans;
}
