#!/usr/bin/env python3
"""Writes the attention bench cases (issue 13, GPU flash attention): the graphs
(bench/cases/attention_*.onnxtxt, gpt_block_*.onnxtxt), their small correctness twins
(bench/cases/check/*.onnxtxt) and their entries in cases.json (other entries are kept as they
are, where they are). Re-running it rewrites the same files.

    python3 bench/cases/attention_cases.py

All bf16; every tensor is a graph input (no initializers), so the PyTorch peers get the same
random tensors as tilefuse. Attention is written by hand, in the form of
examples/causal_attention.onnxtxt, so the planner has to find it:

    scores = MatMul(q, Transpose(k, perm [0, 1, 3, 2]))
    scaled = Mul(scores, 1/sqrt(d))                       f32 constant cast to bf16
    causal: future = Equal(Trilu(ConstantOfShape(ones [n, n]), upper 0), 0)
            masked = Where(future, -1e9, scaled)           -1e9 cast to bf16
    probs  = Softmax(axis -1)
    out    = MatMul(probs, v)

Two families:
  attention_[causal_]bf16_b{B}h{H}n{N}d{D}   q, k, v [B, H, N, D] -> out [B, H, N, D]; peers: the
      formula op by op (eager), F.scaled_dot_product_attention (library), torch.compile(eager)
  gpt_block_bf16_b{B}t{T}d{D}h{H}             a pre-LayerNorm GPT block, the attention causal and
      by hand (see gpt_block_case); peers: eager, library = the same block in eager with
      F.scaled_dot_product_attention for the attention, torch.compile(eager), and compile_sdpa =
      torch.compile(library), torch.compile of the SDPA block (the target: >= 1.2x that)

Manifest fields beyond the GEMM cases' (see cases.json "about"):
  flops           attention: 4*B*H*N*N*D (Q.K^T and P.V), halved when causal (FlashAttention's
                  convention: the masked half is not counted); block: 24*B*T*D^2 (2*M*N*K of the
                  four linear layers, M = B*T: QKV D x 3D, out-proj D x D, up D x 4D, down 4D x D)
                  + 2*B*T^2*D (its causal attention, 4*B*H*T^2*(D/H) halved)
  attention       {batch, heads, seq, head_dim, causal}: what report.py's attention table keys on
  inputs[].std    the GPT blocks' weights and biases: 1/sqrt(fan_in), nn.Linear's scale; peers.py
                  multiplies its random normals by it (with std 1, q and k have a variance of
                  ~2D and the logits a std of ~2000 at D = 1024: the softmax is an argmax that bf16
                  rounding flips; the eager block at B2 T256 D1024 measured 5e-2 relative error
                  against f64 on a CPU, over peers.py's 1e-2 bar; 4.6e-3 with it, logits std ~2)
  peers.compile_sdpa   present: peers.py also times torch.compile of the "library" expression
  full_size_check false for every case here: the f64 reference interpreter materialises the
                  B*H*N*N scores (8.6 GB per f64 intermediate at B4 H16 N4096, several alive at
                  once) and takes minutes, so scripts/gpu-check.sh checks them through the twins
"""
import json
import math

import gemm_cases
from gemm_cases import COMPILE, bytes_moved, gelu_body, graph_text, manifest_json, tensor

HERE = gemm_cases.HERE
MANIFEST = gemm_cases.MANIFEST
NEG_BIG = "-1e9"  # the fill above the diagonal, as written in the graphs and the eager formula
COMPILE_SDPA = "torch.compile(library)"

# ANCHORS.md (H200, 2026-11-21): attention in TF/s (flops as above), the GPT block in µs.
ANCHORS_TFLOPS = {
    "attention_bf16_b4h16n4096d128": {"eager": 55, "library": 616},
    "attention_causal_bf16_b4h16n4096d128": {"eager": 19, "library": 537},
    "attention_bf16_b4h16n4096d64": {"eager": 27, "library": 460},
    "attention_causal_bf16_b4h16n4096d64": {"eager": 9, "library": 413},
}
ANCHORS_US = {
    "gpt_block_bf16_b8t2048d1024h16": {"eager": 7616, "library": 1026, "compile": 2857, "compile_sdpa": 980},
    "gpt_block_bf16_b4t4096d2048h16": {"eager": 17563, "library": 3369, "compile": 7925, "compile_sdpa": 3377},
}

