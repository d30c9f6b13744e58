#pragma once
// TensorImpl: shape, strides, offset, dtype and device of a view over a Storage.

#include <atomic>
#include <cstdint>
#include <memory>

#include "kael/core/device.h"
#include "kael/core/dispatch_key_set.h"
#include "kael/core/intrusive_ptr.h"
#include "kael/core/scalar_type.h"
#include "kael/core/small_vector.h"
#include "kael/core/storage.h"

namespace kael {

// Note [Autograd metadata]
// A tensor that takes part in autograd (requires grad, has a grad_fn, a .grad or hooks) owns an
// AutogradMeta (kael/autograd/autograd.h); the core knows it only through this base, so that
// nothing below autograd depends on it. Tensors that never touch autograd carry a null pointer.
struct AutogradMetaBase {
  virtual ~AutogradMetaBase() = default;
};

class TensorImpl : public RefCounted, public FreeListAllocated<TensorImpl> {
 public:
  // A tensor over `storage` starting `offset` elements in; strides are in elements.
  static IntrusivePtr<TensorImpl> make(IntrusivePtr<Storage> storage, ScalarType dtype, DimVector sizes,
                                       DimVector strides, std::int64_t offset);
  static void release(TensorImpl* impl) noexcept;

  IntArrayRef sizes() const { return sizes_; }
  IntArrayRef strides() const { return strides_; }
  std::int64_t dim() const { return static_cast<std::int64_t>(sizes_.size()); }
  std::int64_t numel() const { return numel_; }
  std::int64_t offset() const { return offset_; }
  ScalarType dtype() const { return dtype_; }
  Device device() const { return storage_->device(); }
  bool is_contiguous() const { return contiguous_; }
  // Note [Key sets belong to tensors]
  // The backend key follows the storage's device; other keys (Python, Autograd) are the
  // tensor's own and survive geometry and storage changes.
  DispatchKeySet key_set() const { return keys_; }
  void add_keys(DispatchKeySet keys) { keys_ = keys_ | keys; }
  void remove_keys(DispatchKeySet keys) { keys_ = keys_ - keys; }

  // Note [Views record their base]
  // A view (made by a view op over another tensor's storage) keeps the tensor it views,
  // resolved to the root: the view of a view has the same base. Null for non-views.
  bool is_view() const { return static_cast<bool>(view_base_); }
  const IntrusivePtr<TensorImpl>& view_base() const { return view_base_; }
  // Makes a new impl viewing `base`'s storage with the given geometry, recording the base and
  // taking its key set, less Autograd (autograd's view kernels give a view its own history).
  static IntrusivePtr<TensorImpl> make_view(const TensorImpl& base, DimVector sizes, DimVector strides,
                                            std::int64_t offset);
  Storage* storage() const { return storage_.get(); }
  const IntrusivePtr<Storage>& storage_ptr() const { return storage_; }
  // Address of the first element.
  void* data() const {
    return static_cast<char*>(storage_->data()) + offset_ * itemsize(dtype_);
  }

  // Changes the view in place (used by in-place view ops such as squeeze_).
  void set_geometry(DimVector sizes, DimVector strides, std::int64_t offset);
  // Points the tensor at new storage (resizing an out= argument); views of the old storage
  // keep it.
  void set_storage(IntrusivePtr<Storage> storage, DimVector sizes, DimVector strides, std::int64_t offset);
  // Points the tensor at other's storage, geometry and dtype, keeping everything else of this impl
  // (its Python object, its keys); views of the old storage keep it. Module.to(dtype) uses it
  // (kael._C._set_data_) so that a converted parameter stays the same object.
  void set_data(const TensorImpl& other);

  // Note [Version counter] (kael/core/storage.h): a tensor reads and bumps its storage's
  // counter, unless it has one of its own: Tensor.data gets a fresh counter over the same memory
  // (PyTorch's), so that writing through it does not invalidate what autograd saved of the
  // tensor. The views made from it, its detach() and autograd's saved aliases of it share it.
  std::uint32_t version() const {
    return version_ ? version_->load(std::memory_order_relaxed) : storage_->version();
  }
  void bump_version() const {
    if (!version_) [[likely]] {
      storage_->bump_version();
      return;
    }
    storage_->check_write();
    if (!storage_->is_inference()) version_->fetch_add(1, std::memory_order_relaxed);
  }
  void set_own_version_counter() { version_ = std::make_shared<std::atomic<std::uint32_t>>(0); }
  void share_version_counter(const TensorImpl& other) { version_ = other.version_; }

