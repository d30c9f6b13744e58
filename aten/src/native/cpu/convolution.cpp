// Convolution on the CPU: the convolution op (plain and transposed, 1 to 3 spatial dims) and its
// backward kernels (data, weights, bias). docs/decisions/convolution.md explains the choices.
//
// Every computation is one of three roles of the plain convolution x (n, ic, in...) * w (oc,
// ic / g, k...) -> y (n, oc, out...) (conv::Geometry):
//   forward      x, w -> y     (convolution; the data gradient of a transposed one)
//   backward data  dy, w -> dx (the data gradient; a transposed convolution's forward)
//   backward weights x, dy -> dw
// float32 and bfloat16 (float16 where this CPU has it) run on oneDNN's convolution primitives,
// cached per shape in a small LRU; float64, the integer dtypes and what oneDNN refuses run on
// direct loops here, accumulating in double for float64 and in float for the half types.
#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>
#include <optional>
#include <memory>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "../convolution_params.h"
#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/pointwise.h"
#include "kael/ops/contiguous.h"
#include "kael/ops/flatten.h"
#include "kael/ops/matmul.h"
#include "kael/ops/select.h"
#include "kael/ops/t.h"
#include "kael/ops/sum.h"
#include "kael/ops/view.h"
#include "kael/runtime/threads.h"
#include "convolution_roles.h"
#include "layout.h"

