#include "kael/core/tensor_impl.h"

#include "kael/core/error.h"
#include "kael/core/tensor.h"

namespace kael {

IntrusivePtr<TensorImpl> TensorImpl::make(IntrusivePtr<Storage> storage, ScalarType dtype, DimVector sizes,
                                          DimVector strides, std::int64_t offset) {
  check_max_dims("tensor", static_cast<std::int64_t>(sizes.size()));
  auto impl = IntrusivePtr<TensorImpl>::adopt(new TensorImpl());
  impl->storage_ = std::move(storage);
  impl->dtype_ = dtype;
  impl->sizes_ = std::move(sizes);
  impl->strides_ = std::move(strides);
  impl->offset_ = offset;
  impl->keys_ = DispatchKeySet(impl->storage_->device().backend_key());
  impl->refresh();
  return impl;
}

IntrusivePtr<TensorImpl> TensorImpl::make_view(const TensorImpl& base, DimVector sizes, DimVector strides,
                                               std::int64_t offset) {
  auto impl = make(base.storage_, base.dtype_, std::move(sizes), std::move(strides), offset);
  impl->keys_ = base.keys_.remove(DispatchKey::Autograd);
  impl->version_ = base.version_;
  if (impl->storage_->is_inference()) {
    // no view tracking for inference tensors (Note [Inference tensors])
  } else if (base.view_base_) {
    impl->view_base_ = base.view_base_;
  } else {
    impl->view_base_ = IntrusivePtr<TensorImpl>::borrow(const_cast<TensorImpl*>(&base));
  }
  return impl;
}

void TensorImpl::release(TensorImpl* impl) noexcept {
  // See Note [PyObject preservation]: the impl owns its Python object, which dies with it.
  if (impl->owns_pyobj_) [[unlikely]] {
    pyobj_releaser(impl);
    return;
  }
  delete impl;
}

void TensorImpl::set_geometry(DimVector sizes, DimVector strides, std::int64_t offset) {
  check_max_dims("tensor", static_cast<std::int64_t>(sizes.size()));
  sizes_ = std::move(sizes);
  strides_ = std::move(strides);
  offset_ = offset;
  refresh();
}

void TensorImpl::set_storage(IntrusivePtr<Storage> storage, DimVector sizes, DimVector strides,
                             std::int64_t offset) {
  const DispatchKey old_backend = storage_->device().backend_key();
  storage_ = std::move(storage);
  keys_ = keys_.remove(old_backend).add(storage_->device().backend_key());
  set_geometry(std::move(sizes), std::move(strides), offset);
}

void TensorImpl::set_data(const TensorImpl& other) {
  dtype_ = other.dtype_;
  set_storage(other.storage_, other.sizes_, other.strides_, other.offset_);
}

void TensorImpl::refresh() {
  numel_ = 1;
  for (std::int64_t s : sizes_) numel_ *= s;
  contiguous_ = compute_contiguous(sizes_, strides_);
}

DimVector contiguous_strides(IntArrayRef sizes) {
  DimVector strides(sizes.size());
  std::int64_t s = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<std::int64_t>(sizes[i], 1);
  }
  return strides;
}

bool compute_contiguous(IntArrayRef sizes, IntArrayRef strides) {
  for (std::int64_t s : sizes)
    if (s == 0) return true;  // an empty tensor is contiguous whatever its strides
  std::int64_t expected = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

void throw_too_many_dims(const char* op, std::int64_t ndim) {
  detail::throw_check<ValueError>(__FILE__, __LINE__, "ndim <= kMaxDims",
                                  (detail::MessageBuilder() << op << ": a tensor has at most " << kMaxDims
                                                            << " dimensions (got " << ndim << ")")
                                      .out.str());
}

std::int64_t checked_numel(const char* op, IntArrayRef sizes) {
  check_max_dims(op, static_cast<std::int64_t>(sizes.size()));
  std::int64_t n = 1;
  for (std::int64_t s : sizes) {
    KAEL_CHECK(s >= 0, op << ": negative dimension " << s << " in size " << shape_str(sizes));
    KAEL_CHECK(!__builtin_mul_overflow(n, s, &n), op << ": size " << shape_str(sizes) << " is too large");
  }
  return n;
}

}  // namespace kael
