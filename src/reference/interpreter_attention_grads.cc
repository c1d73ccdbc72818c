// Attention's gradients (attention_grad_q, _k, _v) computed directly in f64, the way
// FlashAttention's backward defines them, so that passes/attention_grads' rewrite into
// primitives is checked against an independent formula. Per (batch, query head h) with
// key/value head h / (H / Hk), for each visible pair (i, j):
//   P = exp(scale·q_i·k_j − lse_i)   dS = P·(dout_i·v_j − D_i)   D_i = dout_i·out_i
//   dQ_i += scale·dS·k_j             dK_j += scale·dS·q_i        dV_j += P·dout_i
// dK and dV add the query heads of a group into their shared key/value head. Masked pairs
// (causal, top-left: j > i) are skipped, which is P = 0.
#include "reference/interpreter_kernels.h"

#include <algorithm>
#include <cmath>

#include "support/check.h"

namespace tilefuse::interpreter {

namespace {

// The sizes of one attention: q [B, H, Nq, d], k [B, Hk, Nk, d], v [B, Hk, Nk, dv].
struct AttentionDims {
  int64_t batch, heads, kv_heads, queries, keys, d, dv;

  int64_t group() const { return heads / kv_heads; }
};

double Dot(const double* a, const double* b, int64_t n) {
  double sum = 0;
  for (int64_t c = 0; c < n; ++c) sum += a[c] * b[c];
  return sum;
}

// dst[0, n) += factor · src[0, n)
void AddScaled(double* dst, const double* src, double factor, int64_t n) {
  for (int64_t c = 0; c < n; ++c) dst[c] += factor * src[c];
}

// One query head's share of the gradient `op` asks for, added into `out`.
void AddHeadGradient(OpCode op, const AttentionDims& a, const std::vector<Operand>& in, double scale, bool causal,
                     int64_t batch, int64_t head, Values& out) {
  const int64_t kv_head = head / a.group();
  const int64_t q_row0 = (batch * a.heads + head) * a.queries;  // first query row of this head
  const int64_t k_row0 = (batch * a.kv_heads + kv_head) * a.keys;
  const double* dout = in[0].data() + q_row0 * a.dv;
  const double* q = in[1].data() + q_row0 * a.d;
  const double* k = in[2].data() + k_row0 * a.d;
  const double* v = in[3].data() + k_row0 * a.dv;
  const double* o = in[4].data() + q_row0 * a.dv;
  const double* lse = in[5].data() + q_row0;
  for (int64_t i = 0; i < a.queries; ++i) {
    const double delta = Dot(dout + i * a.dv, o + i * a.dv, a.dv);
    const int64_t visible_keys = causal ? std::min(i + 1, a.keys) : a.keys;
    for (int64_t j = 0; j < visible_keys; ++j) {
      const double p = std::exp(scale * Dot(q + i * a.d, k + j * a.d, a.d) - lse[i]);
      const double ds = p * (Dot(dout + i * a.dv, v + j * a.dv, a.dv) - delta);
      switch (op) {
        case OpCode::kAttentionGradQ: AddScaled(out.data() + (q_row0 + i) * a.d, k + j * a.d, scale * ds, a.d); break;
        case OpCode::kAttentionGradK: AddScaled(out.data() + (k_row0 + j) * a.d, q + i * a.d, scale * ds, a.d); break;
        case OpCode::kAttentionGradV: AddScaled(out.data() + (k_row0 + j) * a.dv, dout + i * a.dv, p, a.dv); break;
        default: TF_UNREACHABLE("not an attention gradient");
      }
    }
  }
}

}  // namespace

Status ComputeAttentionGrad(const Node& node, const std::vector<Operand>& in, Values& out) {
  TF_CHECK(IsAttentionGrad(node.op) && in.size() == 6);
  const Operand& q = in[1];
  const Operand& v = in[3];
  const AttentionDims dims{q.dim(0), q.dim(1), v.dim(1), q.dim(2), v.dim(2), q.dim(3), v.dim(3)};
  TF_CHECK(dims.kv_heads > 0 && dims.heads % dims.kv_heads == 0);
  std::fill(out.begin(), out.end(), 0.0);
  for (int64_t b = 0; b < dims.batch; ++b)
    for (int64_t h = 0; h < dims.heads; ++h)
      AddHeadGradient(node.op, dims, in, node.attrs.scale, node.attrs.causal, b, h, out);
  return Status::Ok();
}

}  // namespace tilefuse::interpreter
