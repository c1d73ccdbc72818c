// Products of dequantized 8-bit floats (or int8) become FP8 (int8) products, their scales
// applied after.
//
// Quantization tools write a product of FP8 values as a DequantizeLinear on each operand and
// a product in f32 or 16 bits; the importer writes DequantizeLinear out in primitives
// (frontend/onnx/quantize.cc):
//
//     matmul(cast(qa) · sa, cast(qb) · sb)     qa, qb e4m3 or e5m2; sa, sb scales
//
// Where each scale is constant along the contracted dim (per tensor, per row of A, per column
// of B), it comes out of the sum:
//
//     cast(matmul(qa, qb) · sa · sb)           the product of 8-bit floats, in f32
//
// and the GEMM template runs it on the FP8 tensor cores (twice the 16-bit rate, half the
// bytes read), the scales and the cast in its epilogue with whatever follows. int8 likewise
// (symmetric quantization: zero points of zero), the product's exact sum rounded to f32, on
// the int8 tensor cores (int32 sums); its scales per tensor, row or column. Scales in blocks
// of K (ONNX's blocked DequantizeLinear, which the importer repeats to the operand's shape;
// DeepGEMM's 1x128) do not leave the sum: such a product becomes
//
//     cast(block_scaled_matmul(qa, qb, sa, sb))  sa [..., M, blocks], sb [blocks, N]
//
// (a scale constant along K on the other side repeated to blocks), each block's sum scaled
// apart (with `block_scales`). Hopper's FP8
// tensor cores read both operands K-major, so B must be a constant (stored K-major by
// passes/k_major_weights.h, `float8`) or the transpose of an [N][K] value (x · wᵀ): other
// products, and products whose K rows are not whole 16-byte units (TMA), stay as they are.
// A zero point must be zero on B (8-bit floats have none other in ONNX's sense). On int8 or
// uint8 A it may be any constant along K (asymmetric activations, onnxruntime's default): uint8
// A is shifted into int8 (q - 128, exact) and (z - 128) · Σ_k b_k taken off after the sum. So is
// MatMulInteger's product (f64 of cast(q) - z, as frontend/onnx/matmul.cc writes it; no scales).
//
// For the CUDA backend, before the folding of constants: that would fold a constant weight's
// dequantization into a copy of it in f32.
#pragma once

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

struct Fp8ProductOptions {
  bool block_scales = false;  // products with block scales too (else they stay as written)
  bool int8 = false;          // symmetric int8 products too (else they stay as written)
};

StatusOr<Graph> MakeFp8Products(const Graph& graph, const Fp8ProductOptions& options = {});

}  // namespace tilefuse