namespace kael::native {

namespace {

using conv::Geometry;
using conv::Role;
using conv::run_gemm;
using conv::run_loops;
using conv::zero;
constexpr int kS = conv::kMaxSpatial;

template <typename T>
using Acc = opmath_t<T>;

// ---- layouts

// t dense in contiguous or channels-last order: t itself or a contiguous copy.
Tensor dense(const Tensor& t, bool* channels_last) {
  if (t.is_contiguous()) {
    *channels_last = false;
    return t;
  }
  if (channels_last_dense(t)) {
    *channels_last = true;
    return t;
  }
  *channels_last = false;
  return kael::contiguous(t);
}

// The strides of a dense tensor of these sizes in contiguous or channels-last order.
DimVector dense_strides(IntArrayRef sizes, bool channels_last) {
  if (channels_last) return channels_last_strides(sizes);
  const std::size_t nd = sizes.size();
  DimVector st(nd, 1);
  for (std::size_t i = nd - 1; i-- > 0;) st[i] = st[i + 1] * sizes[i + 1];
  return st;
}

Tensor alloc_dense(IntArrayRef sizes, ScalarType dtype, bool channels_last) {
  if (!channels_last) return alloc_cpu(sizes, dtype);
  return alloc_strided_cpu(sizes, dense_strides(sizes, true), dtype);
}

DimVector act_sizes(const Geometry& g, std::int64_t channels, const std::int64_t* spatial) {
  DimVector s{g.n, channels};
  for (int i = 0; i < g.nd; ++i) s.push_back(spatial[i]);
  return s;
}


// ---- oneDNN

dnnl::engine& engine() {
  static dnnl::engine* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *e;
}

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

std::optional<dt> dnnl_type(ScalarType t) {
  switch (t) {
    case ScalarType::Float32:
      return dt::f32;
    case ScalarType::BFloat16:
      return dt::bf16;
    case ScalarType::Float16:
      return dt::f16;
    default:
      return std::nullopt;
  }
}

// Whether this CPU runs oneDNN convolutions forward and backward in data type d (asked once).
bool dnnl_has_conv(dt d) {
  try {
    const dnnl::memory::desc x({1, 16, 4, 4}, d, tag::any), w({16, 16, 3, 3}, d, tag::any),
        y({1, 16, 2, 2}, d, tag::any);
    const dnnl::memory::dims one{1, 1}, zero{0, 0};
    const dnnl::convolution_forward::primitive_desc fwd(engine(), dnnl::prop_kind::forward_training,
                                                        dnnl::algorithm::convolution_direct, x, w, y, one, zero,
                                                        zero, zero);
    dnnl::convolution_backward_data::primitive_desc(engine(), dnnl::algorithm::convolution_direct, x, w, y, one,
                                                    zero, zero, zero, fwd);
    dnnl::convolution_backward_weights::primitive_desc(engine(), dnnl::algorithm::convolution_direct, x, w, y, one,
                                                       zero, zero, zero, fwd);
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

bool dnnl_supports(ScalarType t) {
  static const bool f16 = dnnl_has_conv(dt::f16);
  static const bool bf16 = dnnl_has_conv(dt::bf16);
  if (t == ScalarType::Float32) return true;
  if (t == ScalarType::BFloat16) return bf16;
  if (t == ScalarType::Float16) return f16;
  return false;
}

// One cached computation: the primitive, the descriptors it takes, and the reorders between
// them and the tensors' plain layouts (absent where the layouts agree).
struct Plan {
  dnnl::primitive prim;
  dnnl::memory::desc user[3], inner[3];  // a, b, c: user layouts and the primitive's
  std::optional<dnnl::reorder> to_inner[2];
  std::optional<dnnl::reorder> from_inner;
  dnnl::memory::desc bias_md;
  bool has_bias = false;
};

// Note [Convolution primitive cache]
// Creating a convolution primitive (and its reorders) costs from a fraction of a millisecond to
// milliseconds, as much as running a small one; a training loop calls the same few shapes every
// step. Plans are kept per key (role, dtype, geometry, layouts, threads) in a least-recently-used
// list of kCacheSize entries. The mutex is held across fork() (as matmul's cache, Note [Threads
// after fork]).
constexpr std::size_t kCacheSize = 128;

struct PlanCache {
  std::mutex mutex;
  std::list<std::pair<std::vector<std::int64_t>, std::shared_ptr<const Plan>>> lru;
  std::map<std::vector<std::int64_t>, decltype(lru)::iterator> index;
};

PlanCache& cache() {
  static PlanCache* c = new PlanCache();
  return *c;
}

struct CacheForkHandlers {
  CacheForkHandlers() {
    pthread_atfork([] { cache().mutex.lock(); }, [] { cache().mutex.unlock(); }, [] { cache().mutex.unlock(); });
  }
} cache_fork_handlers;

// Note [Convolution layouts]
// Contiguous (nchw) activations run on the layouts oneDNN picks (format "any": blocked,
// nChw16c), reordered in and out each call: on the benchmark shapes that is 2.3x (ResNet 3x3
// layer) and 1.5x (LeNet step) faster than the primitive on nchw itself, reorders included.
// Channels-last activations run as they are (oneDNN's nhwc kernels). The weight is always
// reordered to the primitive's layout (docs/decisions/convolution.md).
bool use_blocked(bool channels_last) { return !channels_last; }

dnnl::memory::dims to_dims(IntArrayRef v) { return dnnl::memory::dims(v.begin(), v.end()); }

dnnl::memory::desc act_desc(const Geometry& g, std::int64_t channels, const std::int64_t* spatial, dt d,
                            bool channels_last) {
  const DimVector sizes = act_sizes(g, channels, spatial);
  return dnnl::memory::desc(to_dims(sizes), d, to_dims(dense_strides(sizes, channels_last)));
}

// The weight (oc, ic / g, k...) contiguous, as oneDNN's (oc, ic / g, k...) or, grouped, (g, oc /
// g, ic / g, k...).
dnnl::memory::desc weight_desc(const Geometry& g, dt d) {
  dnnl::memory::dims sizes, strides;
  const std::int64_t icg = g.ic / g.g, ocg = g.oc / g.g, kn = g.k_numel();
  if (g.g > 1) {
    sizes.push_back(g.g);
    strides.push_back(ocg * icg * kn);
  }
  sizes.push_back(g.g > 1 ? ocg : g.oc);
  strides.push_back(icg * kn);
  sizes.push_back(icg);
  strides.push_back(kn);
  std::int64_t step = kn;
  for (int i = 0; i < g.nd; ++i) {
    step /= g.k[i];
    sizes.push_back(g.k[i]);
    strides.push_back(step);
  }
  return dnnl::memory::desc(sizes, d, strides);
}

dnnl::memory::desc any_like(const dnnl::memory::desc& md) {
  return dnnl::memory::desc(md.get_dims(), md.get_data_type(), tag::any);
}

// oneDNN's geometry check is out == (in + pad_l + pad_r - kernel) / s + 1. A transposed
// convolution's output padding may leave its output (our `in`) past the last window: pad the
// right less then (the positions past it get no gradient either way); none if no pad_r fits.
std::optional<std::int64_t> pad_right(const Geometry& g, int i) {
  const std::int64_t kernel = g.d[i] * (g.k[i] - 1) + 1;
  for (std::int64_t pr = g.p[i]; pr >= 0; --pr) {
    const std::int64_t span = g.in[i] + g.p[i] + pr - kernel;
    if (span < 0) break;
    if (span / g.s[i] + 1 == g.out[i]) return pr;
    if (span / g.s[i] + 1 < g.out[i]) break;
  }
  return std::nullopt;
}

std::shared_ptr<const Plan> make_plan(Role role, const Geometry& g, dt d, bool channels_last, bool bias) {
  auto plan = std::make_shared<Plan>();
  const dnnl::memory::desc x_md = act_desc(g, g.ic, g.in, d, channels_last);
  const dnnl::memory::desc y_md = act_desc(g, g.oc, g.out, d, channels_last);
  const dnnl::memory::desc w_md = weight_desc(g, d);
  const bool blocked = use_blocked(channels_last);
  const dnnl::memory::desc x_p = blocked ? any_like(x_md) : x_md, y_p = blocked ? any_like(y_md) : y_md;
  const dnnl::memory::desc w_p = any_like(w_md);
  dnnl::memory::dims strides, dilates, pad_l, pad_r;
  for (int i = 0; i < g.nd; ++i) {
    strides.push_back(g.s[i]);
    dilates.push_back(g.d[i] - 1);
    pad_l.push_back(g.p[i]);
    const std::int64_t pr = *pad_right(g, i);
    pad_r.push_back(pr);
  }
  const auto algo = dnnl::algorithm::convolution_direct;
  if (bias) plan->bias_md = dnnl::memory::desc({g.oc}, d == dt::f32 ? dt::f32 : d, tag::a);
  const dnnl::convolution_forward::primitive_desc fwd =
      bias ? dnnl::convolution_forward::primitive_desc(engine(), dnnl::prop_kind::forward_training, algo, x_p, w_p,
                                                       plan->bias_md, y_p, strides, dilates, pad_l, pad_r)
           : dnnl::convolution_forward::primitive_desc(engine(), dnnl::prop_kind::forward_training, algo, x_p, w_p,
                                                       y_p, strides, dilates, pad_l, pad_r);
  plan->has_bias = bias;
  switch (role) {
    case Role::Forward:
      plan->prim = dnnl::convolution_forward(fwd);
      plan->user[0] = x_md, plan->user[1] = w_md, plan->user[2] = y_md;
      plan->inner[0] = fwd.src_desc(), plan->inner[1] = fwd.weights_desc(), plan->inner[2] = fwd.dst_desc();
      break;
    case Role::BackwardData: {
      const dnnl::convolution_backward_data::primitive_desc pd(engine(), algo, x_p, w_p, y_p, strides, dilates,
                                                               pad_l, pad_r, fwd);
      plan->prim = dnnl::convolution_backward_data(pd);
      plan->user[0] = y_md, plan->user[1] = w_md, plan->user[2] = x_md;
      plan->inner[0] = pd.diff_dst_desc(), plan->inner[1] = pd.weights_desc(), plan->inner[2] = pd.diff_src_desc();
      break;
    }
    case Role::BackwardWeights: {
      const dnnl::convolution_backward_weights::primitive_desc pd(engine(), algo, x_p, w_p, y_p, strides, dilates,
                                                                  pad_l, pad_r, fwd);
      plan->prim = dnnl::convolution_backward_weights(pd);
      plan->user[0] = x_md, plan->user[1] = y_md, plan->user[2] = w_md;
      plan->inner[0] = pd.src_desc(), plan->inner[1] = pd.diff_dst_desc(), plan->inner[2] = pd.diff_weights_desc();
      break;
    }
  }
  for (int i = 0; i < 2; ++i)
    if (plan->inner[i] != plan->user[i])
      plan->to_inner[i] = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), plan->user[i], engine(), plan->inner[i]));
  if (plan->inner[2] != plan->user[2])
    plan->from_inner = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), plan->inner[2], engine(), plan->user[2]));
  return plan;
}

