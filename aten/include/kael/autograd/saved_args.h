#pragma once
// Helpers of the generated Autograd kernels and nodes (src/autograd/functions_<k>.cpp): how
// arguments are stored in a node and handed back to the formulas.

#include <optional>
#include <string>
#include <string_view>

#include "kael/autograd/autograd.h"

namespace kael::autograd {

// A node's copy of a non-tensor argument (int[] as DimVector, str as std::string).
template <typename S, typename A>
S to_storage(const A& a) {
  if constexpr (std::is_same_v<S, std::optional<DimVector>>) {
    return a ? std::optional<DimVector>(DimVector(*a)) : std::nullopt;
  } else if constexpr (std::is_same_v<S, std::optional<std::string>>) {
    return a ? std::optional<std::string>(std::string(*a)) : std::nullopt;
  } else {
    return S(a);
  }
}

// The stored argument as the formula's parameter type.
inline IntArrayRef as_arg(const DimVector& v) { return v.view(); }
inline std::optional<IntArrayRef> as_arg(const std::optional<DimVector>& v) {
  return v ? std::optional<IntArrayRef>(v->view()) : std::nullopt;
}
inline std::string_view as_arg(const std::string& s) { return s; }
inline std::optional<std::string_view> as_arg(const std::optional<std::string>& s) {
  return s ? std::optional<std::string_view>(*s) : std::nullopt;
}
template <typename T>
const T& as_arg(const T& v) {
  return v;
}

inline Tensor as_tensor_arg(const Tensor& t) { return t; }
inline Tensor as_tensor_arg(const Operand& o) { return operand_tensor(o); }

// A tensor with the sizes and dtype of a saved input whose formulas read only those (one
// element of storage, expanded).
Tensor meta_stand_in(IntArrayRef sizes, ScalarType dtype);

// The pieces of a generated node's saved_description() ("self=... other.sizes=[2, 3]"), out of
// line so that each node's description is a few calls, not inlined string building
// (aten/src/autograd/explain.cpp). describe_saved skips an undefined (optional) tensor.
void describe_saved(std::string& out, const char* name, const SavedVariable& v);
void describe_sizes(std::string& out, const char* name, IntArrayRef sizes);
void describe_list(std::string& out, const char* name, std::size_t size);

// Whether an op returned one of its inputs itself (to() to the same dtype): nothing to record.
inline bool aliases_one(const Tensor& r, const Tensor& t) { return r.is_same(t); }
inline bool aliases_one(const Tensor& r, const Operand& o) { return o.is_tensor() && r.is_same(o.tensor()); }
inline bool aliases_one(const Tensor& r, const std::optional<Tensor>& t) { return t && r.is_same(*t); }
inline bool aliases_one(const Tensor& r, TensorList ts) {
  for (const Tensor& t : ts)
    if (r.is_same(t)) return true;
  return false;
}
template <typename... Args>
bool aliases_input(const Tensor& r, const Args&... args) {
  return (aliases_one(r, args) || ...);
}

}  // namespace kael::autograd
