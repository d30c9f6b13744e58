#include "kael/core/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <vector>

#include "kael/core/convert.h"
#include "kael/core/error.h"

namespace kael {

std::int64_t wrap_dim(const char* op, std::int64_t dim, std::int64_t ndim) {
  const std::int64_t n = std::max<std::int64_t>(ndim, 1);  // 0-d tensors accept dims -1 and 0
  KAEL_CHECK_INDEX(dim >= -n && dim < n, op << ": dimension out of range (expected to be in range of ["
                                            << -n << ", " << n - 1 << "], but got " << dim << ")");
  return dim < 0 ? dim + n : dim;
}

std::string shape_str(IntArrayRef sizes) {
  std::string s = "[";
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(sizes[i]);
  }
  return s + "]";
}

std::int64_t Tensor::size(std::int64_t d) const {
  KAEL_CHECK_INDEX(dim() > 0, "size: dimension specified as " << d << " but tensor has no dimensions");
  return sizes()[wrap_dim("size", d, dim())];
}
std::int64_t Tensor::stride(std::int64_t d) const {
  KAEL_CHECK_INDEX(dim() > 0, "stride: dimension specified as " << d << " but tensor has no dimensions");
  return strides()[wrap_dim("stride", d, dim())];
}

Scalar Tensor::item() const {
  KAEL_CHECK(numel() == 1, "item: a Tensor with " << numel() << " elements cannot be converted to Scalar");
  KAEL_CHECK(device().is_cpu(), "item: tensor is on " << device() << "; only CPU tensors are readable here");
  return visit_dtype(dtype(), [&](auto tag) -> Scalar {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      return Scalar(load_bool(data<bool>()));  // Note [Bool bytes]
    } else if constexpr (std::is_integral_v<T>) {
      return Scalar(static_cast<std::int64_t>(*data<T>()));
    } else {
      return Scalar(static_cast<double>(*data<T>()));
    }
  });
}

namespace {

// Note [Tensor repr]
// The same text as PyTorch's repr (torch/_tensor_str.py), with its print options (Note [Print
// options]; by default): one width for every element, chosen from the nonzero finite values;
// integral-valued floats print as "1.", others with `precision` (4) decimals, and scientific
// notation when the magnitudes span more than 1000x, exceed 1e8 or go below 1e-4 (unless
// sci_mode says); rows wrap at `linewidth` (80) columns; more than `threshold` (1000) elements
// are summarised with the first and last `edgeitems` (3) of each dim.
std::mutex print_options_mutex;
PrintOptions current_print_options;

struct Formatter {
  int precision = 4;
  bool floating = false;
  bool is_bool = false;
  bool int_mode = true;
  bool sci_mode = false;
  std::size_t width = 1;

  // long double holds every int64 exactly (x86's 64-bit mantissa), and every float/double.
  std::string raw(long double value) const {
    char buf[64];
    if (is_bool) return value != 0 ? "True" : "False";
    if (!floating) {
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(value));
      return buf;
    }
    const double v = static_cast<double>(value);
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci_mode) return printf_string("%.*e", precision, v);
    if (int_mode) return printf_string("%.*f.", 0, v);
    return printf_string("%.*f", precision, v);
  }
  // v formatted by fmt with the given precision (any length: a precision of 300 gives 300
  // digits, as Python's format does).
  static std::string printf_string(const char* fmt, int digits, double v) {
    const int n = std::snprintf(nullptr, 0, fmt, digits, v);
    std::string out(static_cast<std::size_t>(std::max(n, 0)) + 1, '\0');
    std::snprintf(out.data(), out.size(), fmt, digits, v);
    out.pop_back();
    return out;
  }
  std::string format(long double v) const {
    std::string s = raw(v);
    return s.size() < width ? std::string(width - s.size(), ' ') + s : s;
  }
};

Formatter make_formatter(ScalarType dtype, const std::vector<long double>& values, const PrintOptions& opts) {
  Formatter f;
  f.precision = opts.precision;
  f.floating = is_floating(dtype);
  f.is_bool = dtype == ScalarType::Bool;
  if (!f.floating) {
    for (long double v : values) f.width = std::max(f.width, f.raw(v).size());
    return f;
  }
  double lo = INFINITY, hi = 0;
  bool any = false;
  for (long double value : values) {
    const double v = static_cast<double>(value);
    if (!std::isfinite(v) || v == 0) continue;
    any = true;
    if (v != std::ceil(v)) f.int_mode = false;
    lo = std::min(lo, std::fabs(v));
    hi = std::max(hi, std::fabs(v));
  }
  if (!any) return f;
  f.sci_mode = opts.sci_mode >= 0 ? opts.sci_mode == 1 : hi / lo > 1000.0 || hi > 1.0e8 || (!f.int_mode && lo < 1.0e-4);
  for (long double v : values) {
    if (std::isfinite(static_cast<double>(v)) && v != 0) f.width = std::max(f.width, f.raw(v).size());
  }
  return f;
}

long double read_value(const char* p, ScalarType t) {
  return visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return static_cast<long double>(*reinterpret_cast<const T*>(p));
  });
}