# The GPT block twins scale each linear's product by a power of two near 1/sqrt(fan_in) (exact in
# bf16: 2^-3 at fan-in 128, 2^-4 at 512), nn.Linear's scale, before its bias. tilefuse run --check
# feeds uniform [-1, 1] inputs, weights included; unscaled, q and k had variance ~29, the logits a
# std of ~29 with 1/sqrt(64) (an argmax, which fused kernels and the reference flip: 95 of 25600
# outputs off by up to 5), and with the softmax damped instead (2^-7) the outputs reached |y| ~ 190
# through sums of values as large: the reference itself, every rounded intermediate moved by one
# bf16 ulp (reference/conditioning.h), missed the check by 2.6x its tolerance (CPU, seed 0), so the
# check passed correct kernels by luck of rounding and failed others as correct (a residual
# epilogue reading its product rounded, bench/results/2026-11-27-gemm-overlap.md).
def twin_linear_scale(fan_in):
    return 2.0 ** -round(math.log2(math.sqrt(fan_in)) - 0.01)

ABOUT_MARK = " Attention cases (attention_cases.py):"
ABOUT = (ABOUT_MARK + " attention_* are q, k, v [B, H, N, D] with the attention written by hand (MatMul, Mul by "
         "1/sqrt(D), for causal a Trilu/Equal/Where mask of -1e9, Softmax, MatMul); library = "
         "F.scaled_dot_product_attention; flops = 4*B*H*N*N*D, halved when causal (as FlashAttention reports it: "
         "the masked half is not counted). gpt_block_* are a pre-LayerNorm GPT block (LN, QKV linear, causal "
         "attention by hand, out-proj + residual, LN, Linear+GELU tanh, Linear + residual); library = the same block "
         "in eager with F.scaled_dot_product_attention(is_causal=True) for the attention; peers.compile_sdpa: also "
         "time torch.compile of that library block; flops = 24*B*T*D^2 (2*M*N*K of the four linears, M = B*T) + "
         "2*B*T^2*D (the causal attention, 4*B*H*T^2*(D/H) halved). attention: the attention's {batch, heads, seq, "
         "head_dim, causal}, for report.py's attention table; an input's std (the blocks' weights and biases: "
         "1/sqrt(fan_in), as nn.Linear initialises them): peers.py scales its random normals by it, else the "
         "softmax is an argmax that bf16 rounding flips and the peers fail their check; anchor_h200_us of the "
         "blocks: ANCHORS.md, H200, 2026-11-21 (library: eager with SDPA). full_size_check is false for all of "
         "them (the f64 reference would hold several B*H*N*N f64 tensors); the twins in check/ are checked instead.")


def attention_flops(batch, heads, seq, head_dim, causal):
    full = 4 * batch * heads * seq * seq * head_dim
    return full // 2 if causal else full


def attention_body(q, k, v, out, seq, head_dim, causal, prefix="", scale=None):
    """out = softmax(mask(q @ k^T * scale)) @ v, one ONNX op per step; q, k, v [.., seq, head_dim];
    scale 1/sqrt(head_dim) unless given."""
    p = prefix
    scale = 1 / math.sqrt(head_dim) if scale is None else scale
    body = []
    if causal:  # as examples/causal_attention.onnxtxt, the fill cast to bf16
        body += [f"{p}mask_shape = Constant <value = int64[2] {{{seq}, {seq}}}> ()",
                 f"{p}ones = ConstantOfShape <value = float[1] {{1.0}}> ({p}mask_shape)",
                 f"{p}lower = Trilu <upper = 0> ({p}ones)",
                 f"{p}zero = Constant <value = float {{0.0}}> ()",
                 f"{p}future = Equal ({p}lower, {p}zero)",
                 f"{p}neg_big_f32 = Constant <value = float {{{NEG_BIG}}}> ()",
                 f"{p}neg_big = Cast <to = 16> ({p}neg_big_f32)"]
    body += [f"{p}scale_f32 = Constant <value = float {{{scale!r}}}> ()",
             f"{p}scale = Cast <to = 16> ({p}scale_f32)",
             f"{p}k_t = Transpose <perm = [0, 1, 3, 2]> ({k})",
             f"{p}scores = MatMul ({q}, {p}k_t)",
             f"{p}scaled = Mul ({p}scores, {p}scale)"]
    logits = f"{p}scaled"
    if causal:
        body.append(f"{p}masked = Where ({p}future, {p}neg_big, {p}scaled)")
        logits = f"{p}masked"
    body += [f"{p}probs = Softmax <axis = -1> ({logits})", f"{out} = MatMul ({p}probs, {v})"]
    return body


