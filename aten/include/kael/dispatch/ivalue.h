#pragma once
// IValue: one owning operator argument or result, for boxed calls (see Note [Boxed calls]).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
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
  enum class Tag : std::uint8_t {
    None, Tensor, Scalar, Int, Double, Bool, IntList, ScalarType, Device, TensorList, String, Generator
  };

  IValue() = default;
  IValue(Tensor t) : v_(std::move(t)) {}                    // NOLINT: implicit by design
  IValue(const Scalar& s) : v_(s) {}                        // NOLINT
  IValue(std::int64_t i) : v_(i) {}                         // NOLINT
  IValue(double d) : v_(d) {}                               // NOLINT
  IValue(bool b) : v_(b) {}                                 // NOLINT
  IValue(IntArrayRef l) : v_(DimVector(l)) {}               // NOLINT
  IValue(ScalarType t) : v_(t) {}                           // NOLINT
  IValue(Device d) : v_(d) {}                               // NOLINT
  IValue(TensorList l) : v_(std::vector<Tensor>(l.begin(), l.end())) {}  // NOLINT
  IValue(std::vector<Tensor> l) : v_(std::move(l)) {}       // NOLINT
  IValue(std::string_view s) : v_(std::string(s)) {}        // NOLINT
  IValue(const char* s) : v_(std::string(s)) {}             // NOLINT
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
  TensorList to_tensor_list() const { return get<std::vector<Tensor>>("Tensor[]"); }
  std::vector<Tensor>& to_tensor_list() { return const_cast<std::vector<Tensor>&>(std::as_const(*this).get<std::vector<Tensor>>("Tensor[]")); }
  std::string_view to_string() const { return get<std::string>("str"); }
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

  // alternatives in the order of Tag
  std::variant<std::monostate, Tensor, Scalar, std::int64_t, double, bool, DimVector, ScalarType, Device,
               std::vector<Tensor>, std::string, Generator>
      v_;
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
struct Unbox<TensorList> {
  static TensorList get(const IValue& v) { return v.to_tensor_list(); }
};
template <>
struct Unbox<std::string_view> {
  static std::string_view get(const IValue& v) { return v.to_string(); }
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

// Results on a stack: a Tensor, a bool or an int is one IValue, a Tensor[] one IValue holding
// the list, a tuple one IValue per element (schema order).
inline void push_result(Stack& stack, Tensor t) { stack.emplace_back(std::move(t)); }
inline void push_result(Stack& stack, std::vector<Tensor> l) { stack.emplace_back(std::move(l)); }
inline void push_result(Stack& stack, bool b) { stack.emplace_back(b); }
inline void push_result(Stack& stack, std::int64_t i) { stack.emplace_back(i); }
template <typename... Ts>
void push_result(Stack& stack, std::tuple<Ts...> t) {
  std::apply([&stack](auto&... e) { (stack.emplace_back(std::move(e)), ...); }, t);
}

// The result a boxed call of `num_args` arguments left on the stack (see push_result).
template <typename R>
R pop_result(Stack& stack, int num_args);
template <>
inline Tensor pop_result<Tensor>(Stack& stack, int) {
  return std::move(stack.back().to_tensor());
}
template <>
inline std::vector<Tensor> pop_result<std::vector<Tensor>>(Stack& stack, int) {
  return std::move(stack.back().to_tensor_list());
}
template <>
inline bool pop_result<bool>(Stack& stack, int) {
  return stack.back().to_bool();
}
template <>
inline std::int64_t pop_result<std::int64_t>(Stack& stack, int) {
  return stack.back().to_int();
}
namespace detail {
template <typename Tuple, std::size_t... I>
Tuple pop_tuple(Stack& stack, std::index_sequence<I...>) {
  constexpr std::size_t n = sizeof...(I);
  KAEL_CHECK(stack.size() >= n, "boxed call: expected " << n << " results on the stack, found " << stack.size());
  const std::size_t base = stack.size() - n;
  return Tuple(std::move(stack[base + I].to_tensor())...);
}
template <typename T>
struct PopResult;
template <typename... Ts>
struct PopResult<std::tuple<Ts...>> {
  static std::tuple<Ts...> get(Stack& stack) {
    return pop_tuple<std::tuple<Ts...>>(stack, std::index_sequence_for<Ts...>{});
  }
};
}  // namespace detail
template <typename R>
R pop_result(Stack& stack, int) {
  return detail::PopResult<R>::get(stack);
}

}  // namespace kael::dispatch
