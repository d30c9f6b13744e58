// oneDNN's softmax and layer normalisation for contiguous float32 data, primitives cached per
// shape and thread count (creating one costs far more than running it on small inputs).
#include "nn_dnnl.h"

#include <map>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <vector>

#include "kael/runtime/threads.h"

namespace kael::native::nn {

namespace {

dnnl::engine& engine() {
  static dnnl::engine* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *e;
}

template <typename P>
struct Cache {
  std::mutex mutex;
  std::map<std::vector<std::int64_t>, P> primitives;

  template <typename Make>
  P get(const std::vector<std::int64_t>& key, Make&& make) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = primitives.find(key);
    if (it == primitives.end()) {
      if (primitives.size() >= 256) primitives.clear();
      it = primitives.emplace(key, make()).first;
    }
    return it->second;
  }
};

}  // namespace

void dnnl_softmax(const float* x, float* y, std::int64_t outer, std::int64_t n, std::int64_t inner, bool log) {
  using tag = dnnl::memory::format_tag;
  sync_openmp_threads();
  static Cache<dnnl::softmax_forward>* cache = new Cache<dnnl::softmax_forward>();
  const dnnl::memory::desc md({outer, n, inner}, dnnl::memory::data_type::f32, tag::abc);
  const std::vector<std::int64_t> key{outer, n, inner, log ? 1 : 0, intra_op_threads()};
  dnnl::softmax_forward prim = cache->get(key, [&] {
    return dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(
        engine(), dnnl::prop_kind::forward_inference,
        log ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate, md, md, 1));
  });
  thread_local dnnl::stream stream(engine());
  dnnl::memory src(md, engine(), const_cast<float*>(x)), dst(md, engine(), y);
  prim.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  stream.wait();
}

void dnnl_layer_norm(const float* x, float* y, const float* w, const float* b, std::int64_t rows, std::int64_t n,
                     double eps) {
  using tag = dnnl::memory::format_tag;
  sync_openmp_threads();
  static Cache<dnnl::layer_normalization_forward>* cache = new Cache<dnnl::layer_normalization_forward>();
  const dnnl::memory::desc md({rows, n}, dnnl::memory::data_type::f32, tag::ab);
  const dnnl::memory::desc stat_md({rows}, dnnl::memory::data_type::f32, tag::a);
  const dnnl::memory::desc wmd({n}, dnnl::memory::data_type::f32, tag::a);
  auto flags = dnnl::normalization_flags::none;
  if (w != nullptr) flags |= dnnl::normalization_flags::use_scale;
  if (b != nullptr) flags |= dnnl::normalization_flags::use_shift;
  const float feps = static_cast<float>(eps);
  std::int32_t eps_bits = 0;
  std::memcpy(&eps_bits, &feps, sizeof eps_bits);
  const std::vector<std::int64_t> key{rows, n, static_cast<std::int64_t>(flags), eps_bits, intra_op_threads()};
  dnnl::layer_normalization_forward prim = cache->get(key, [&] {
    return dnnl::layer_normalization_forward(dnnl::layer_normalization_forward::primitive_desc(
        engine(), dnnl::prop_kind::forward_inference, md, md, stat_md, feps, flags));
  });
  thread_local dnnl::stream stream(engine());
  dnnl::memory src(md, engine(), const_cast<float*>(x)), dst(md, engine(), y);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
  if (w != nullptr) args.emplace(DNNL_ARG_SCALE, dnnl::memory(wmd, engine(), const_cast<float*>(w)));
  if (b != nullptr) args.emplace(DNNL_ARG_SHIFT, dnnl::memory(wmd, engine(), const_cast<float*>(b)));
  prim.execute(stream, args);
  stream.wait();
}

}  // namespace kael::native::nn