// The values the repr shows, in order (the summarised ones only).
void collect(const Tensor& t, std::int64_t dim, const char* p, bool summarize, std::int64_t edge,
             std::vector<long double>& out) {
  if (dim == t.dim()) {
    out.push_back(read_value(p, t.dtype()));
    return;
  }
  const std::int64_t n = t.sizes()[dim], st = n > 1 ? t.strides()[dim] * t.element_size() : 0;  // any stride when n <= 1
  for (std::int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * edge && i == edge) i = n - edge;
    collect(t, dim + 1, p + i * st, summarize, edge, out);
  }
}

std::string format_rec(const Tensor& t, std::int64_t dim, const char* p, const Formatter& f, bool summarize,
                       const PrintOptions& opts, std::int64_t indent) {
  const std::int64_t n = t.sizes()[dim], st = n > 1 ? t.strides()[dim] * t.element_size() : 0;  // any stride when n <= 1
  const std::int64_t edge = opts.edgeitems;
  const bool cut = summarize && n > 2 * edge;
  std::vector<std::string> items;
  for (std::int64_t i = 0; i < n; ++i) {
    if (cut && i == edge) {
      items.push_back(dim + 1 == t.dim() ? " ..." : "...");
      i = n - edge;
      if (i >= n) break;  // (edge 0 is handled by the caller)
    }
    items.push_back(dim + 1 == t.dim() ? f.format(read_value(p + i * st, t.dtype()))
                                       : format_rec(t, dim + 1, p + i * st, f, summarize, opts, indent + 1));
  }
  std::string out = "[";
  if (dim + 1 == t.dim()) {  // a row: wrap at the line width (floor division, at least one per line)
    const auto len = static_cast<std::int64_t>(f.width) + 2, room = opts.linewidth - indent;
    const auto per_line =
        static_cast<std::size_t>(std::max<std::int64_t>(1, room >= 0 ? room / len : -((-room + len - 1) / len)));
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += i % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ";
      out += items[i];
    }
  } else {
    std::string sep(1, ',');  // (appends: GCC 12 misreports "," + std::string as overlapping memcpy)
    sep.append(static_cast<std::size_t>(t.dim() - dim - 1), '\n').append(static_cast<std::size_t>(indent + 1), ' ');
    for (std::size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  }
  return out + "]";
}

}  // namespace

PrintOptions print_options() {
  const std::lock_guard<std::mutex> lock(print_options_mutex);
  return current_print_options;
}

void set_print_options(const PrintOptions& options) {
  const std::lock_guard<std::mutex> lock(print_options_mutex);
  current_print_options = options;
}

std::string Tensor::to_string() const { return to_string({}); }

std::string Tensor::to_string(const std::vector<std::string>& extra_suffixes) const {
  if (!defined()) return "tensor(<undefined>)";
  const PrintOptions opts = print_options();
  std::string out = "tensor(";
  const bool summarize = static_cast<double>(numel()) > opts.threshold;
  if (device().is_cpu() && numel() > 0 && dim() > 0 && summarize && opts.edgeitems == 0) {
    out += "[...]";  // (torch: no items at the ends, the whole tensor is one "...")
  } else if (device().is_cpu() && numel() > 0) {
    std::vector<long double> values;
    collect(*this, 0, static_cast<const char*>(data_ptr()), summarize, opts.edgeitems, values);
    const Formatter f = make_formatter(dtype(), values, opts);
    out += dim() == 0 ? f.raw(values[0])
                      : format_rec(*this, 0, static_cast<const char*>(data_ptr()), f, summarize, opts, 7);
  } else {
    out += "[]";
  }
  std::vector<std::string> suffixes;
  // the shape, as a Python tuple: of an empty tensor that is not 1-d, and of every tensor with
  // elements when edgeitems is 0 (torch's _str_intern)
  if ((numel() == 0 && dim() != 1) || (numel() > 0 && opts.edgeitems == 0)) {
    std::string size = "size=(";
    for (std::int64_t i = 0; i < dim(); ++i) size += (i ? ", " : "") + std::to_string(sizes()[i]);
    suffixes.push_back(size + (dim() == 1 ? ",)" : ")"));
  }
  if (device().is_cuda()) suffixes.push_back("device='cuda:" + std::to_string(device().index) + "'");
  // (torch's _add_suffixes: the default dtype (Note [The default dtype]), int64 and bool go unnamed,
  // except an empty tensor's dtype when it is not the default)
  const ScalarType floating = default_dtype();
  const bool unnamed = dtype() == floating || dtype() == ScalarType::Int64 || dtype() == ScalarType::Bool;
  if (!unnamed || (numel() == 0 && dtype() != floating))
    suffixes.push_back(std::string("dtype=kael.") + dtype_name(dtype()));
  suffixes.insert(suffixes.end(), extra_suffixes.begin(), extra_suffixes.end());
  // PyTorch's _add_suffixes: a suffix that would take the last line past the line width goes
  // on a line of its own, indented under the opening bracket.
  const std::size_t newline = out.rfind('\n');
  std::size_t last_line = out.size() - (newline == std::string::npos ? static_cast<std::size_t>(-1) : newline) + 1;
  for (const std::string& suffix : suffixes) {
    if (static_cast<std::int64_t>(last_line + suffix.size() + 2) > opts.linewidth) {
      out += ",\n" + std::string(7, ' ') + suffix;
      last_line = 7 + suffix.size();
    } else {
      out += ", " + suffix;
      last_line += suffix.size() + 2;
    }
  }
  return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace kael