def eager_attention(q, k, v, head_dim, causal):
    """The formula op by op in torch, over expressions q, k, v [.., N, D]."""
    scores = f"{q} @ {k}.transpose(-2, -1) * {1 / math.sqrt(head_dim)!r}"
    if causal:
        mask = f"torch.ones({k}.shape[-2], {k}.shape[-2], dtype=torch.bool, device={k}.device).triu(1)"
        scores = f"({scores}).masked_fill({mask}, {NEG_BIG})"
    return f"torch.softmax({scores}, dim=-1) @ {v}"


def attention_case(name, batch, heads, seq, head_dim, causal, why, check_twin=False):
    """softmax(mask(q @ k^T / sqrt(d))) @ v over q, k, v [batch, heads, seq, head_dim]."""
    shape = (batch, heads, seq, head_dim)
    inputs = [tensor("q", shape), tensor("k", shape), tensor("v", shape)]
    outputs = [tensor("out", shape)]
    kind = "causal attention" if causal else "attention"
    comment = [f"{kind.capitalize()} [batch, heads, seq, head_dim] = [{batch}, {heads}, {seq}, {head_dim}], bf16, {why}:",
               f"  out = softmax({'mask(' if causal else ''}q @ k^T / sqrt({head_dim}){')' if causal else ''}) @ v"]
    if causal:
        comment.append("The mask as in examples/causal_attention.onnxtxt: Trilu of ones -> Equal 0 -> Where fills -1e9 above the diagonal.")
    comment.append("Scale and fill are f32 constants cast to bf16 (folded on import).")
    if check_twin:
        comment.append("Correctness twin of the full-size attention bench cases (scripts/gpu-check.sh, tilefuse run --check).")
    entry = {"name": name, "file": f"{name}.onnxtxt", "inputs": inputs, "outputs": outputs,
             "bytes_moved": bytes_moved(inputs, outputs),
             "flops": attention_flops(batch, heads, seq, head_dim, causal),
             "attention": {"batch": batch, "heads": heads, "seq": seq, "head_dim": head_dim, "causal": causal},
             "peers": {"eager": eager_attention("q", "k", "v", head_dim, causal),
                       "library": f"F.scaled_dot_product_attention(q, k, v, is_causal={causal})",
                       "compile": COMPILE}}
    body = attention_body("q", "k", "v", "out", seq, head_dim, causal)
    return graph_text(name, comment, inputs, outputs, body), entry


