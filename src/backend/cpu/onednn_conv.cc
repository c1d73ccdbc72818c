#include "backend/cpu/onednn_conv.h"

#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <optional>
#include <unordered_map>
#include <vector>

#if TILEFUSE_CPU_CONV_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include "backend/cpu/layout_copy.h"
#include "backend/cpu/onednn_common.h"
#endif

#include "support/check.h"

namespace tilefuse {

#if TILEFUSE_CPU_CONV_DNNL

namespace {

using dnnl::algorithm;
using dnnl::memory;
using onednn::Tag;

using onednn::Engine;
using onednn::Plain;
using onednn::Stream;

algorithm AlgorithmOf(ConvEltwise::Kind kind) {
  switch (kind) {
    case ConvEltwise::Kind::kRelu: return algorithm::eltwise_relu;
    case ConvEltwise::Kind::kClip: return algorithm::eltwise_clip;
    case ConvEltwise::Kind::kLinear: return algorithm::eltwise_linear;
    case ConvEltwise::Kind::kHardswish: return algorithm::eltwise_hardswish;
    case ConvEltwise::Kind::kLogistic: return algorithm::eltwise_logistic;
    case ConvEltwise::Kind::kTanh: return algorithm::eltwise_tanh;
    case ConvEltwise::Kind::kSwish: return algorithm::eltwise_swish;
    case ConvEltwise::Kind::kGeluErf: return algorithm::eltwise_gelu_erf;
    case ConvEltwise::Kind::kGeluTanh: return algorithm::eltwise_gelu_tanh;
  }
  return algorithm::eltwise_relu;
}

// oneDNN's preferred (blocked) layouts for src and dst, reordered from and to NCHW around
// each convolution: with NCHW in and out oneDNN 2.6 picks its im2col + gemm convolution,
// 2.4x slower on ResNet-18 and 4x on MobileNetV3-small end to end (docs/design-notes.md).
// TILEFUSE_ONEDNN_CONV_LAYOUT=nchw keeps NCHW, for that measurement.
bool BlockedLayout() {
  const char* v = std::getenv("TILEFUSE_ONEDNN_CONV_LAYOUT");
  return !(v && std::strcmp(v, "nchw") == 0);
}

}  // namespace

struct OnednnConv::Impl {
  dnnl::convolution_forward conv;
  // oneDNN fixes a convolution's team size when the primitive is made (its brgemm kernels
  // split the work for that many threads and open a team of exactly that size), so a run that
  // the CPU executable keeps on the calling thread (omp_get_max_threads() == 1: under contention,
  // cpu_executable.cc) gets a second primitive made for one thread, on first use, held to the
  // layouts of the first (left free, oneDNN picks other weight blockings for other team sizes).
  // Without it a busy machine stalls every run (ViT's patch convolution beside a spinning
  // process on 16 cores: 8 ms a run instead of 0.1).
  memory::dims strides, dilations, pad_l, pad_r;
  dnnl::primitive_attr attr;
  int team_size = 1;  // omp_get_max_threads() when `conv` was made
  mutable std::optional<dnnl::convolution_forward> conv_alone;
  mutable bool alone_tried = false;
  memory::desc user_src, user_dst, user_weights, src, dst, weights;
  std::vector<float> bias;        // folded or constant bias (empty: read at run time or none)
  bool has_bias = false;
  memory weights_memory;          // constant weights in oneDNN's layout (empty: at run time)
  memory::desc bias_desc;
  bool residual = false;
  int binary_position = 0;        // NCHW: the residual's binary post-op in the chain
  bool blocked = false;
  // Blocked layout only: reorders and scratch memory for src and dst.
  std::optional<dnnl::reorder> src_reorder, dst_reorder, residual_reorder;
  // oneDNN chose channels-last for src / dst: the reorders from and to NCHW are our parallel
  // transposes (backend/cpu/layout_copy), not oneDNN's.
  bool src_channels_last = false, dst_channels_last = false;
  mutable memory src_scratch, dst_scratch;
  // Blocked layout between consecutive convolutions: src, dst or residual already blocked.
  bool blocked_input = false, blocked_output = false, blocked_residual = false;
  std::string description;
};

// The channels-last layout of an activation [N, C, spatial...]; `undef` when there is none.
memory::desc ChannelsLast(const memory::dims& dims) {
  switch (dims.size()) {
    case 3: return memory::desc(dims, memory::data_type::f32, Tag::acb);
    case 4: return memory::desc(dims, memory::data_type::f32, Tag::acdb);
    case 5: return memory::desc(dims, memory::data_type::f32, Tag::acdeb);
    default: return memory::desc();
  }
}

// [N, C, spatial...] as the three sizes the transposes take.
struct ActivationSizes {
  int64_t n, channels, spatial;
  explicit ActivationSizes(const memory::desc& d) {
    const memory::dims dims = d.dims();
    n = dims[0];
    channels = dims[1];
    spatial = 1;
    for (size_t i = 2; i < dims.size(); ++i) spatial *= dims[i];
  }
};

bool OnednnConvAvailable() { return true; }

OnednnConv::OnednnConv(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OnednnConv::~OnednnConv() = default;
const std::string& OnednnConv::description() const { return impl_->description; }

bool OnednnConv::BlockedOutputFeeds(const OnednnConv& consumer, bool as_residual) const {
  const Impl& p = *impl_;
  const Impl& c = *consumer.impl_;
  if (!p.blocked || !c.blocked || p.dst == p.user_dst || p.dst.get_size() > p.user_dst.get_size()) return false;
  if (as_residual) return c.residual && c.dst == p.dst;
  return c.src == p.dst;
}

void OnednnConv::KeepBlockedInput() {
  impl_->blocked_input = true;
  impl_->description += ", input kept blocked";
}
void OnednnConv::KeepBlockedOutput() {
  impl_->blocked_output = true;
  impl_->description += ", output kept blocked";
}
void OnednnConv::KeepBlockedResidual() {
  impl_->blocked_residual = true;
  impl_->description += ", residual kept blocked";
}

StatusOr<std::unique_ptr<OnednnConv>> OnednnConv::Create(const Graph& graph, const Node& node, const Tensor* weights,
                                                         const Tensor* bias, const ConvEpilogue& post) {
  const Attrs& a = node.attrs;
  const Shape& x_shape = graph.node(node.inputs[0]).shape;
  const Shape& w_shape = graph.node(node.inputs[1]).shape;
  const int spatial = static_cast<int>(a.kernel.size());
  const int64_t groups = a.group, co = node.shape[1];
  const bool scaled = !post.scale.empty();
  TF_CHECK(!scaled || weights);
  auto impl = std::make_unique<Impl>();
  impl->blocked = BlockedLayout();
  memory::dims src_dims(x_shape.begin(), x_shape.end()), dst_dims(node.shape.begin(), node.shape.end());
  memory::dims w_dims(w_shape.begin(), w_shape.end());
  if (groups > 1) {
    w_dims[0] = co / groups;
    w_dims.insert(w_dims.begin(), groups);
  }
  memory::dims strides(a.strides.begin(), a.strides.end()), dilations, pad_l, pad_r;
  for (int d = 0; d < spatial; ++d) {
    dilations.push_back(a.dilations[d] - 1);  // oneDNN counts the gaps
    pad_l.push_back(a.pads[d]);
    pad_r.push_back(a.pads[spatial + d]);
  }
  const auto f32 = memory::data_type::f32;
  impl->user_src = memory::desc(src_dims, f32, Plain(src_dims.size()));
  impl->user_dst = memory::desc(dst_dims, f32, Plain(dst_dims.size()));
  impl->user_weights = memory::desc(w_dims, f32, Plain(w_dims.size()));
  const memory::desc any_src(src_dims, f32, Tag::any), any_dst(dst_dims, f32, Tag::any);
  const memory::desc weights_desc = weights ? memory::desc(w_dims, f32, Tag::any) : impl->user_weights;
  impl->has_bias = node.inputs.size() > 2 || scaled;
  const memory::desc bias_desc = impl->has_bias ? memory::desc({co}, f32, Tag::a) : memory::desc();
  impl->bias_desc = bias_desc;
  impl->binary_position = static_cast<int>(post.before_residual.size());

  dnnl::post_ops ops;
  for (const ConvEltwise& e : post.before_residual) ops.append_eltwise(1.f, AlgorithmOf(e.kind), static_cast<float>(e.alpha), static_cast<float>(e.beta));
  impl->residual = post.residual >= 0;
  // NCHW: the residual is read where it lives (a binary add); blocked: it is reordered into
  // the destination first and added by a sum post-op.
  if (impl->residual) {
    if (impl->blocked) ops.append_sum(1.f);
    else ops.append_binary(algorithm::binary_add, impl->user_dst);
  }
  for (const ConvEltwise& e : post.after_residual) ops.append_eltwise(1.f, AlgorithmOf(e.kind), static_cast<float>(e.alpha), static_cast<float>(e.beta));
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);

  try {
    const memory::desc& src_desc = impl->blocked ? any_src : impl->user_src;
    const memory::desc& dst_desc = impl->blocked ? any_dst : impl->user_dst;
    dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm::convolution_direct, src_desc, weights_desc,
                                         bias_desc, dst_desc, strides, dilations, pad_l, pad_r);
    dnnl::convolution_forward::primitive_desc pd(desc, attr, Engine());
    impl->conv = dnnl::convolution_forward(pd);
    impl->strides = strides;
    impl->dilations = dilations;
    impl->pad_l = pad_l;
    impl->pad_r = pad_r;
    impl->attr = attr;
    impl->team_size = omp_get_max_threads();
    impl->src = pd.src_desc();
    impl->dst = pd.dst_desc();
    impl->weights = pd.weights_desc();
    if (impl->blocked) {
      impl->src_channels_last = impl->src == ChannelsLast(src_dims);
      impl->dst_channels_last = impl->dst == ChannelsLast(dst_dims);
      if (impl->src != impl->user_src) {
        impl->src_reorder = dnnl::reorder(memory(impl->user_src, Engine(), nullptr), memory(impl->src, Engine(), nullptr));
        impl->src_scratch = memory(impl->src, Engine());
      }
      if (impl->dst != impl->user_dst) {
        impl->dst_reorder = dnnl::reorder(memory(impl->dst, Engine(), nullptr), memory(impl->user_dst, Engine(), nullptr));
        if (impl->residual)
          impl->residual_reorder = dnnl::reorder(memory(impl->user_dst, Engine(), nullptr), memory(impl->dst, Engine(), nullptr));
        impl->dst_scratch = memory(impl->dst, Engine());
      }
    }
    if (weights) {
      // Scale (folded batch norm) applied in f64 per output channel, then reordered once.
      std::vector<double> w = weights->ToDoubles();
      const int64_t per_channel = static_cast<int64_t>(w.size()) / co;
      std::vector<float> scaled_w(w.size());
      for (size_t i = 0; i < w.size(); ++i) scaled_w[i] = static_cast<float>(w[i] * (scaled ? post.scale[i / per_channel] : 1.0));
      memory user(impl->user_weights, Engine(), scaled_w.data());
      impl->weights_memory = memory(impl->weights, Engine());
      dnnl::reorder(user, impl->weights_memory).execute(Stream(), user, impl->weights_memory);
      Stream().wait();
    }
    if (bias || scaled) {
      std::vector<double> b = bias ? bias->ToDoubles() : std::vector<double>(co, 0.0);
      impl->bias.resize(co);
      for (int64_t c = 0; c < co; ++c) impl->bias[c] = static_cast<float>(scaled ? post.scale[c] * b[c] + post.shift[c] : b[c]);
    }
    std::string post_text = DescribeConvEpilogue(post);
    impl->description = fmt::format("oneDNN {}, {}{}", pd.impl_info_str(), impl->blocked ? "blocked with reorders" : "nchw",
                                    post_text == "none" ? "" : ", post-ops: " + post_text);
  } catch (const dnnl::error& e) {
    return Unimplemented(fmt::format("oneDNN refuses the convolution {} '{}': {}", OpName(node.op), node.name, e.what()));
  }
  return std::unique_ptr<OnednnConv>(new OnednnConv(std::move(impl)));
}

