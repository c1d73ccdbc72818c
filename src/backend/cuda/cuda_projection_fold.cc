#include "backend/cuda/cuda_projection_fold.h"

namespace tilefuse {

bool FoldProjection(const Graph& g, const GemmTemplateKernel& product, AttentionTemplateKernel& attention) {
  if (attention.output < 0 || attention.nq != 1 || attention.dv <= 0 || product.k % attention.dv != 0) return false;
  const int out = attention.buffers[static_cast<size_t>(attention.output)].node;
  if (product.a != out || product.a_view || product.a_conv || product.a_mn_major >= 0) return false;
  const int64_t heads = product.k / attention.dv;
  // A as [rows][heads · dv] over the output's [batch..][1][dv]: batch entry b·heads + h is row b's head h.
  if (NumElements(attention.batch_shape) != product.rows * heads || NumElements(g.node(out).shape) != product.rows * product.k) return false;
  if (product.n != heads * 64) return false;
  attention.projection = DecodeProjectionFold{product, static_cast<int>(heads)};
  return true;
}

}  // namespace tilefuse