def gpt_block_case(name, batch, tokens, d, heads, why, check_twin=False):
    """Pre-LayerNorm GPT block, bf16 inference, causal attention written by hand:

        h = x + merge_heads(attention(split_heads(LN1(x) @ w_qkv + b_qkv))) @ w_o + b_o
        y = h + gelu_tanh(LN2(h) @ w1 + b1) @ w2 + b2

    split_heads: Split of the last axis into q, k, v [B, T, D], each Reshape [B, T, H, D/H] and
    Transpose [0, 2, 1, 3] to [B, H, T, D/H]; merge_heads the inverse (Transpose, Reshape [B, T, D]).
    check_twin: each linear's product scaled by twin_linear_scale(fan_in) before its bias (see there)."""
    dh, d_ff = d // heads, 4 * d
    assert dh * heads == d
    inputs = [tensor("x", (batch, tokens, d)), tensor("ln1_scale", (d,)), tensor("ln1_bias", (d,)),
              tensor("w_qkv", (d, 3 * d)), tensor("b_qkv", (3 * d,)), tensor("w_o", (d, d)), tensor("b_o", (d,)),
              tensor("ln2_scale", (d,)), tensor("ln2_bias", (d,)),
              tensor("w1", (d, d_ff)), tensor("b1", (d_ff,)), tensor("w2", (d_ff, d)), tensor("b2", (d,))]
    for v in inputs:  # for peers.py's random normals: nn.Linear's scale, so the softmax is no argmax
        if v["name"][0] in "wb":
            v["std"] = 1 / math.sqrt(d_ff if v["name"] in ("w2", "b2") else d)
    outputs = [tensor("y", (batch, tokens, d))]

    def linear(product, out, a, w, bias, fan_in):
        if not check_twin:
            return [f"{product} = MatMul ({a}, {w})", f"{out} = Add ({product}, {bias})"]
        return [f"{product} = MatMul ({a}, {w})",
                f"{product}_scale_f32 = Constant <value = float {{{twin_linear_scale(fan_in)!r}}}> ()",
                f"{product}_scale = Cast <to = 16> ({product}_scale_f32)",
                f"{product}_scaled = Mul ({product}, {product}_scale)", f"{out} = Add ({product}_scaled, {bias})"]

    body = ["normed1 = LayerNormalization <axis = -1, epsilon = 1e-5> (x, ln1_scale, ln1_bias)"]
    body += linear("qkv_proj", "qkv", "normed1", "w_qkv", "b_qkv", d)
    body += ["q_flat, k_flat, v_flat = Split <axis = -1> (qkv)",
            f"heads_shape = Constant <value = int64[4] {{{batch}, {tokens}, {heads}, {dh}}}> ()"]
    for t in "qkv":
        body += [f"{t}_split = Reshape ({t}_flat, heads_shape)", f"{t} = Transpose <perm = [0, 2, 1, 3]> ({t}_split)"]
    scale = 1 / math.sqrt(dh)
    body += attention_body("q", "k", "v", "attn", tokens, dh, True, "attn_", scale)
    body += ["attn_t = Transpose <perm = [0, 2, 1, 3]> (attn)",
             f"model_shape = Constant <value = int64[3] {{{batch}, {tokens}, {d}}}> ()",
             "attn_merged = Reshape (attn_t, model_shape)"]
    body += linear("proj", "proj_biased", "attn_merged", "w_o", "b_o", d)
    body += ["h = Add (x, proj_biased)",
             "normed2 = LayerNormalization <axis = -1, epsilon = 1e-5> (h, ln2_scale, ln2_bias)"]
    body += linear("up", "up_biased", "normed2", "w1", "b1", d)
    body += gelu_body("up_biased", "g", "gelu_")
    body += linear("down", "down_biased", "g", "w2", "b2", d_ff)
    body += ["y = Add (h, down_biased)"]
    comment = [f"GPT block, {batch} x {tokens} tokens, d = {d}, {heads} heads of {dh}, d_ff = {d_ff}, bf16, {why}:",
               "  h = x + merge_heads(causal_attention(split_heads(LayerNorm(x) @ w_qkv + b_qkv))) @ w_o + b_o",
               "  y = h + gelu_tanh(LayerNorm(h) @ w1 + b1) @ w2 + b2",
               "split_heads: Split of the last axis into q, k, v, each Reshape [B, T, H, D/H] + Transpose [0, 2, 1, 3];",
               "merge_heads: Transpose [0, 2, 1, 3] + Reshape [B, T, D]. The attention by hand as in the attention_causal",
               "cases; LayerNormalization opset 17 (epsilon 1e-5); the GELU tanh form op by op as in gelu_tanh_bf16.onnxtxt."]
    if check_twin:
        comment += [f"Each linear's product is scaled by 2^-k near 1/sqrt(fan_in) before its bias ({twin_linear_scale(d)!r} at fan-in {d},",
                    f"{twin_linear_scale(d_ff)!r} at {d_ff}): tilefuse's random inputs are uniform in [-1, 1], weights included, and",
                    "unscaled they leave the check ill-conditioned (bench/cases/attention_cases.py says how).",
                    "Correctness twin of the full-size GPT block bench cases (scripts/gpu-check.sh, tilefuse run --check)."]
    heads_of = f".view(*x.shape[:2], 3, {heads}, {dh}).permute(2, 0, 3, 1, 4)"  # [3, B, H, T, dh]
    qkv = f"(F.layer_norm(x, x.shape[-1:], ln1_scale, ln1_bias, eps=1e-5) @ w_qkv + b_qkv){heads_of}"
    mlp = ("(0.5 * (u := F.layer_norm(h, h.shape[-1:], ln2_scale, ln2_bias, eps=1e-5) @ w1 + b1) * "
           "(1 + torch.tanh(0.7978845608 * (u + 0.044715 * u**3)))) @ w2 + b2")
    by_hand = eager_attention(f"(qkv := {qkv})[0]", "qkv[1]", "qkv[2]", dh, True)
    sdpa = f"F.scaled_dot_product_attention(*{qkv}.unbind(0), is_causal=True)"
    block = "(h := x + ({}).transpose(1, 2).reshape(x.shape) @ w_o + b_o) + " + mlp
    m = batch * tokens
    entry = {"name": name, "file": f"{name}.onnxtxt", "inputs": inputs, "outputs": outputs,
             "bytes_moved": bytes_moved(inputs, outputs),
             "flops": 2 * m * (d * 3 * d + d * d + d * d_ff + d_ff * d) + attention_flops(batch, heads, tokens, dh, True),
             "attention": {"batch": batch, "heads": heads, "seq": tokens, "head_dim": dh, "causal": True},
             "peers": {"eager": block.format(by_hand), "library": block.format(sdpa), "compile": COMPILE,
                       "compile_sdpa": COMPILE_SDPA}}
    return graph_text(name, comment, inputs, outputs, body), entry


