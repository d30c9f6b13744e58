#pragma once
// Tensor: a handle (one intrusive pointer) to a TensorImpl. Copying shares the data.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

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
  // The repr with more suffixes after dtype (requires_grad=True, grad_fn=<...>), wrapped as
  // PyTorch wraps them.
  std::string to_string(const std::vector<std::string>& extra_suffixes) const;

  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  void bump_version() const { impl_->bump_version(); }

 private:
  IntrusivePtr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Note [Print options]
// What Tensor::to_string reads, as torch.set_printoptions sets it: digits after the point (or of
// the mantissa in scientific notation), the element count above which the repr is summarised
// (may be infinite), the items kept at each end of a summarised dim, the line width, and
// scientific notation forced on (1), off (0) or chosen from the values (-1). One value for the
// process, as in PyTorch; kael.set_printoptions sets it.
struct PrintOptions {
  int precision = 4;
  double threshold = 1000;
  std::int64_t edgeitems = 3;
  std::int64_t linewidth = 80;
  int sci_mode = -1;
};
PrintOptions print_options();
void set_print_options(const PrintOptions& options);


// A pointwise operand: a tensor or a number.
//
// Note [Operand ownership]
// An Operand made from a `const Tensor&` refers to that tensor without taking a reference
// (as a `const Tensor&` argument does): it is meant to be an argument, living as long as the
// call it is passed to. Every copy or move of an Operand owns its tensor, so whatever keeps one
// beyond the call (autograd saving an input, a boxed stack, a container) holds a reference.
// This keeps the tiny-op path free of reference counting while the dispatcher's argument type
// stays safe to save.
class Operand {
 public:
  Operand(const Tensor& t) : tensor_(&t) {}             // NOLINT: implicit by design (borrows)
  Operand(Tensor&& t) : owned_(std::move(t)), tensor_(&owned_) {}  // NOLINT
  Operand(const Scalar& s) : scalar_(s) {}              // NOLINT
  Operand(double v) : scalar_(v) {}                     // NOLINT
  Operand(float v) : scalar_(v) {}                      // NOLINT
  Operand(std::int64_t v) : scalar_(v) {}               // NOLINT
  Operand(int v) : scalar_(v) {}                        // NOLINT
  Operand(bool v) : scalar_(v) {}                       // NOLINT
  Operand(const Operand& o) : scalar_(o.scalar_) { own(o); }
  Operand(Operand&& o) noexcept : scalar_(o.scalar_) { own(o); }
  Operand& operator=(const Operand& o) {
    if (this != &o) {
      scalar_ = o.scalar_;
      own(o);
    }
    return *this;
  }
  Operand& operator=(Operand&& o) noexcept { return *this = static_cast<const Operand&>(o); }
  ~Operand() = default;

  bool is_tensor() const { return tensor_ != nullptr; }
  const Tensor& tensor() const { return *tensor_; }
  const Scalar& scalar() const { return scalar_; }
  // Makes this Operand refer to t without taking a reference (see the Note): for an argument
  // being converted in place, whose tensor outlives the call.
  void borrow(const Tensor& t) {
    owned_ = Tensor();
    tensor_ = &t;
  }
  // Whether this Operand holds a reference to its tensor (every copy does).
  bool owns_tensor() const { return tensor_ == &owned_; }

 private:
  void own(const Operand& o) {
    if (o.tensor_ == nullptr) {
      owned_ = Tensor();
      tensor_ = nullptr;
    } else {
      owned_ = *o.tensor_;
      tensor_ = &owned_;
    }
  }

  Tensor owned_;
  const Tensor* tensor_ = nullptr;
  Scalar scalar_;
};

// A list of tensor arguments (Tensor[] in the registry), viewing a buffer the caller owns.
using TensorList = std::span<const Tensor>;

// Wraps a dim into [0, ndim); raises IndexError naming `op` when out of range.
std::int64_t wrap_dim(const char* op, std::int64_t dim, std::int64_t ndim);

// Shape formatting for messages: [2, 3].
std::string shape_str(IntArrayRef sizes);

}  // namespace kael
