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

// Every member that touches the variant is defined out of line (aten/src/dispatch/ivalue.cpp):
// each op's generated boxing adapters (src/ops_<k>.cpp) build and read IValues, and inlining the
// variant's constructors, destructor and checked accessors into each of them was most of what
// an API shard cost to compile (Note [Boxed code out of line]). Boxed calls are the slow path
// (Python key, Autograd fallback, autocast); the unboxed calls never see an IValue.
class IValue {
 public:
  enum class Tag : std::uint8_t {
    None, Tensor, Scalar, Int, Double, Bool, IntList, ScalarType, Device, TensorList, String, Generator
  };

  IValue() noexcept;
  IValue(Tensor t);                    // NOLINT: implicit by design
  IValue(const Scalar& s);             // NOLINT
  IValue(std::int64_t i);              // NOLINT
  IValue(double d);                    // NOLINT
  IValue(bool b);                      // NOLINT
  IValue(IntArrayRef l);               // NOLINT
  IValue(ScalarType t);                // NOLINT
  IValue(Device d);                    // NOLINT
  IValue(TensorList l);                // NOLINT
  IValue(std::vector<Tensor> l);       // NOLINT
  IValue(std::string_view s);          // NOLINT
  IValue(const char* s);               // NOLINT
  IValue(Generator g);                 // NOLINT
  IValue(const Operand& o);            // NOLINT
  template <typename T>
  IValue(const std::optional<T>& o) {  // NOLINT
    if (o) *this = IValue(*o);
  }
  IValue(const IValue& other);
  IValue(IValue&& other) noexcept;
  IValue& operator=(const IValue& other);
  IValue& operator=(IValue&& other) noexcept;
  ~IValue();

  Tag tag() const { return static_cast<Tag>(v_.index()); }
  bool is_none() const { return tag() == Tag::None; }
  bool is_tensor() const { return tag() == Tag::Tensor; }

  // The value, checked: a TypeError naming the expected and the actual kind otherwise.
  const Tensor& to_tensor() const;
  Tensor& to_tensor();
  const Scalar& to_scalar() const;
  std::int64_t to_int() const;
  double to_double() const;
  bool to_bool() const;
  IntArrayRef to_int_list() const;
  ScalarType to_scalar_type() const;
  Device to_device() const;
  TensorList to_tensor_list() const;
  std::vector<Tensor>& to_tensor_list();
  std::string_view to_string() const;
  const Generator& to_generator() const;
  Operand to_operand() const;

  static const char* tag_name(Tag t);

 private:
  template <typename T>
  const T& get(const char* what) const;

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

// Appends one argument to a boxed call's stack; drops the last n entries (out of line, as the
// IValue members are).
void push(Stack& stack, IValue v);
void drop(Stack& stack, std::size_t n);

// Results on a stack: a Tensor, a bool or an int is one IValue, a Tensor[] one IValue holding
// the list, a tuple one IValue per element (schema order).
void push_result(Stack& stack, Tensor t);
void push_result(Stack& stack, std::vector<Tensor> l);
void push_result(Stack& stack, bool b);
void push_result(Stack& stack, std::int64_t i);
template <typename... Ts>
void push_result(Stack& stack, std::tuple<Ts...> t) {
  std::apply([&stack](auto&... e) { (push(stack, IValue(std::move(e))), ...); }, t);
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
// Raises unless the stack holds at least n results.
void check_results(const Stack& stack, std::size_t n);
template <typename Tuple, std::size_t... I>
Tuple pop_tuple(Stack& stack, std::index_sequence<I...>) {
  constexpr std::size_t n = sizeof...(I);
  check_results(stack, n);
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
