#pragma once
// Tensor: a handle (one intrusive pointer) to a TensorImpl. Copying shares the data.

#include <cstdint>
#include <ostream>
#include <string>

#include "kael/core/scalar.h"
#include "kael/core/tensor_impl.h"

namespace kael {

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(IntrusivePtr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return static_cast<bool>(impl_); }
  TensorImpl* impl() const { return impl_.get(); }
  const IntrusivePtr<TensorImpl>& impl_ptr() const { return impl_; }
  IntrusivePtr<TensorImpl> release_impl() { return std::move(impl_); }

  IntArrayRef sizes() const { return impl_->sizes(); }
  IntArrayRef strides() const { return impl_->strides(); }
  // size(d) / stride(d) accept negative dims; out of range raises IndexError.
  std::int64_t size(std::int64_t dim) const;
  std::int64_t stride(std::int64_t dim) const;
  std::int64_t dim() const { return impl_->dim(); }
  std::int64_t numel() const { return impl_->numel(); }
  ScalarType dtype() const { return impl_->dtype(); }
  Device device() const { return impl_->device(); }
  bool is_contiguous() const { return impl_->is_contiguous(); }
  DispatchKeySet key_set() const { return impl_->key_set(); }
  void* data_ptr() const { return impl_->data(); }
  template <typename T>
  T* data() const {
    return static_cast<T*>(impl_->data());
  }
  std::int64_t element_size() const { return itemsize(dtype()); }

  // The single element as a Scalar of the tensor's kind (RuntimeError unless numel() == 1).
  Scalar item() const;
  std::string to_string() const;  // PyTorch-style repr

  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  void bump_version() const { impl_->storage()->bump_version(); }

 private:
  IntrusivePtr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// A pointwise operand: a tensor or a number. It owns its tensor, so a dispatcher argument
// of this type can be saved (autograd) or held on a boxed stack beyond the call.
class Operand {
 public:
  Operand(const Tensor& t) : tensor_(t) {}             // NOLINT: implicit by design
  Operand(Tensor&& t) : tensor_(std::move(t)) {}        // NOLINT
  Operand(const Scalar& s) : scalar_(s) {}              // NOLINT
  Operand(double v) : scalar_(v) {}                     // NOLINT
  Operand(float v) : scalar_(v) {}                      // NOLINT
  Operand(std::int64_t v) : scalar_(v) {}               // NOLINT
  Operand(int v) : scalar_(v) {}                        // NOLINT
  Operand(bool v) : scalar_(v) {}                       // NOLINT

  bool is_tensor() const { return tensor_.defined(); }
  const Tensor& tensor() const { return tensor_; }
  const Scalar& scalar() const { return scalar_; }

 private:
  Tensor tensor_;
  Scalar scalar_;
};

// Wraps a dim into [0, ndim); raises IndexError naming `op` when out of range.
std::int64_t wrap_dim(const char* op, std::int64_t dim, std::int64_t ndim);

// Shape formatting for messages: [2, 3].
std::string shape_str(IntArrayRef sizes);

}  // namespace kael