void OnednnConv::Run(const float* src, const float* weights, const float* bias, const float* residual, float* dst) const {
  Impl& s = *impl_;
  // The primitive for this run: the team's, or where the run keeps to the calling thread, one
  // made for a single thread.
  auto conv_for_this_run = [&s]() -> const dnnl::convolution_forward& {
    if (s.team_size == 1 || omp_get_max_threads() > 1) return s.conv;
    if (!s.alone_tried) {
      s.alone_tried = true;
      try {
        dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm::convolution_direct, s.src, s.weights,
                                             s.bias_desc, s.dst, s.strides, s.dilations, s.pad_l, s.pad_r);
        s.conv_alone.emplace(dnnl::convolution_forward::primitive_desc(desc, s.attr, Engine()));
      } catch (const dnnl::error&) {
        // none takes these layouts on one thread: the team's serves
      }
    }
    return s.conv_alone ? *s.conv_alone : s.conv;
  };
  dnnl::stream& stream = Stream();
  memory src_memory(s.blocked_input ? s.src : s.user_src, Engine(), const_cast<float*>(src));
  memory dst_memory(s.blocked_output ? s.dst : s.user_dst, Engine(), dst);
  if (s.src_reorder && !s.blocked_input) {
    if (s.src_channels_last) {
      const ActivationSizes in(s.src);
      NchwToChannelsLast(src, static_cast<float*>(s.src_scratch.get_data_handle()), in.n, in.channels, in.spatial);
    } else {
      s.src_reorder->execute(stream, src_memory, s.src_scratch);
    }
    src_memory = s.src_scratch;
  }
  const bool reorder_out = s.dst_reorder && !s.blocked_output;
  memory conv_dst = reorder_out ? s.dst_scratch : dst_memory;
  float* conv_dst_data = static_cast<float*>(conv_dst.get_data_handle());
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src_memory}, {DNNL_ARG_DST, conv_dst}};
  args[DNNL_ARG_WEIGHTS] = s.weights_memory ? s.weights_memory : memory(s.user_weights, Engine(), const_cast<float*>(weights));
  if (s.has_bias)
    args[DNNL_ARG_BIAS] = memory(s.bias_desc, Engine(), s.bias.empty() ? const_cast<float*>(bias) : const_cast<float*>(s.bias.data()));
  const ActivationSizes out(s.dst);
  if (s.residual) {
    memory r(s.user_dst, Engine(), const_cast<float*>(residual));
    if (!s.blocked) {
      args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(s.binary_position) | DNNL_ARG_SRC_1] = r;
    } else if (s.residual_reorder && !s.blocked_residual) {
      stream.wait();
      if (s.dst_channels_last) NchwToChannelsLast(residual, conv_dst_data, out.n, out.channels, out.spatial);
      else s.residual_reorder->execute(stream, r, conv_dst);
    } else {
      // Same layout as the convolution's output (plain, or blocked on both sides). oneDNN 2.6
      // runs a binary add post-op that would read it in place only with its reference
      // implementation, so the sum post-op it is, after a copy.
      stream.wait();
      CopyInParallel(residual, conv_dst_data, s.dst.get_size() / sizeof(float));
    }
  }
  conv_for_this_run().execute(stream, args);
  if (reorder_out) {
    if (s.dst_channels_last) {
      stream.wait();
      ChannelsLastToNchw(conv_dst_data, dst, out.n, out.channels, out.spatial);
    } else {
      s.dst_reorder->execute(stream, conv_dst, dst_memory);
    }
  }
  stream.wait();
}

