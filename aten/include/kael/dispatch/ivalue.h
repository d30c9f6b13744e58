#pragma once
// IValue: one owning operator argument or result, for boxed calls (see Note [Boxed calls]).

#include <cstdint>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "kael/core/device.h"
#include "kael/core/error.h"
#include "kael/core/tensor.h"
#include "kael/runtime/generator.h"

namespace kael::dispatch {

class IValue {
 public:
  enum class Tag : std::uint8_t { None, Tensor, Scalar, Int, Double, Bool, IntList, ScalarType, Device, Generator };

  IValue() = default;
  IValue(Tensor t) : v_(std::move(t)) {}                    // NOLINT: implicit by design
  IValue(const Scalar& s) : v_(s) {}                        // NOLINT
  IValue(std::int64_t i) : v_(i) {}                         // NOLINT
  IValue(double d) : v_(d) {}                               // NOLINT
  IValue(bool b) : v_(b) {}                                 // NOLINT
  IValue(IntArrayRef l) : v_(DimVector(l)) {}               // NOLINT
  IValue(ScalarType t) : v_(t) {}                           // NOLINT
  IValue(Device d) : v_(d) {}                               // NOLINT
  IValue(Generator g) : v_(std::move(g)) {}                 // NOLINT
  IValue(const Operand& o) {                                // NOLINT
    if (o.is_tensor()) {
      v_ = o.tensor();
    } else {
      v_ = o.scalar();
    }
  }
  template <typename T>
  IValue(const std::optional<T>& o) {  // NOLINT
    if (o) *this = IValue(*o);
  }

  Tag tag() const { return static_cast<Tag>(v_.index()); }
  bool is_none() const { return tag() == Tag::None; }
  bool is_tensor() const { return tag() == Tag::Tensor; }

  const Tensor& to_tensor() const { return get<Tensor>("Tensor"); }
  Tensor& to_tensor() { return const_cast<Tensor&>(std::as_const(*this).to_tensor()); }
  const Scalar& to_scalar() const { return get<Scalar>("Scalar"); }
  std::int64_t to_int() const { return get<std::int64_t>("int"); }
  double to_double() const { return get<double>("float"); }
  bool to_bool() const { return get<bool>("bool"); }
  IntArrayRef to_int_list() const { return get<DimVector>("int[]"); }
  ScalarType to_scalar_type() const { return get<ScalarType>("ScalarType"); }
  Device to_device() const { return get<Device>("Device"); }
  const Generator& to_generator() const { return get<Generator>("Generator"); }
  Operand to_operand() const { return is_tensor() ? Operand(to_tensor()) : Operand(to_scalar()); }

  static const char* tag_name(Tag t);

 private:
  template <typename T>
  const T& get(const char* what) const {
    const T* p = std::get_if<T>(&v_);
    KAEL_CHECK_TYPE(p != nullptr, "boxed call: expected a " << what << " argument, got " << tag_name(tag()));
    return *p;
  }

  std::variant<std::monostate, Tensor, Scalar, std::int64_t, double, bool, DimVector, ScalarType, Device, Generator> v_;
};

// Arguments of a boxed call, in schema order; a kernel replaces them with its result.
using Stack = std::vector<IValue>;

// Unboxing: the C++ parameter type of a dispatcher signature from a stack slot.
template <typename T>
struct Unbox;
template <>
struct Unbox<Tensor> {
  static const Tensor& get(const IValue& v) { return v.to_tensor(); }
};
template <>
struct Unbox<Operand> {
  static Operand get(const IValue& v) { return v.to_operand(); }
};
template <>
struct Unbox<Scalar> {
  static const Scalar& get(const IValue& v) { return v.to_scalar(); }
};
template <>
struct Unbox<std::int64_t> {
  static std::int64_t get(const IValue& v) { return v.to_int(); }
};
template <>
struct Unbox<double> {
  static double get(const IValue& v) { return v.to_double(); }
};
template <>
struct Unbox<bool> {
  static bool get(const IValue& v) { return v.to_bool(); }
};
template <>
struct Unbox<IntArrayRef> {
  static IntArrayRef get(const IValue& v) { return v.to_int_list(); }
};
template <>
struct Unbox<ScalarType> {
  static ScalarType get(const IValue& v) { return v.to_scalar_type(); }
};
template <>
struct Unbox<Device> {
  static Device get(const IValue& v) { return v.to_device(); }
};
template <>
struct Unbox<Generator> {
  static const Generator& get(const IValue& v) { return v.to_generator(); }
};
template <typename T>
struct Unbox<std::optional<T>> {
  static std::optional<T> get(const IValue& v) {
    if (v.is_none()) return std::nullopt;
    return Unbox<T>::get(v);
  }
};

template <typename T>
decltype(auto) unbox(const IValue& v) {
  return Unbox<T>::get(v);
}

}  // namespace kael::dispatch