def shape_name(batch, heads, seq, head_dim):
    return f"b{batch}h{heads}n{seq}d{head_dim}"


def bench_cases():
    cases = []
    for head_dim in (128, 64):
        for causal in (False, True):
            prefix = "attention_causal" if causal else "attention"
            cases.append(attention_case(f"{prefix}_bf16_{shape_name(4, 16, 4096, head_dim)}", 4, 16, 4096, head_dim,
                                        causal, "bench case"))
    # The language models' own shapes at 8x512 (issue 45): GPT-2's causal and BERT's full
    # attention (12 heads of 64), the LLaMA-style model's causal (16 heads of 128).
    for heads, head_dim, causal in ((12, 64, True), (12, 64, False), (16, 128, True)):
        prefix = "attention_causal" if causal else "attention"
        cases.append(attention_case(f"{prefix}_bf16_{shape_name(8, heads, 512, head_dim)}", 8, heads, 512, head_dim, causal,
                                    "bench case, a language model's shape at 8x512"))
    for batch, tokens, d, heads in ((8, 2048, 1024, 16), (4, 4096, 2048, 16)):
        cases.append(gpt_block_case(f"gpt_block_bf16_b{batch}t{tokens}d{d}h{heads}", batch, tokens, d, heads, "bench case"))
    for _, entry in cases:
        if entry["name"] in ANCHORS_TFLOPS:
            entry["anchor_h200_tflops"] = ANCHORS_TFLOPS[entry["name"]]
        if entry["name"] in ANCHORS_US:
            entry["anchor_h200_us"] = ANCHORS_US[entry["name"]]
        entry["full_size_check"] = False
    return cases


def check_twins():
    """Each attention form at a ragged sequence length (not a multiple of any tile) and both head
    dims, and small GPT blocks with ragged tokens (not in the manifest). The causal ones twice: the
    graph passes fold a mask of at most 2^20 elements (kMaxFoldedExpansionElements) into a bool
    constant, so at N = 200 the attention sees a literal [N, N] mask, while at N > 1024, as at full
    size, the mask stays an iota comparison (Trilu's decomposition); N = 1100 checks that form."""
    twins = []
    for head_dim in (128, 64):
        for causal, seq in ((False, 200), (True, 200), (True, 1100)):
            prefix = "attention_causal" if causal else "attention"
            why = "small check case (ragged sequence" + (", mask an iota comparison as at full size)" if seq > 1024 else ")")
            twins.append(attention_case(f"{prefix}_bf16_{shape_name(1, 2, seq, head_dim)}", 1, 2, seq, head_dim, causal,
                                        why, True))
    for batch, tokens in ((2, 100), (1, 1100)):
        why = "small check case (ragged tokens" + (", mask an iota comparison as at full size)" if tokens > 1024 else ")")
        twins.append(gpt_block_case(f"gpt_block_bf16_b{batch}t{tokens}d128h2", batch, tokens, 128, 2, why, True))
    return [text for text, _ in twins], [entry["name"] for _, entry in twins]


def main():
    generated = bench_cases()
    for text, entry in generated:
        (HERE / entry["file"]).write_text(text)
    (HERE / "check").mkdir(exist_ok=True)
    texts, names = check_twins()
    for text, name in zip(texts, names):
        (HERE / "check" / f"{name}.onnxtxt").write_text(text)
    manifest = json.loads(MANIFEST.read_text())
    manifest["about"] = manifest["about"].split(ABOUT_MARK)[0] + ABOUT
    manifest["cases"] = gemm_cases.merge_cases(manifest["cases"], [entry for _, entry in generated])
    MANIFEST.write_text(manifest_json(manifest) + "\n")
    print(f"{len(generated)} bench cases, {len(names)} check twins, {MANIFEST.name} with {len(manifest['cases'])} cases")


if __name__ == "__main__":
    main()