// Note [Small convolutions on one thread]
// oneDNN runs on GNU OpenMP, whose idle threads kael lets sleep (OMP_WAIT_POLICY=PASSIVE, set in
// kael/__init__.py so that they do not spin on the CPUs kael's own pool needs). Waking them for a
// region costs tens to hundreds of microseconds on a virtual machine, as much as a small
// convolution takes on one thread: LeNet's (8 and 15 million multiply-adds) ran slower on two
// threads than on one. So a convolution of fewer than kSerialMacs multiply-adds is planned and
// run for one OpenMP thread (the plan's key holds the thread count); larger ones use them all.
constexpr double kSerialMacs = 32e6;

int dnnl_threads(const Geometry& g) {
  const int n = openmp_threads();
  if (n <= 1) return n;
  const double macs = static_cast<double>(g.n) * static_cast<double>(g.oc) * static_cast<double>(g.out_numel()) *
                      static_cast<double>(g.ic / std::max<std::int64_t>(g.g, 1)) * static_cast<double>(g.k_numel());
  return macs < kSerialMacs ? 1 : n;
}

// The calling thread's OpenMP thread count set to n for a scope (kael's count again after it;
// sync_openmp_threads() has applied that one already).
class OpenMPThreadsScope {
 public:
  explicit OpenMPThreadsScope(int n) : changed_(n != openmp_threads()) {
    if (changed_) omp_set_num_threads(n);
  }
  ~OpenMPThreadsScope() {
    if (changed_) omp_set_num_threads(openmp_threads());
  }
  OpenMPThreadsScope(const OpenMPThreadsScope&) = delete;
  OpenMPThreadsScope& operator=(const OpenMPThreadsScope&) = delete;

