// ResNet's stem at batch 10 (tests/gemm/gemm_conv_stem_constant_weight_f32, or stem_bf16.onnxtxt
// with -DBF16): the padded NHWC copy and the im2col prologue as generated for CUDA (KERNELS, the
// file run.sh cuts from the dump), run on the host, every block and thread in turn, and compared
// element by element with the im2col computed here. Outputs are poisoned with NaN first.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};
static Dim3 blockIdx, blockDim, threadIdx, gridDim;
#define __global__
#define __launch_bounds__(...)
#define __restrict__

// The device library's helpers these kernels call, for the host.
namespace tf {
inline void tf_await_prior_grid() {}
inline float tf_cvt_f32(float x) { return x; }
inline float tf_pack_f32(float x) { return x; }
inline float tf_cvt_bf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t tf_pack_bf16(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
inline uint32_t tf_pack2_bf16(float lo, float hi) { return tf_pack_bf16(lo) | (static_cast<uint32_t>(tf_pack_bf16(hi)) << 16); }
template <int N, typename T>
inline void tf_vstore(T* p, const T* v) {
  for (int i = 0; i < N; ++i) p[i] = v[i];
}
template <typename T, typename L, typename H>
inline T tf_clamp(T x, L lo, H hi) {
  return x < static_cast<T>(lo) ? static_cast<T>(lo) : (x > static_cast<T>(hi) ? static_cast<T>(hi) : x);
}
inline float select(float c, float a, float b) { return c != 0 ? a : b; }
inline float logical_and(float a, float b) { return (a != 0 && b != 0) ? 1.f : 0.f; }
#include KERNELS
}  // namespace tf

#ifdef BF16
using Element = uint16_t;
constexpr int kPadded = 152;
Element FromFloat(float f) { return tf::tf_pack_bf16(f); }
const Element kPoison = 0x7fc1;  // a NaN
bool Unwritten(Element e) { return e == kPoison; }
bool Same(Element got, Element want) { return got == want || (got == 0x8000 && want == 0); }
#else
using Element = float;
constexpr int kPadded = 148;
Element FromFloat(float f) { return f; }
const Element kPoison = NAN;
bool Unwritten(Element e) { return std::isnan(e); }
bool Same(Element got, Element want) { return got == want; }
#endif

template <typename F>
void Launch(F kernel, unsigned grid, unsigned block) {
  gridDim.x = grid;
  blockDim.x = block;
  for (unsigned b = 0; b < grid; ++b)
    for (unsigned t = 0; t < block; ++t) {
      blockIdx.x = b;
      threadIdx.x = t;
      kernel();
    }
}

int main() {
  const int n_images = 10, channels = 3, height = 224, width = 224, out_h = 112, out_w = 112, k_real = 147;
  std::vector<Element> x(n_images * channels * height * width);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (Element& v : x) v = FromFloat(uniform(rng));
  std::vector<Element> staged(n_images * 230 * 230 * channels, kPoison);
  std::vector<Element> a(static_cast<size_t>(n_images) * out_h * out_w * kPadded, kPoison);
  // Grid-stride loops: any grid covers the elements; odd sizes make the strides matter.
  Launch([&] { tf::tf_group0_pointwise(x.data(), staged.data()); }, 97, 256);
  Launch([&] { tf::tf_group1_gemm_prologue0(staged.data(), a.data()); }, 131, 256);
  size_t wrong = 0, unwritten = 0;
  for (int n = 0; n < n_images; ++n)
    for (int oh = 0; oh < out_h; ++oh)
      for (int ow = 0; ow < out_w; ++ow) {
        const size_t row = (static_cast<size_t>(n) * out_h + oh) * out_w + ow;
        for (int k = 0; k < kPadded; ++k) {
          Element want = FromFloat(0);
          if (k < k_real) {  // columns (kh, kw, c), c fastest; zero outside the image and past K
            const int kh = k / 21, kw = (k / 3) % 7, c = k % 3, ih = oh * 2 + kh - 3, iw = ow * 2 + kw - 3;
            if (ih >= 0 && ih < height && iw >= 0 && iw < width) want = x[((n * channels + c) * height + ih) * width + iw];
          }
          const Element got = a[row * kPadded + k];
          if (Unwritten(got)) ++unwritten;
          else if (!Same(got, want)) ++wrong;
        }
      }
  std::printf("%s: %zu elements, %zu wrong, %zu unwritten\n", sizeof(Element) == 2 ? "bf16" : "f32", a.size(), wrong, unwritten);
  return wrong || unwritten;
}
