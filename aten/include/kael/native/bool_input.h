#pragma once
// A bool tensor a hand-written CPU kernel reads, with every byte 0 or 1 (Note [Bool bytes] in
// kael/native/pointwise.h). The generated CPU entry of each such kernel (codegen/gen.py,
// bool_reads) wraps each tensor argument the kernel reads and does not write:
//   const native::BoolInput mask_read(mask);
//   return native::masked_select_cpu(self_read.get(), mask_read.get());
// A tensor that is not bool costs one comparison. A bool tensor's bytes are scanned (under the
// caller's lock, Note [Concurrency]); only where one is neither 0 nor 1 does the kernel get a new
// tensor of the same shape holding (byte != 0), so kernels may read bool as C++ bool.

#include <optional>
#include <vector>

#include "kael/core/tensor.h"

namespace kael::native {

// Whether every byte of bool tensor t is 0 or 1.
bool bool_bytes_canonical(const Tensor& t);
// A new contiguous bool tensor of t's shape holding (byte != 0) for each element of t.
Tensor canonical_bool_copy(const Tensor& t);

class BoolInput {
 public:
  explicit BoolInput(const Tensor& t) : t_(&t) {
    if (t.defined() && t.dtype() == ScalarType::Bool) [[unlikely]] {
      if (!bool_bytes_canonical(t)) owned_ = canonical_bool_copy(t);
    }
  }
  BoolInput(const BoolInput&) = delete;
  BoolInput& operator=(const BoolInput&) = delete;
  const Tensor& get() const { return owned_.defined() ? owned_ : *t_; }

 private:
  const Tensor* t_;
  Tensor owned_;
};

class OptionalBoolInput {
 public:
  explicit OptionalBoolInput(const std::optional<Tensor>& t) : t_(&t) {
    if (t && t->defined() && t->dtype() == ScalarType::Bool) [[unlikely]] {
      if (!bool_bytes_canonical(*t)) owned_ = canonical_bool_copy(*t);
    }
  }
  OptionalBoolInput(const OptionalBoolInput&) = delete;
  OptionalBoolInput& operator=(const OptionalBoolInput&) = delete;
  const std::optional<Tensor>& get() const { return owned_ ? owned_ : *t_; }

 private:
  const std::optional<Tensor>* t_;
  std::optional<Tensor> owned_;
};

class BoolListInput {
 public:
  explicit BoolListInput(TensorList ts) : ts_(ts) {
    for (std::size_t i = 0; i < ts.size(); ++i) {
      if (ts[i].defined() && ts[i].dtype() == ScalarType::Bool && !bool_bytes_canonical(ts[i])) [[unlikely]] {
        if (owned_.empty()) owned_.assign(ts.begin(), ts.end());
        owned_[i] = canonical_bool_copy(ts[i]);
      }
    }
  }
  BoolListInput(const BoolListInput&) = delete;
  BoolListInput& operator=(const BoolListInput&) = delete;
  TensorList get() const { return owned_.empty() ? ts_ : TensorList(owned_); }

 private:
  TensorList ts_;
  std::vector<Tensor> owned_;
};

}  // namespace kael::native