 private:
  bool changed_;
};

std::shared_ptr<const Plan> get_plan(Role role, const Geometry& g, ScalarType dtype, bool channels_last, bool bias,
                                     int threads) {
  std::vector<std::int64_t> key{static_cast<std::int64_t>(role), static_cast<std::int64_t>(dtype),
                                channels_last ? 1 : 0, bias ? 1 : 0, threads, g.nd, g.n, g.g, g.ic, g.oc};
  for (int i = 0; i < g.nd; ++i)
    for (const std::int64_t v : {g.in[i], g.out[i], g.k[i], g.s[i], g.p[i], g.d[i]}) key.push_back(v);
  PlanCache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.index.find(key);
    if (it != c.index.end()) {
      c.lru.splice(c.lru.begin(), c.lru, it->second);
      return it->second->second;
    }
  }
  std::shared_ptr<const Plan> plan = make_plan(role, g, *dnnl_type(dtype), channels_last, bias);
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.index.find(key);
  if (it != c.index.end()) return it->second->second;
  c.lru.emplace_front(key, plan);
  c.index.emplace(std::move(key), c.lru.begin());
  if (c.lru.size() > kCacheSize) {
    c.index.erase(c.lru.back().first);
    c.lru.pop_back();
  }
  return plan;
}

// Whether oneDNN's geometry check can be met (a transposed convolution with output padding of a
// stride or more past its padding cannot: the loops take it).
bool dnnl_geometry_ok(const Geometry& g) {
  for (int i = 0; i < g.nd; ++i)
    if (!pad_right(g, i)) return false;
  return true;
}