  // Note [PyObject preservation]
  // The Python object that wraps this impl, or null. Handing the same impl to Python again
  // returns the same object (`t.add_(1) is t`, `x.grad is x.grad`, a Python subclass and its
  // __dict__ survive a round trip through C++), for as long as the impl lives:
  // - Normally the Python object owns a reference to the impl and the impl holds a borrowed
  //   back-pointer, cleared when the Python object dies.
  // - When the last Python reference goes while C++ still holds the impl (a .grad, a view's
  //   base, a tensor saved by autograd), the object is not deallocated: ownership flips, the
  //   impl owns the object (owns_pyobj()) and the object's pointer to the impl is borrowed.
  //   The binding flips it back when it hands the object to Python again.
  // - When the last reference to an impl that owns its object goes, release() does not
  //   destroy the impl: it calls pyobj_releaser, which (under the GIL) gives the impl's
  //   reference back to the object and drops the object, whose deallocation destroys the impl.
  // The binding (csrc/tensor_object.cpp) does the rest; the core only keeps the flag and the
  // one branch in release().
  void* pyobj() const { return pyobj_; }
  void set_pyobj(void* obj) { pyobj_ = obj; }
  bool owns_pyobj() const { return owns_pyobj_; }
  void set_owns_pyobj(bool owns) { owns_pyobj_ = owns; }
  // Called instead of destroying an impl that owns its Python object (set by the binding).
  using PyObjReleaser = void (*)(TensorImpl*) noexcept;
  static inline PyObjReleaser pyobj_releaser = nullptr;

  // See Note [Autograd metadata]; null for tensors autograd never saw.
  AutogradMetaBase* autograd_meta() const { return autograd_meta_.get(); }
  void set_autograd_meta(std::unique_ptr<AutogradMetaBase> meta) { autograd_meta_ = std::move(meta); }

 private:
  TensorImpl() = default;
  ~TensorImpl() = default;
  void refresh();

  DimVector sizes_;
  DimVector strides_;
  std::int64_t offset_ = 0;
  std::int64_t numel_ = 0;
  IntrusivePtr<Storage> storage_;
  std::shared_ptr<std::atomic<std::uint32_t>> version_;  // null: the storage's counter
  ScalarType dtype_ = ScalarType::Float32;
  bool contiguous_ = true;
  bool owns_pyobj_ = false;  // see Note [PyObject preservation]
  DispatchKeySet keys_;
  void* pyobj_ = nullptr;
  IntrusivePtr<TensorImpl> view_base_;
  std::unique_ptr<AutogradMetaBase> autograd_meta_;
};

// Note [Maximum dims]
// A tensor has at most kMaxDims dimensions (NumPy's limit). Every entry point that creates
// sizes (the Python size-list parser, nested-sequence and buffer import, factories, view ops,
// TensorImpl itself) checks it before allocating, so dims handling stays linear and the
// recursions over dims (repr, tolist) stay shallow.
inline constexpr std::int64_t kMaxDims = 64;
// Raises ValueError "<op>: a tensor has at most 64 dimensions (got ndim)" when ndim > kMaxDims.
[[noreturn]] void throw_too_many_dims(const char* op, std::int64_t ndim);
inline void check_max_dims(const char* op, std::int64_t ndim) {
  if (ndim > kMaxDims) [[unlikely]]
    throw_too_many_dims(op, ndim);
}

// Contiguous (row-major) strides of a shape.
DimVector contiguous_strides(IntArrayRef sizes);
// Whether sizes/strides describe a row-major contiguous layout (size-1 dims ignored).
bool compute_contiguous(IntArrayRef sizes, IntArrayRef strides);
// Product of sizes; raises ValueError on negative sizes or overflow, naming `op`.
std::int64_t checked_numel(const char* op, IntArrayRef sizes);

}  // namespace kael
