#include "backend/cpu/onednn_pool.h"

#include <fmt/format.h>

#if TILEFUSE_CPU_CONV_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include "backend/cpu/onednn_common.h"
#endif

#include "support/check.h"

namespace tilefuse {

#if TILEFUSE_CPU_CONV_DNNL

namespace {

using dnnl::memory;
using onednn::Engine;
using onednn::Plain;
using onednn::Stream;

}  // namespace

struct OnednnPool::Impl {
  dnnl::pooling_v2_forward pool;
  memory::desc src, dst;
  std::string description;
};

OnednnPool::OnednnPool(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OnednnPool::~OnednnPool() = default;
const std::string& OnednnPool::description() const { return impl_->description; }

StatusOr<std::unique_ptr<OnednnPool>> OnednnPool::Create(const Graph& graph, const Node& node) {
  if ((node.op != OpCode::kMaxPool && node.op != OpCode::kAveragePool) || node.dtype != DType::kF32)
    return Unimplemented(fmt::format("{} %{} is not an f32 pool", OpName(node.op), node.id));
  const Attrs& a = node.attrs;
  const Shape& x_shape = graph.node(node.inputs[0]).shape;
  const int spatial = static_cast<int>(a.kernel.size());
  auto impl = std::make_unique<Impl>();
  memory::dims src_dims(x_shape.begin(), x_shape.end()), dst_dims(node.shape.begin(), node.shape.end());
  memory::dims kernel(a.kernel.begin(), a.kernel.end()), strides(a.strides.begin(), a.strides.end()), dilations, pad_l, pad_r;
  for (int d = 0; d < spatial; ++d) {
    dilations.push_back(a.dilations[d] - 1);  // oneDNN counts the gaps
    pad_l.push_back(a.pads[d]);
    pad_r.push_back(a.pads[spatial + d]);
  }
  const auto f32 = memory::data_type::f32;
  impl->src = memory::desc(src_dims, f32, Plain(src_dims.size()));
  impl->dst = memory::desc(dst_dims, f32, Plain(dst_dims.size()));
  // ONNX's AveragePool divides by the window's positions inside the input, or with
  // count_include_pad by those inside input and pads (ceil_mode's extra end padding never
  // counts: the importer refuses it with count_include_pad).
  const dnnl::algorithm algorithm = node.op == OpCode::kMaxPool ? dnnl::algorithm::pooling_max
                                    : a.count_include_pad        ? dnnl::algorithm::pooling_avg_include_padding
                                                                 : dnnl::algorithm::pooling_avg_exclude_padding;
  try {
    dnnl::pooling_v2_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm, impl->src, impl->dst, strides, kernel,
                                        dilations, pad_l, pad_r);
    dnnl::pooling_v2_forward::primitive_desc pd(desc, Engine());
    impl->pool = dnnl::pooling_v2_forward(pd);
    impl->description = fmt::format("oneDNN {}, nchw, {}", pd.impl_info_str(),
                                    node.op == OpCode::kMaxPool ? "max" : a.count_include_pad ? "average with pads" : "average");
  } catch (const dnnl::error& e) {
    return Unimplemented(fmt::format("oneDNN refuses the pool {} '{}': {}", OpName(node.op), node.name, e.what()));
  }
  return std::unique_ptr<OnednnPool>(new OnednnPool(std::move(impl)));
}

void OnednnPool::Run(const float* src, float* dst) const {
  const Impl& s = *impl_;
  memory src_memory(s.src, Engine(), const_cast<float*>(src));
  memory dst_memory(s.dst, Engine(), dst);
  s.pool.execute(Stream(), {{DNNL_ARG_SRC, src_memory}, {DNNL_ARG_DST, dst_memory}});
  Stream().wait();
}

#else  // oneDNN not linked (TILEFUSE_CPU_GEMM=openblas)

struct OnednnPool::Impl {
  std::string description;
};

OnednnPool::OnednnPool(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OnednnPool::~OnednnPool() = default;
const std::string& OnednnPool::description() const { return impl_->description; }

StatusOr<std::unique_ptr<OnednnPool>> OnednnPool::Create(const Graph&, const Node& node) {
  return Unimplemented(fmt::format("{} '{}': this build has no oneDNN (TILEFUSE_CPU_GEMM=openblas)", OpName(node.op), node.name));
}

void OnednnPool::Run(const float*, float*) const { TF_CHECK(false); }

#endif

}  // namespace tilefuse
