#include "kael/core/scalar_type.h"

#include "kael/core/scalar.h"

#include "kael/core/error.h"

namespace kael {

std::optional<ScalarType> parse_dtype(std::string_view name) {
  if (name.starts_with("kael.")) name.remove_prefix(5);
  for (int i = 0; i < kNumScalarTypes; ++i)
    if (name == detail::kScalarTypeNames[i]) return static_cast<ScalarType>(i);
  return std::nullopt;
}

ScalarType promote_types(ScalarType a, ScalarType b) {
  return detail::kPromoteTypes[static_cast<int>(a)][static_cast<int>(b)];
}

bool can_cast(ScalarType from, ScalarType to) {
  if (is_floating(from) && is_integral(to, /*include_bool=*/true)) return false;
  if (from != ScalarType::Bool && to == ScalarType::Bool) return false;
  return true;
}

// See Note [Type promotion]: a lower tier only counts when its category is higher.
static std::optional<ScalarType> combine_categories(std::optional<ScalarType> higher,
                                                     std::optional<ScalarType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_floating(*higher)) return higher;
  if (*higher == ScalarType::Bool || is_floating(*lower)) return promote_types(*higher, *lower);
  return higher;
}

ScalarType ResultTypeState::result() const {
  auto r = combine_categories(dimensioned_, combine_categories(zero_dim_, wrapped_));
  return r.value_or(default_dtype());
}

std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool:
      return os << (s.to<bool>() ? "True" : "False");
    case Scalar::Kind::Int:
      return os << s.to<std::int64_t>();
    case Scalar::Kind::Float:
      break;
  }
  return os << s.to<double>();
}

void Scalar::report_overflow(const char* op, ScalarType dtype) const {
  KAEL_CHECK(false, op << ": value " << *this << " cannot be converted to type " << dtype << " without overflow");
  __builtin_unreachable();
}

void check_convertible(const char* op, const Scalar& value, ScalarType dtype) {
  visit_dtype(dtype, [&](auto tag) { (void)value.checked_to<typename decltype(tag)::type>(op, dtype); });
}

}  // namespace kael