// Runs a role on oneDNN: a, b and c are dense in the layouts the plan's user descriptors name.
void run_dnnl(Role role, const Plan& plan, const Tensor& a, const Tensor& b, const Tensor& c, const Tensor* bias) {
  thread_local dnnl::stream stream(engine());
  dnnl::memory user[3] = {dnnl::memory(plan.user[0], engine(), a.data_ptr()),
                          dnnl::memory(plan.user[1], engine(), b.data_ptr()),
                          dnnl::memory(plan.user[2], engine(), c.data_ptr())};
  dnnl::memory inner[3] = {user[0], user[1], user[2]};
  Tensor scratch[3];
  for (int i = 0; i < 3; ++i)
    if (i < 2 ? plan.to_inner[i].has_value() : plan.from_inner.has_value()) {
      const std::int64_t bytes[] = {static_cast<std::int64_t>(plan.inner[i].get_size())};
      scratch[i] = alloc_cpu(bytes, ScalarType::UInt8);
      inner[i] = dnnl::memory(plan.inner[i], engine(), scratch[i].data_ptr());
    }
  for (int i = 0; i < 2; ++i)
    if (plan.to_inner[i]) plan.to_inner[i]->execute(stream, user[i], inner[i]);
  std::unordered_map<int, dnnl::memory> args;
  switch (role) {
    case Role::Forward:
      args = {{DNNL_ARG_SRC, inner[0]}, {DNNL_ARG_WEIGHTS, inner[1]}, {DNNL_ARG_DST, inner[2]}};
      if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, dnnl::memory(plan.bias_md, engine(), bias->data_ptr()));
      break;
    case Role::BackwardData:
      args = {{DNNL_ARG_DIFF_DST, inner[0]}, {DNNL_ARG_WEIGHTS, inner[1]}, {DNNL_ARG_DIFF_SRC, inner[2]}};
      break;
    case Role::BackwardWeights:
      args = {{DNNL_ARG_SRC, inner[0]}, {DNNL_ARG_DIFF_DST, inner[1]}, {DNNL_ARG_DIFF_WEIGHTS, inner[2]}};
      break;
  }
  plan.prim.execute(stream, args);
  if (plan.from_inner) plan.from_inner->execute(stream, inner[2], user[2]);
  stream.wait();
}

// ---- the three roles on tensors

// out (n, c, ...) += bias (c), in the accumulation type, rounded once.
void add_bias(const Tensor& out, const Tensor& bias) {
  const Tensor b = bias.is_contiguous() ? bias : kael::contiguous(bias);
  const bool cl = !out.is_contiguous();
  const Tensor o = cl ? kael::contiguous(out) : out;
  const std::int64_t channels = o.sizes()[1], rows = o.sizes()[0] * channels;
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) {
      using A = Acc<T>;
      T* op = static_cast<T*>(o.data_ptr());
      const T* bp = static_cast<const T*>(b.data_ptr());
      const std::int64_t plane = o.numel() / std::max<std::int64_t>(rows, 1);
      parallel_for(0, rows, std::max<std::int64_t>(1, 32768 / std::max<std::int64_t>(plane, 1)),
                   [&](std::int64_t begin, std::int64_t end) {
                     for (std::int64_t row = begin; row < end; ++row) {
                       T* p = op + row * plane;
                       const A bv = static_cast<A>(bp[row % channels]);
                       for (std::int64_t j = 0; j < plane; ++j) p[j] = static_cast<T>(static_cast<A>(p[j]) + bv);
                     }
                   });
    }
  });
  if (cl) copy_cpu(out, o);
}

