// Autocast: the thread's state, the op table and the one boxed kernel of the Autocast key.
// See Note [Autocast] in kael/autocast/autocast.h.

#include "kael/autocast/autocast.h"

#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kael/autograd/autograd.h"
#include "kael/core/error.h"
#include "kael/dispatch/dispatcher.h"
#include "kael/ops/to.h"

namespace kael::autocast {

namespace {

// The ops with an autocast kernel, by name without the overload (every overload of a name
// gets the kernel), with their policy: PyTorch's CPU lists (aten/src/ATen/autocast_mode.cpp,
// AutocastCPU). Names the registry does not have are skipped when the kernels are installed,
// so an op joins autocast as soon as it is added to native_functions.yaml under its name.
struct TableEntry {
  const char* name;
  Policy policy;
};
constexpr TableEntry kTable[] = {
    // Run in the autocast dtype.
    {"conv1d", Policy::LowerPrecision},
    {"conv2d", Policy::LowerPrecision},
    {"conv3d", Policy::LowerPrecision},
    {"bmm", Policy::LowerPrecision},
    {"mm", Policy::LowerPrecision},
    {"linalg_vecdot", Policy::LowerPrecision},
    {"baddbmm", Policy::LowerPrecision},
    {"addmm", Policy::LowerPrecision},
    {"_addmm_activation", Policy::LowerPrecision},
    {"addbmm", Policy::LowerPrecision},
    {"linear", Policy::LowerPrecision},
    {"_convolution", Policy::LowerPrecision},
    {"matmul", Policy::LowerPrecision},
    {"conv_tbc", Policy::LowerPrecision},
    {"mkldnn_rnn_layer", Policy::LowerPrecision},
    {"conv_transpose1d", Policy::LowerPrecision},
    {"conv_transpose2d", Policy::LowerPrecision},
    {"conv_transpose3d", Policy::LowerPrecision},
    {"prelu", Policy::LowerPrecision},
    {"scaled_dot_product_attention", Policy::LowerPrecision},
    {"_native_multi_head_attention", Policy::LowerPrecision},
    // Run in float32.
    {"avg_pool3d", Policy::Fp32},
    {"binary_cross_entropy", Policy::Fp32},
    {"grid_sampler", Policy::Fp32},
    {"polar", Policy::Fp32},
    {"prod", Policy::Fp32},
    {"quantile", Policy::Fp32},
    {"nanquantile", Policy::Fp32},
    {"stft", Policy::Fp32},
    {"cdist", Policy::Fp32},
    {"grid_sampler_2d", Policy::Fp32},
    {"_grid_sampler_2d_cpu_fallback", Policy::Fp32},
    {"grid_sampler_3d", Policy::Fp32},
    {"trace", Policy::Fp32},
    {"view_as_complex", Policy::Fp32},
    {"cholesky", Policy::Fp32},
    {"cholesky_inverse", Policy::Fp32},
    {"cholesky_solve", Policy::Fp32},
    {"inverse", Policy::Fp32},
    {"lu_solve", Policy::Fp32},
    {"orgqr", Policy::Fp32},
    {"ormqr", Policy::Fp32},
    {"pinverse", Policy::Fp32},
    {"max_pool3d", Policy::Fp32},
    {"max_unpool2d", Policy::Fp32},
    {"max_unpool3d", Policy::Fp32},
    {"adaptive_avg_pool3d", Policy::Fp32},
    {"reflection_pad1d", Policy::Fp32},
    {"reflection_pad2d", Policy::Fp32},
    {"replication_pad1d", Policy::Fp32},
    {"replication_pad2d", Policy::Fp32},
    {"replication_pad3d", Policy::Fp32},
    {"mse_loss", Policy::Fp32},
    {"cosine_embedding_loss", Policy::Fp32},
    {"nll_loss", Policy::Fp32},
    {"nll_loss2d", Policy::Fp32},
    {"hinge_embedding_loss", Policy::Fp32},
    {"poisson_nll_loss", Policy::Fp32},
    {"smooth_l1_loss", Policy::Fp32},
    {"cross_entropy_loss", Policy::Fp32},
    // kael's cross_entropy_loss: F.cross_entropy's per-sample losses, reduced after it.
    {"cross_entropy_losses", Policy::Fp32},
    {"l1_loss", Policy::Fp32},
    {"huber_loss", Policy::Fp32},
    {"margin_ranking_loss", Policy::Fp32},
    {"soft_margin_loss", Policy::Fp32},
    {"triplet_margin_loss", Policy::Fp32},
    {"multi_margin_loss", Policy::Fp32},
    {"ctc_loss", Policy::Fp32},
    {"kl_div", Policy::Fp32},
    {"multilabel_margin_loss", Policy::Fp32},
    {"binary_cross_entropy_with_logits", Policy::Fp32},
    {"fft_fft", Policy::Fp32},
    {"fft_ifft", Policy::Fp32},
    {"fft_fft2", Policy::Fp32},
    {"fft_ifft2", Policy::Fp32},
    {"fft_fftn", Policy::Fp32},
    {"fft_ifftn", Policy::Fp32},
    {"fft_rfft", Policy::Fp32},
    {"fft_irfft", Policy::Fp32},
    {"fft_rfft2", Policy::Fp32},
    {"fft_irfft2", Policy::Fp32},
    {"fft_rfftn", Policy::Fp32},
    {"fft_irfftn", Policy::Fp32},
    {"fft_hfft", Policy::Fp32},
    {"fft_ihfft", Policy::Fp32},
    {"linalg_cond", Policy::Fp32},
    {"linalg_matrix_rank", Policy::Fp32},
    {"linalg_solve", Policy::Fp32},
    {"linalg_cholesky", Policy::Fp32},
    {"linalg_svdvals", Policy::Fp32},
    {"linalg_eigvals", Policy::Fp32},
    {"linalg_eigvalsh", Policy::Fp32},
    {"linalg_inv", Policy::Fp32},
    {"linalg_householder_product", Policy::Fp32},
    {"linalg_tensorinv", Policy::Fp32},
    {"linalg_tensorsolve", Policy::Fp32},
    {"fake_quantize_per_tensor_affine", Policy::Fp32},
    {"geqrf", Policy::Fp32},
    {"_lu_with_info", Policy::Fp32},
    {"qr", Policy::Fp32},
    {"svd", Policy::Fp32},
    {"triangular_solve", Policy::Fp32},
    {"fractional_max_pool2d", Policy::Fp32},
    {"fractional_max_pool3d", Policy::Fp32},
    {"adaptive_max_pool3d", Policy::Fp32},
    {"multilabel_margin_loss_forward", Policy::Fp32},
    {"linalg_qr", Policy::Fp32},
    {"linalg_cholesky_ex", Policy::Fp32},
    {"linalg_svd", Policy::Fp32},
    {"linalg_eig", Policy::Fp32},
    {"linalg_eigh", Policy::Fp32},
    {"linalg_lstsq", Policy::Fp32},
    {"linalg_inv_ex", Policy::Fp32},
    // Run in the widest floating dtype of the arguments.
    {"stack", Policy::Promote},
    {"cat", Policy::Promote},
    {"index_copy", Policy::Promote},
};

constexpr int kNumDeviceTypes = 2;

struct ThreadState {
  bool enabled[kNumDeviceTypes] = {false, false};
  ScalarType dtype[kNumDeviceTypes] = {ScalarType::BFloat16, ScalarType::Float16};
  bool cache_enabled = true;
  std::int64_t nesting = 0;
  // Source tensor's impl -> (the source, held so that its address is not reused; its cast).
  std::unordered_map<const TensorImpl*, std::pair<Tensor, Tensor>> cache;
};
thread_local ThreadState tls;

// The installed kernels' ops and policies: written once (install), read-only after.
std::vector<std::pair<const dispatch::OpEntry*, Policy>> g_installed;
std::once_flag g_install_once;

std::string_view base_name(std::string_view name) {
  const auto dot = name.find('.');
  return dot == std::string_view::npos ? name : name.substr(0, dot);
}

int index_of(DeviceType d) { return static_cast<int>(d); }

bool eligible(const Tensor& t, DeviceType device) {
  return t.device().type == device && is_floating(t.dtype()) && t.dtype() != ScalarType::Float64;
}

// The cast of an argument (PyTorch's cached_cast): float64 and other devices' tensors stay.
Tensor cached_cast(const Tensor& t, ScalarType to, DeviceType device) {
  if (!eligible(t, device) || t.dtype() == to) return t;
  const bool can_cache = tls.cache_enabled && autograd::GradMode::is_enabled() && to == tls.dtype[index_of(device)] &&
                         t.dtype() == ScalarType::Float32 && autograd::requires_grad(t) && autograd::is_leaf(t) && !t.impl()->is_view();
  if (!can_cache) return kael::to(t, to);
  auto it = tls.cache.find(t.impl());
  if (it != tls.cache.end()) return it->second.second;
  Tensor cast = kael::to(t, to);
  tls.cache.emplace(t.impl(), std::make_pair(t, cast));
  return cast;
}

// PyTorch's prioritize: float32 wins over the autocast dtype; another 16-bit dtype is an error.
ScalarType widest(const dispatch::OpEntry& op, ScalarType current, const Tensor& t, DeviceType device) {
  if (!eligible(t, device)) return current;
  const ScalarType next = t.dtype();
  if (current == ScalarType::Float32 || next == ScalarType::Float32) return ScalarType::Float32;
  KAEL_CHECK(next == current, base_name(op.name) << ": autocast found arguments of dtypes " << current << " and "
                                                 << next << "; it promotes only between float32 and " << current);
  return current;
}

void autocast_kernel(const dispatch::OpEntry& op, DispatchKeySet, dispatch::Stack& stack) {
  Policy policy = Policy::LowerPrecision;
  for (const auto& [entry, p] : g_installed)
    if (entry == &op) policy = p;
  dispatch::ExcludeGuard no_autocast(DispatchKeySet(DispatchKey::Autocast));
  const std::size_t base = stack.size() - static_cast<std::size_t>(op.num_args);

  // The device of the call: its first tensor's.
  std::optional<DeviceType> device;
  for (std::size_t i = base; i < stack.size() && !device; ++i) {
    const dispatch::IValue& v = stack[i];
    if (v.is_tensor()) {
      device = v.to_tensor().device().type;
    } else if (v.tag() == dispatch::IValue::Tag::TensorList && !v.to_tensor_list().empty()) {
      device = v.to_tensor_list().front().device().type;
    }
  }
  if (device && tls.enabled[index_of(*device)]) {
    const ScalarType lower = tls.dtype[index_of(*device)];
    ScalarType to = policy == Policy::Fp32 ? ScalarType::Float32 : lower;
    if (policy == Policy::Promote) {
      for (std::size_t i = base; i < stack.size(); ++i) {
        const dispatch::IValue& v = stack[i];
        if (v.is_tensor()) {
          to = widest(op, to, v.to_tensor(), *device);
        } else if (v.tag() == dispatch::IValue::Tag::TensorList) {
          for (const Tensor& t : v.to_tensor_list()) to = widest(op, to, t, *device);
        }
      }
    }
    for (std::size_t i = base; i < stack.size(); ++i) {
      dispatch::IValue& v = stack[i];
      if (v.is_tensor()) {
        Tensor cast = cached_cast(v.to_tensor(), to, *device);
        v = dispatch::IValue(std::move(cast));
      } else if (v.tag() == dispatch::IValue::Tag::TensorList) {
        for (Tensor& t : v.to_tensor_list()) t = cached_cast(t, to, *device);
      }
    }
  }
  dispatch::call_boxed(op, stack);
}

void install() {
  std::call_once(g_install_once, [] {
    for (const dispatch::OpEntry* op : dispatch::all_ops()) {
      // An op's out= form (add.out, mm.out) is not autocast's, as in PyTorch: casting out would
      // write the result into a cast copy and leave the caller's tensor alone.
      if (std::string_view(op->name).ends_with(".out")) continue;
      if (auto policy = policy_of(op->name)) {
        dispatch::set_boxed_kernel(*op, DispatchKey::Autocast, &autocast_kernel);
        g_installed.emplace_back(op, *policy);
      }
    }
  });
}

void sync_key() {
  const bool any = tls.enabled[0] || tls.enabled[1];
  dispatch::tls_included = any ? dispatch::tls_included.add(DispatchKey::Autocast)
                               : dispatch::tls_included.remove(DispatchKey::Autocast);
}

}  // namespace

Tensor cast(const Tensor& t, ScalarType to, DeviceType device) { return cached_cast(t, to, device); }

std::optional<Policy> policy_of(std::string_view name) {
  const std::string_view base = base_name(name);
  for (const TableEntry& e : kTable)
    if (base == e.name) return e.policy;
  return std::nullopt;
}

std::vector<std::string> registered_ops() {
  install();
  std::vector<std::string> out;
  out.reserve(g_installed.size());
  for (const auto& [op, policy] : g_installed) out.emplace_back(op->name);
  return out;
}

bool is_enabled(DeviceType device) { return tls.enabled[index_of(device)]; }

void set_enabled(DeviceType device, bool enabled) {
  if (enabled) install();
  tls.enabled[index_of(device)] = enabled;
  sync_key();
}

ScalarType get_dtype(DeviceType device) { return tls.dtype[index_of(device)]; }

// Any dtype, as torch.set_autocast_dtype takes; kael.autocast disables itself (with a warning)
// for a dtype other than float16 and bfloat16.
void set_dtype(DeviceType device, ScalarType dtype) { tls.dtype[index_of(device)] = dtype; }

bool is_cache_enabled() { return tls.cache_enabled; }
void set_cache_enabled(bool enabled) { tls.cache_enabled = enabled; }
std::int64_t increment_nesting() { return ++tls.nesting; }
std::int64_t decrement_nesting() { return --tls.nesting; }
void clear_cache() { tls.cache.clear(); }
std::int64_t cache_size() { return static_cast<std::int64_t>(tls.cache.size()); }

}  // namespace kael::autocast