// ---- squeeze-excitation on the blocked layout ----

struct OnednnChannelMean::Impl {
  dnnl::pooling_v2_forward pool;
  memory::desc src, dst;
  std::string description;
};

OnednnChannelMean::OnednnChannelMean(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OnednnChannelMean::~OnednnChannelMean() = default;
const std::string& OnednnChannelMean::description() const { return impl_->description; }

StatusOr<std::unique_ptr<OnednnChannelMean>> OnednnChannelMean::Create(const Graph& graph, const Node& mean,
                                                                       const OnednnConv& producer) {
  const OnednnConv::Impl& p = *producer.impl_;
  const Shape& x = graph.node(mean.inputs[0]).shape;
  if (mean.op != OpCode::kReduceMean || mean.dtype != DType::kF32 || x.size() != 4 || !mean.attrs.keepdims ||
      mean.attrs.axes != std::vector<int64_t>{2, 3} || !p.blocked || p.dst.get_size() > p.user_dst.get_size() || p.dst.dims() != memory::dims(x.begin(), x.end()))
    return Unimplemented(fmt::format("%{} is no spatial mean of a blocked convolution output", mean.id));
  auto impl = std::make_unique<Impl>();
  const memory::dims dst_dims(mean.shape.begin(), mean.shape.end());
  impl->src = p.dst;
  // [N, C, 1, 1] in the channel-blocked layout is the plain bytes where the block divides C:
  // the reduction writes the layout it was given, so that the next reader sees NCHW.
  const memory::desc plain(dst_dims, memory::data_type::f32, Tag::abcd);
  // A pooling over the whole image: oneDNN 2.6's reductions on the blocked layout are its
  // reference (scalar) ones; its pooling has a jit kernel for the blocked layouts.
  const memory::dims kernel = {x[2], x[3]}, strides = {1, 1}, none = {0, 0};
  for (Tag tag : {Tag::acdb, Tag::aBcd16b, Tag::aBcd8b, Tag::abcd}) {
    const memory::desc d(dst_dims, memory::data_type::f32, tag);
    if (d.get_size() != plain.get_size()) continue;
    try {
      dnnl::pooling_v2_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm::pooling_avg_exclude_padding, impl->src, d,
                                          strides, kernel, none, none, none);
      dnnl::pooling_v2_forward::primitive_desc pd(desc, Engine());
      const std::string info = pd.impl_info_str();
      if (info.find("ref") != std::string::npos) continue;  // a scalar loop: not worth the step
      impl->dst = d;
      impl->pool = dnnl::pooling_v2_forward(pd);
      impl->description = fmt::format("oneDNN pooling {}, spatial mean of the blocked input", info);
      return std::unique_ptr<OnednnChannelMean>(new OnednnChannelMean(std::move(impl)));
    } catch (const dnnl::error&) {
    }
  }
  return Unimplemented(fmt::format("no jit oneDNN pooling for the spatial mean %{}", mean.id));
}

