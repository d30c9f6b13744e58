// Device-independent pieces of kernel set-up: new tensors on a device (through the device's
// allocator, Note [Allocators and storage]), the same-device check, and conversions and copies
// through the dispatcher (Note [Set-up calls the backend's ops]). See
// Note [Pointwise backends] in kael/native/cuda/pointwise.cuh.
#include "kael/core/concurrency.h"
#include "kael/core/error.h"
#include "kael/dispatch/dispatcher.h"
#include "kael/native/pointwise.h"
#include "kael/ops/copy_.h"
#include "kael/ops/to.h"

namespace kael::native {

namespace {
std::size_t storage_bytes(IntArrayRef sizes, std::int64_t elements, ScalarType dtype) {
  std::int64_t bytes = 0;
  KAEL_CHECK(!__builtin_mul_overflow(elements, static_cast<std::int64_t>(itemsize(dtype)), &bytes),
             "empty: storage size calculation overflowed for size " << shape_str(sizes) << " of " << dtype);
  return static_cast<std::size_t>(bytes);
}
}  // namespace

Tensor empty_on(IntArrayRef sizes, ScalarType dtype, Device device) {
  const std::int64_t n = checked_numel("empty", sizes);
  auto storage = Storage::allocate(storage_bytes(sizes, n, dtype), device);
  return Tensor(TensorImpl::make(std::move(storage), dtype, DimVector(sizes), contiguous_strides(sizes), 0));
}

Tensor empty_strided_on(IntArrayRef sizes, IntArrayRef strides, ScalarType dtype, Device device) {
  check_max_dims("empty_strided", static_cast<std::int64_t>(sizes.size()));
  std::int64_t extent = 1;  // elements spanned: 1 + sum((size - 1) * stride)
  bool empty = false;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) empty = true;
    std::int64_t span = 0;
    KAEL_CHECK(sizes[i] <= 0 || (!__builtin_mul_overflow(sizes[i] - 1, strides[i], &span) &&
                                 !__builtin_add_overflow(extent, span, &extent)),
               "empty_strided: storage size calculation overflowed for size " << shape_str(sizes) << " and strides "
                                                                              << shape_str(strides));
  }
  if (empty) extent = 0;
  auto storage = Storage::allocate(storage_bytes(sizes, extent, dtype), device);
  return Tensor(TensorImpl::make(std::move(storage), dtype, DimVector(sizes), DimVector(strides), 0));
}

namespace {
std::string device_name(Device d) { return d.is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(d.index); }
}  // namespace

void raise_device_mismatch(const char* op, Device expected, Device found) {
  KAEL_CHECK(false, op << ": expected all tensors to be on the same device, but found at least two devices, "
                       << device_name(expected) << " and " << device_name(found));
  __builtin_unreachable();
}

void check_copy_shapes(const Tensor& dst, const Tensor& src) {
  broadcast_shapes("copy_", dst.sizes(), src.sizes());
  KAEL_CHECK(src.dim() <= dst.dim(), "copy_: source of shape " << shape_str(src.sizes())
                                                               << " cannot be broadcast to "
                                                               << shape_str(dst.sizes()));
  for (std::int64_t i = 0; i < src.dim(); ++i) {
    const std::int64_t s = src.sizes()[i], d = dst.sizes()[dst.dim() - src.dim() + i];
    KAEL_CHECK(s == d || s == 1, "copy_: source of shape " << shape_str(src.sizes())
                                                           << " cannot be broadcast to "
                                                           << shape_str(dst.sizes()));
  }
}

namespace {
// Note [Set-up calls the backend's ops]
// Set-up converts and copies through the dispatcher, with the key set of the tensors' backend:
// the CPU's kernels for CPU tensors, a device's own for its tensors (a device without them raises
// "<op> is not implemented for <device>"), never a CPU loop over device memory. Autograd and the
// Python key see the op whose set-up this is, not its conversions (excluded below it), and the
// kernels run with the caller's lock held: set-up never drops it (Note [Concurrency]).
class BackendCall {
 public:
  explicit BackendCall(Device device) : keys_(device.backend_key()) {}
  DispatchKeySet keys() const { return keys_; }

 private:
  DispatchKeySet keys_;
  dispatch::ExcludeGuard below_{DispatchKeySet(DispatchKey::Autograd) | DispatchKeySet(DispatchKey::Python)};
  AllowUnlock locked_{false};
};
}  // namespace

Tensor to_dtype_on_device(const Tensor& src, ScalarType dtype) {
  if (src.dtype() == dtype) return src;
  const BackendCall call(src.device());
  return kael::redispatch::to(call.keys(), src, src.device(), dtype, /*non_blocking=*/false, /*copy=*/false);
}

void copy_on_device(const Tensor& dst, const Tensor& src) {
  check_same_device("copy_", dst.device(), src.device());
  const BackendCall call(dst.device());
  kael::redispatch::copy_(call.keys(), dst, src, /*non_blocking=*/false);
}

}  // namespace kael::native
