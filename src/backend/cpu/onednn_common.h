// What the CPU backend's oneDNN primitives share (convolutions and pools,
// backend/cpu/onednn_conv and onednn_pool): one CPU engine and one stream for the process,
// and the plain (row-major) layout tag of a rank. Include only where oneDNN is built in
// (TILEFUSE_CPU_CONV_DNNL).
#pragma once

#include <iterator>

#include <oneapi/dnnl/dnnl.hpp>

#include "support/check.h"

namespace tilefuse::onednn {

using Tag = dnnl::memory::format_tag;

inline dnnl::engine& Engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

inline dnnl::stream& Stream() {
  static dnnl::stream stream(Engine());
  return stream;
}

// Row-major (plain) layout of a tensor of `rank` dims: NCHW for activations, OIHW and GOIHW
// for weights (ONNX's [Co, C/g, k...] split as [g, Co/g, C/g, k...] is the same bytes).
inline Tag Plain(size_t rank) {
  static const Tag tags[] = {Tag::undef, Tag::a, Tag::ab, Tag::abc, Tag::abcd, Tag::abcde, Tag::abcdef};
  TF_CHECK(rank < std::size(tags));
  return tags[rank];
}

}  // namespace tilefuse::onednn
