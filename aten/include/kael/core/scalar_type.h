#pragma once
// dtypes: names, sizes, categories and PyTorch's type promotion rules.

#include <atomic>
#include <optional>
#include <ostream>
#include <string_view>

#include "kael/enums.h"

namespace kael {

inline const char* dtype_name(ScalarType t) { return detail::kScalarTypeNames[static_cast<int>(t)]; }
inline int itemsize(ScalarType t) { return detail::kScalarTypeItemsize[static_cast<int>(t)]; }
inline bool is_floating(ScalarType t) { return detail::kScalarTypeCategory[static_cast<int>(t)] == 2; }
inline bool is_signed(ScalarType t) { return detail::kScalarTypeSigned[static_cast<int>(t)]; }
inline bool is_reduced_floating(ScalarType t) { return t == ScalarType::Float16 || t == ScalarType::BFloat16; }
inline bool is_integral(ScalarType t, bool include_bool) {
  const int c = detail::kScalarTypeCategory[static_cast<int>(t)];
  return c == 1 || (include_bool && c == 0);
}
// PyTorch's legacy name of a dtype, as its messages spell it ("not implemented for 'Long'").
inline const char* torch_type_name(ScalarType t) {
  switch (t) {
    case ScalarType::Bool: return "Bool";
    case ScalarType::UInt8: return "Byte";
    case ScalarType::Int8: return "Char";
    case ScalarType::Int16: return "Short";
    case ScalarType::Int32: return "Int";
    case ScalarType::Int64: return "Long";
    case ScalarType::Float16: return "Half";
    case ScalarType::BFloat16: return "BFloat16";
    case ScalarType::Float32: return "Float";
    case ScalarType::Float64: return "Double";
  }
  return "?";
}
inline std::ostream& operator<<(std::ostream& os, ScalarType t) { return os << dtype_name(t); }

// Parses "float32" (or "kael.float32"); nullopt for unknown names.
std::optional<ScalarType> parse_dtype(std::string_view name);

// promote_types(a, b): PyTorch's promote_types, from the table generated from codegen/enums.py
// (uint8 + int8 -> int16, float16 + bfloat16 -> float32, bool + uint8 -> uint8).
ScalarType promote_types(ScalarType a, ScalarType b);

// can_cast(from, to): whether an op result of dtype `from` may be written into `to`
// (PyTorch: no float -> integral, no non-bool -> bool).
bool can_cast(ScalarType from, ScalarType to);

// Note [The default dtype]
// The dtype of floating tensors made without one (factories, tensor(1.5), arange(0.0, 3)), of a
// Python float in type promotion and of integer inputs promoted to floating (int / int, sqrt of
// an int tensor): float32 until kael.set_default_dtype changes it, as torch.set_default_dtype
// (float32, float64, float16 or bfloat16; one value for the process, as in PyTorch).
namespace detail {
inline std::atomic<ScalarType> default_dtype{ScalarType::Float32};
}  // namespace detail
inline ScalarType default_dtype() noexcept { return detail::default_dtype.load(std::memory_order_relaxed); }
// Sets the default dtype; the caller checks that t is one of the four floating dtypes.
inline void set_default_dtype(ScalarType t) noexcept { detail::default_dtype.store(t, std::memory_order_relaxed); }

// Note [Type promotion]
// PyTorch's result_type keeps three running states: dtypes of tensors with dims, of 0-d
// tensors, and of wrapped numbers (Python scalars; a float counts as the default float
// dtype). A later tier only matters when it is of a higher *category* than the earlier:
// float32 tensor + float64 0-d tensor -> float32, int64 tensor + 2.5 -> float32,
// bool tensor + 1 -> int64, int64 tensor + True -> int64.
class ResultTypeState {
 public:
  void add_tensor(ScalarType t, bool zero_dim) {
    auto& slot = zero_dim ? zero_dim_ : dimensioned_;
    slot = slot ? promote_types(*slot, t) : t;
  }
  void add_wrapped(ScalarType t) { wrapped_ = wrapped_ ? promote_types(*wrapped_, t) : t; }
  ScalarType result() const;

 private:
  std::optional<ScalarType> dimensioned_, zero_dim_, wrapped_;
};

}  // namespace kael
