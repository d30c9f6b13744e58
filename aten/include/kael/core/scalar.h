#pragma once
// Scalar: a Python number carried into C++ without making a tensor of it.

#include <cstdint>
#include <ostream>

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
    return kDefaultFloat;
  }

  template <typename T>
  T to() const {
    switch (kind_) {
      case Kind::Bool:
        return static_cast<T>(v_.b);
      case Kind::Int:
        return static_cast<T>(v_.i);
      case Kind::Float:
        break;
    }
    return static_cast<T>(v_.d);
  }
  double to_double() const { return to<double>(); }

 private:
  Kind kind_;
  union {
    bool b;
    std::int64_t i;
    double d;
  } v_;
};

std::ostream& operator<<(std::ostream& os, const Scalar& s);

}  // namespace kael