void OnednnChannelMean::Run(const float* src, float* dst) const {
  const Impl& s = *impl_;
  memory src_memory(s.src, Engine(), const_cast<float*>(src));
  memory dst_memory(s.dst, Engine(), dst);
  s.pool.execute(Stream(), {{DNNL_ARG_SRC, src_memory}, {DNNL_ARG_DST, dst_memory}});
  Stream().wait();
}

struct OnednnChannelScale::Impl {
  dnnl::binary binary;
  memory::desc src, scale, dst;
  std::string description;
};

OnednnChannelScale::OnednnChannelScale(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OnednnChannelScale::~OnednnChannelScale() = default;
const std::string& OnednnChannelScale::description() const { return impl_->description; }

bool OnednnChannelScale::BlockedInputFits(const OnednnConv& consumer) {
  const OnednnConv::Impl& c = *consumer.impl_;
  return c.blocked && c.src.get_size() <= c.user_src.get_size();
}

StatusOr<std::unique_ptr<OnednnChannelScale>> OnednnChannelScale::Create(const Graph&, const Node& mul,
                                                                         const OnednnConv& producer, const OnednnConv* consumer) {
  const OnednnConv::Impl& p = *producer.impl_;
  const memory::dims dims(mul.shape.begin(), mul.shape.end());
  if (mul.dtype != DType::kF32 || dims.size() != 4 || !p.blocked || p.dst.get_size() > p.user_dst.get_size() || p.dst.dims() != dims ||
      (consumer && (!BlockedInputFits(*consumer) || consumer->impl_->src.dims() != dims)))
    return Unimplemented(fmt::format("%{} is no channel scale of a blocked convolution output", mul.id));
  auto impl = std::make_unique<Impl>();
  impl->src = p.dst;
  impl->scale = memory::desc({dims[0], dims[1], 1, 1}, memory::data_type::f32, Tag::abcd);
  impl->dst = consumer ? consumer->impl_->src : memory::desc(dims, memory::data_type::f32, Tag::abcd);
  try {
    dnnl::binary::desc desc(algorithm::binary_mul, impl->src, impl->scale, impl->dst);
    dnnl::binary::primitive_desc pd(desc, Engine());
    impl->binary = dnnl::binary(pd);
    impl->description = fmt::format("oneDNN binary {}, per-channel scale of the blocked input, output {}", pd.impl_info_str(),
                                    consumer ? "blocked for the next convolution" : "nchw");
  } catch (const dnnl::error& e) {
    return Unimplemented(fmt::format("oneDNN refuses the channel scale %{}: {}", mul.id, e.what()));
  }
  return std::unique_ptr<OnednnChannelScale>(new OnednnChannelScale(std::move(impl)));
}

void OnednnChannelScale::Run(const float* x, const float* scale, float* dst) const {
  const Impl& s = *impl_;
  memory src_memory(s.src, Engine(), const_cast<float*>(x));
  memory scale_memory(s.scale, Engine(), const_cast<float*>(scale));
  memory dst_memory(s.dst, Engine(), dst);
  s.binary.execute(Stream(), {{DNNL_ARG_SRC_0, src_memory}, {DNNL_ARG_SRC_1, scale_memory}, {DNNL_ARG_DST, dst_memory}});
  Stream().wait();
}

#else  // oneDNN not linked (TILEFUSE_CPU_GEMM=openblas)

struct OnednnConv::Impl {
  std::string description;
};

bool OnednnConvAvailable() { return false; }
OnednnConv::OnednnConv(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OnednnConv::~OnednnConv() = default;
const std::string& OnednnConv::description() const { return impl_->description; }

StatusOr<std::unique_ptr<OnednnConv>> OnednnConv::Create(const Graph&, const Node& node, const Tensor*, const Tensor*,
                                                         const ConvEpilogue&) {
  return Unimplemented(fmt::format("{} '{}': this build has no oneDNN (TILEFUSE_CPU_GEMM=openblas)", OpName(node.op), node.name));
}

void OnednnConv::Run(const float*, const float*, const float*, const float*, float*) const { TF_CHECK(false); }

struct OnednnChannelMean::Impl {
  std::string description;
};
OnednnChannelMean::OnednnChannelMean(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OnednnChannelMean::~OnednnChannelMean() = default;
const std::string& OnednnChannelMean::description() const { return impl_->description; }
StatusOr<std::unique_ptr<OnednnChannelMean>> OnednnChannelMean::Create(const Graph&, const Node&, const OnednnConv&) {
  return Unimplemented("this build has no oneDNN");
}
void OnednnChannelMean::Run(const float*, float*) const { TF_CHECK(false); }

struct OnednnChannelScale::Impl {
  std::string description;
};
OnednnChannelScale::OnednnChannelScale(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OnednnChannelScale::~OnednnChannelScale() = default;
const std::string& OnednnChannelScale::description() const { return impl_->description; }
bool OnednnChannelScale::BlockedInputFits(const OnednnConv&) { return false; }
StatusOr<std::unique_ptr<OnednnChannelScale>> OnednnChannelScale::Create(const Graph&, const Node&, const OnednnConv&,
                                                                         const OnednnConv*) {
  return Unimplemented("this build has no oneDNN");
}
void OnednnChannelScale::Run(const float*, const float*, float*) const { TF_CHECK(false); }

#endif

}  // namespace tilefuse
