#include "kael/dispatch/ivalue.h"

// Note [Boxed code out of line]: the members of IValue that touch its variant, and the stack
// helpers the generated boxing adapters call, are defined here once instead of inline in every
// adapter (see kael/dispatch/ivalue.h).

namespace kael::dispatch {

IValue::IValue() noexcept = default;
IValue::IValue(Tensor t) : v_(std::move(t)) {}
IValue::IValue(const Scalar& s) : v_(s) {}
IValue::IValue(std::int64_t i) : v_(i) {}
IValue::IValue(double d) : v_(d) {}
IValue::IValue(bool b) : v_(b) {}
IValue::IValue(IntArrayRef l) : v_(DimVector(l)) {}
IValue::IValue(ScalarType t) : v_(t) {}
IValue::IValue(Device d) : v_(d) {}
IValue::IValue(TensorList l) : v_(std::vector<Tensor>(l.begin(), l.end())) {}
IValue::IValue(std::vector<Tensor> l) : v_(std::move(l)) {}
IValue::IValue(std::string_view s) : v_(std::string(s)) {}
IValue::IValue(const char* s) : v_(std::string(s)) {}
IValue::IValue(Generator g) : v_(std::move(g)) {}
IValue::IValue(const Operand& o) {
  if (o.is_tensor()) {
    v_ = o.tensor();
  } else {
    v_ = o.scalar();
  }
}
IValue::IValue(const IValue& other) = default;
IValue::IValue(IValue&& other) noexcept = default;
IValue& IValue::operator=(const IValue& other) = default;
IValue& IValue::operator=(IValue&& other) noexcept = default;
IValue::~IValue() = default;

template <typename T>
const T& IValue::get(const char* what) const {
  const T* p = std::get_if<T>(&v_);
  KAEL_CHECK_TYPE(p != nullptr, "boxed call: expected a " << what << " argument, got " << tag_name(tag()));
  return *p;
}

const Tensor& IValue::to_tensor() const { return get<Tensor>("Tensor"); }
Tensor& IValue::to_tensor() { return const_cast<Tensor&>(get<Tensor>("Tensor")); }
const Scalar& IValue::to_scalar() const { return get<Scalar>("Scalar"); }
std::int64_t IValue::to_int() const { return get<std::int64_t>("int"); }
double IValue::to_double() const { return get<double>("float"); }
bool IValue::to_bool() const { return get<bool>("bool"); }
IntArrayRef IValue::to_int_list() const { return get<DimVector>("int[]"); }
ScalarType IValue::to_scalar_type() const { return get<ScalarType>("ScalarType"); }
Device IValue::to_device() const { return get<Device>("Device"); }
TensorList IValue::to_tensor_list() const { return get<std::vector<Tensor>>("Tensor[]"); }
std::vector<Tensor>& IValue::to_tensor_list() {
  return const_cast<std::vector<Tensor>&>(get<std::vector<Tensor>>("Tensor[]"));
}
std::string_view IValue::to_string() const { return get<std::string>("str"); }
const Generator& IValue::to_generator() const { return get<Generator>("Generator"); }
Operand IValue::to_operand() const { return is_tensor() ? Operand(to_tensor()) : Operand(to_scalar()); }

void push(Stack& stack, IValue v) { stack.push_back(std::move(v)); }

void drop(Stack& stack, std::size_t n) {
  KAEL_CHECK(n <= stack.size(), "boxed call: dropping " << n << " entries of a stack of " << stack.size());
  stack.erase(stack.end() - static_cast<std::ptrdiff_t>(n), stack.end());
}

void push_result(Stack& stack, Tensor t) { stack.emplace_back(std::move(t)); }
void push_result(Stack& stack, std::vector<Tensor> l) { stack.emplace_back(std::move(l)); }
void push_result(Stack& stack, bool b) { stack.emplace_back(b); }
void push_result(Stack& stack, std::int64_t i) { stack.emplace_back(i); }

namespace detail {
void check_results(const Stack& stack, std::size_t n) {
  KAEL_CHECK(stack.size() >= n, "boxed call: expected " << n << " results on the stack, found " << stack.size());
}
}  // namespace detail

}  // namespace kael::dispatch