// c <- role(a, b) (+ bias for Forward). a and b: the role's inputs, any layout; returns c, new,
// dense in a's layout for the activations (contiguous for the weight).
Tensor run_role(Role role, const Geometry& g, const Tensor& a_in, const Tensor& b_in, const Tensor* bias) {
  const ScalarType dtype = a_in.dtype();
  bool a_cl = false, b_cl = false;
  Tensor a = dense(a_in, &a_cl);
  Tensor b = dense(b_in, &b_cl);
  // the activations share one layout; the weight is contiguous
  bool cl = a_cl;
  if (role == Role::BackwardWeights) {
    if (a_cl != b_cl) {
      cl = false;
      if (a_cl) a = kael::contiguous(a);
      if (b_cl) b = kael::contiguous(b);
    }
  } else if (b_cl) {
    b = kael::contiguous(b);
  }
  DimVector c_sizes;
  bool c_cl = cl;
  switch (role) {
    case Role::Forward:
      c_sizes = act_sizes(g, g.oc, g.out);
      break;
    case Role::BackwardData:
      c_sizes = act_sizes(g, g.ic, g.in);
      break;
    case Role::BackwardWeights:
      c_sizes = DimVector{g.oc, g.ic / g.g};
      for (int i = 0; i < g.nd; ++i) c_sizes.push_back(g.k[i]);
      c_cl = false;
      break;
  }
  Tensor c = alloc_dense(c_sizes, dtype, c_cl);
  if (c.numel() == 0) return c;
  if (a.numel() == 0 || b.numel() == 0) {  // no products to sum: zeros (then the bias)
    zero(c);
    if (bias != nullptr) {
      DimVector shape(c_sizes.size(), 1);
      shape[1] = g.oc;
      copy_cpu(c, kael::view(*bias, shape));
    }
    return c;
  }
  Tensor bias_c;
  if (bias != nullptr) bias_c = bias->is_contiguous() ? *bias : kael::contiguous(*bias);
  if (dnnl_supports(dtype) && dnnl_geometry_ok(g)) {
    sync_openmp_threads();
    const int threads = dnnl_threads(g);  // Note [Small convolutions on one thread]
    const OpenMPThreadsScope scope(threads);
    const std::shared_ptr<const Plan> plan = get_plan(role, g, dtype, cl, bias != nullptr, threads);
    run_dnnl(role, *plan, a, b, c, bias != nullptr ? &bias_c : nullptr);
    return c;
  }
  // the loops take contiguous tensors
  if (cl) {
    a = kael::contiguous(a);
    if (role == Role::BackwardWeights) b = kael::contiguous(b);
  }
  Tensor out = c_cl ? alloc_cpu(c_sizes, dtype) : c;
  if (dtype == ScalarType::Float64) {
    run_gemm(role, g, a, b, out);
  } else {
    run_loops(role, g, a, b, out);
  }
  if (bias != nullptr) add_bias(out, bias_c);
  if (!out.is_same(c)) copy_cpu(c, out);
  return c;
}

// The geometry of a backward kernel from the sizes it is given.
Geometry backward_geometry(const char* op, const Tensor& grad_output, IntArrayRef input_size,
                           IntArrayRef weight_size, IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                           bool transposed, std::int64_t groups) {
  const int nd = static_cast<int>(weight_size.size()) - 2;
  KAEL_CHECK(nd >= 1 && nd <= kS && static_cast<int>(input_size.size()) == nd + 2 && grad_output.dim() == nd + 2,
             op << ": expected input, weight and grad_output of one rank of 3 to 5, got sizes "
                << conv::list_str(input_size) << ", " << conv::list_str(weight_size) << " and "
                << conv::list_str(grad_output.sizes()));
  KAEL_CHECK(groups > 0 && weight_size[0] % groups == 0, op << ": bad groups " << groups);
  const DimVector s = conv::expand_param(op, "stride", stride, nd), p = conv::expand_param(op, "padding", padding, nd),
                  d = conv::expand_param(op, "dilation", dilation, nd);
  Geometry g;
  g.nd = nd;
  g.g = groups;
  g.n = input_size[0];
  // the plain convolution's x and y: (input, grad_output), or swapped when transposed
  const IntArrayRef x = transposed ? grad_output.sizes() : input_size;
  const IntArrayRef y = transposed ? input_size : grad_output.sizes();
  g.ic = x[1];
  g.oc = y[1];
  bool ok = grad_output.sizes()[0] == g.n && g.oc == weight_size[0] && g.ic == weight_size[1] * groups;
  for (int i = 0; i < nd; ++i) {
    g.in[i] = x[2 + i];
    g.out[i] = y[2 + i];
    g.k[i] = weight_size[2 + i];
    g.s[i] = s[i];
    g.p[i] = p[i];
    g.d[i] = d[i];
    KAEL_CHECK(s[i] > 0 && p[i] >= 0 && d[i] > 0, op << ": bad stride, padding or dilation");
    const std::int64_t span = g.in[i] + 2 * g.p[i] - g.d[i] * (g.k[i] - 1) - 1;
    ok = ok && span >= 0 && (transposed ? span / g.s[i] + 1 >= g.out[i] && (g.out[i] - 1) * g.s[i] <= span
                                        : span / g.s[i] + 1 == g.out[i]);
  }
  KAEL_CHECK(ok, op << ": grad_output of size " << conv::list_str(grad_output.sizes())
                    << " does not fit input size " << conv::list_str(input_size) << " and weight size "
                    << conv::list_str(weight_size));
  return g;
}

}  // namespace

