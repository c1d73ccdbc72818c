#include "frontend/onnx/opset_versions.h"

#include <fmt/format.h>

namespace tilefuse::onnx_import {

namespace {

// Opset 22 (ONNX 1.17) added bfloat16 to these ops; opset 23 (ONNX 1.18) added
// float4e2m1 (and for Cast the conversions to and from it). Neither changed what the
// ops compute, and tilefuse refuses float4 tensors where they are read. New ops of those
// opsets (Attention, RMSNormalization, RotaryEmbedding) are not listed: an op without a
// handler is refused by name anyway. Checked against onnx 1.23.2's schema registry
// (2026-11-24): exactly the ops whose since_version is 22 or 23, besides those three.
constexpr OpsetChange kChanges[] = {
    {22, "Acos", true}, {22, "Acosh", true}, {22, "Asin", true}, {22, "Asinh", true},
    {22, "Atan", true}, {22, "Atanh", true}, {22, "AveragePool", true}, {22, "Bernoulli", true},
    {22, "Conv", true}, {22, "ConvTranspose", true}, {22, "Cos", true}, {22, "Cosh", true},
    {22, "DeformConv", true}, {22, "Det", true}, {22, "Dropout", true}, {22, "Elu", true},
    {22, "EyeLike", true}, {22, "GRU", true}, {22, "GlobalAveragePool", true}, {22, "GlobalLpPool", true},
    {22, "GlobalMaxPool", true}, {22, "GridSample", true}, {22, "HardSigmoid", true}, {22, "HardSwish", true},
    {22, "InstanceNormalization", true}, {22, "LSTM", true}, {22, "LpNormalization", true}, {22, "LpPool", true},
    {22, "MaxPool", true}, {22, "MaxRoiPool", true}, {22, "MaxUnpool", true}, {22, "Mish", true},
    {22, "Multinomial", true}, {22, "NegativeLogLikelihoodLoss", true}, {22, "RNN", true},
    {22, "RandomNormal", true}, {22, "RandomNormalLike", true}, {22, "RandomUniform", true},
    {22, "RandomUniformLike", true}, {22, "RoiAlign", true}, {22, "Round", true}, {22, "Selu", true},
    {22, "Sin", true}, {22, "Sinh", true}, {22, "Softplus", true}, {22, "Softsign", true}, {22, "Tan", true},
    {22, "ThresholdedRelu", true},
    {23, "Cast", true}, {23, "CastLike", true}, {23, "Constant", true}, {23, "ConstantOfShape", true},
    {23, "DequantizeLinear", true}, {23, "Flatten", true}, {23, "Identity", true}, {23, "If", true},
    {23, "Loop", true}, {23, "Pad", true}, {23, "QuantizeLinear", true}, {23, "Reshape", true},
    {23, "Scan", true}, {23, "Shape", true}, {23, "Size", true}, {23, "Squeeze", true},
    {23, "Transpose", true}, {23, "Unsqueeze", true},
};

}  // namespace

std::span<const OpsetChange> OpsetChangesAfter21() { return kChanges; }

Status CheckOpMeaningAtOpset(std::string_view op, int64_t opset, std::span<const OpsetChange> changes) {
  for (const OpsetChange& change : changes)
    if (change.op == op && change.opset <= opset && !change.types_only)
      return Unimplemented(fmt::format("{} changed meaning in opset {}; tilefuse implements it up to opset {}", op,
                                       change.opset, change.opset - 1));
  return Status::Ok();
}

}  // namespace tilefuse::onnx_import
