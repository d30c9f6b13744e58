#pragma once
// Scalar: a Python number carried into C++ without making a tensor of it.

#include <cstdint>
#include <ostream>

#include "kael/core/convert.h"
#include "kael/core/scalar_type.h"

namespace kael {

class Scalar {
 public:
  enum class Kind : std::uint8_t { Bool, Int, Float };

  Scalar() : Scalar(std::int64_t{0}) {}
  Scalar(bool v) : kind_(Kind::Bool) { v_.b = v; }            // NOLINT: implicit by design
  Scalar(std::int64_t v) : kind_(Kind::Int) { v_.i = v; }     // NOLINT
  Scalar(int v) : Scalar(static_cast<std::int64_t>(v)) {}     // NOLINT
  Scalar(double v) : kind_(Kind::Float) { v_.d = v; }         // NOLINT
  Scalar(float v) : Scalar(static_cast<double>(v)) {}         // NOLINT

  Kind kind() const { return kind_; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_floating() const { return kind_ == Kind::Float; }

  // The dtype a wrapped number contributes to type promotion (see Note [Type promotion]).
  ScalarType wrapped_dtype() const {
    switch (kind_) {
      case Kind::Bool:
        return ScalarType::Bool;
      case Kind::Int:
        return ScalarType::Int64;
      case Kind::Float:
        break;
    }
    return default_dtype();
  }

  // The value converted to T as a cast would (see Note [Conversions between dtypes]); never
  // undefined, and unchecked: 1e300 gives inf as float32, NaN gives INT64_MIN as int64.
  template <typename T>
  T to() const {
    switch (kind_) {
      case Kind::Bool:
        return convert<T>(v_.b);
      case Kind::Int:
        return convert<T>(v_.i);
      case Kind::Float:
        break;
    }
    return convert<T>(v_.d);
  }
  double to_double() const { return to<double>(); }

  // Whether PyTorch's checked conversion of the value to T fails (NaN, inf or a value out of
  // range for an integer type; a finite value beyond float32's range; see kael::overflows).
  template <typename T>
  bool overflows_as() const {
    switch (kind_) {
      case Kind::Bool:
        return false;
      case Kind::Int:
        return overflows<T>(v_.i);
      case Kind::Float:
        break;
    }
    return overflows<T>(v_.d);
  }
  // The value as T, raising kael::Error "<op>: value <v> cannot be converted to type <dtype>
  // without overflow" where PyTorch's checked conversion raises (dtype names the tensor's dtype
  // when T is the type it computes in).
  template <typename T>
  T checked_to(const char* op, ScalarType dtype = ScalarTypeOf<T>::value) const {
    if (overflows_as<T>()) [[unlikely]]
      report_overflow(op, dtype);
    return to<T>();
  }

 private:
  [[noreturn]] void report_overflow(const char* op, ScalarType dtype) const;

  Kind kind_;
  union {
    bool b;
    std::int64_t i;
    double d;
  } v_;
};

std::ostream& operator<<(std::ostream& os, const Scalar& s);

// Raises unless `value` converts to `dtype` without overflow (Scalar::checked_to).
void check_convertible(const char* op, const Scalar& value, ScalarType dtype);

}  // namespace kael