Tensor convolution_cpu(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                       IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, bool transposed,
                       IntArrayRef output_padding, std::int64_t groups) {
  const char* op = "convolution";
  const Tensor* b = bias ? &*bias : nullptr;
  const Geometry g =
      conv::check_and_geometry(op, input, weight, b, stride, padding, dilation, transposed, output_padding, groups);
  conv::check_dtype(op, input.dtype(), transposed);
  check_same_device(op, kCPU, input.device());
  if (input.sizes()[1] == 0) {  // PyTorch's result: no channels either, whatever the weight's
    DimVector sizes{g.n, 0};
    for (int i = 0; i < g.nd; ++i) sizes.push_back(transposed ? g.in[i] : g.out[i]);
    return alloc_cpu(sizes, input.dtype());
  }
  if (!transposed) return run_role(Role::Forward, g, input, weight, b);
  const Tensor out = run_role(Role::BackwardData, g, input, weight, nullptr);
  if (b != nullptr && out.numel() > 0) add_bias(out, *b);
  return out;
}

Tensor convolution_backward_input_cpu(const Tensor& grad_output, IntArrayRef input_size, const Tensor& weight,
                                      IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, bool transposed,
                                      std::int64_t groups) {
  const char* op = "convolution_backward_input";
  KAEL_CHECK(grad_output.dtype() == weight.dtype(), op << ": expected grad_output and weight of one dtype, got "
                                                       << grad_output.dtype() << " and " << weight.dtype());
  conv::check_dtype(op, grad_output.dtype(), transposed);
  const Geometry g = backward_geometry(op, grad_output, input_size, weight.sizes(), stride, padding, dilation,
                                       transposed, groups);
  return transposed ? run_role(Role::Forward, g, grad_output, weight, nullptr)
                    : run_role(Role::BackwardData, g, grad_output, weight, nullptr);
}

Tensor convolution_backward_weight_cpu(const Tensor& grad_output, const Tensor& input, IntArrayRef weight_size,
                                       IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, bool transposed,
                                       std::int64_t groups) {
  const char* op = "convolution_backward_weight";
  KAEL_CHECK(grad_output.dtype() == input.dtype(), op << ": expected grad_output and input of one dtype, got "
                                                      << grad_output.dtype() << " and " << input.dtype());
  conv::check_dtype(op, grad_output.dtype(), transposed);
  const Geometry g = backward_geometry(op, grad_output, input.sizes(), weight_size, stride, padding, dilation,
                                       transposed, groups);
  return transposed ? run_role(Role::BackwardWeights, g, grad_output, input, nullptr)
                    : run_role(Role::BackwardWeights, g, input, grad_output, nullptr);
}

Tensor convolution_backward_bias_cpu(const Tensor& grad_output) {
  KAEL_CHECK(grad_output.dim() >= 2, "convolution_backward_bias: expected a grad_output of 2 dims or more, got size "
                                         << conv::list_str(grad_output.sizes()));
  const std::int64_t dims[] = {0, 2};
  return kael::sum(kael::flatten(grad_output, 2), IntArrayRef(dims));
}

}  // namespace kael::native
