#include "kael/core/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <vector>

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
    const T v = *data<T>();
    if constexpr (std::is_same_v<T, bool>) {
      return Scalar(v);
    } else if constexpr (std::is_integral_v<T>) {
      return Scalar(static_cast<std::int64_t>(v));
    } else {
      return Scalar(static_cast<double>(v));
    }
  });
}

namespace {

// PyTorch-style element formatting: integral-valued floats print as "1.", others with four
// decimals, and scientific notation when the magnitudes span too far.
struct Formatter {
  ScalarType dtype;
  bool int_mode = true;
  bool sci_mode = false;
  int width = 1;

  std::string format(double v) const {
    char buf[64];
    if (dtype == ScalarType::Bool) return v != 0 ? "True" : "False";
    if (!is_floating(dtype)) {
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
      return buf;
    }
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci_mode) {
      std::snprintf(buf, sizeof buf, "%.4e", v);
    } else if (int_mode) {
      std::snprintf(buf, sizeof buf, "%.0f.", v);
    } else {
      std::snprintf(buf, sizeof buf, "%.4f", v);
    }
    return buf;
  }
};

double read_double(const char* p, ScalarType t) {
  return visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return static_cast<double>(*reinterpret_cast<const T*>(p));
  });
}

constexpr std::int64_t kSummarizeThreshold = 1000;
constexpr std::int64_t kEdgeItems = 3;

void collect(const Tensor& t, std::int64_t dim, const char* p, bool summarize, std::vector<double>& out) {
  const std::int64_t isz = t.element_size();
  if (dim == t.dim()) {
    out.push_back(read_double(p, t.dtype()));
    return;
  }
  const std::int64_t n = t.sizes()[dim], st = t.strides()[dim] * isz;
  for (std::int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) i = n - kEdgeItems;
    collect(t, dim + 1, p + i * st, summarize, out);
  }
}

void print_rec(std::ostream& os, const Tensor& t, std::int64_t dim, const char* p, const Formatter& f,
               bool summarize, int indent) {
  const std::int64_t isz = t.element_size();
  if (dim == t.dim()) {
    std::string s = f.format(read_double(p, t.dtype()));
    if (static_cast<int>(s.size()) < f.width) os << std::string(f.width - s.size(), ' ');
    os << s;
    return;
  }
  const std::int64_t n = t.sizes()[dim], st = t.strides()[dim] * isz;
  os << '[';
  for (std::int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      if (dim + 1 == t.dim()) {
        os << " ...,";
      } else {
        os << "\n" << std::string(indent + 1, ' ') << "...,";
      }
      i = n - kEdgeItems;
    }
    if (i > 0 || (summarize && n > 2 * kEdgeItems && i == n - kEdgeItems)) {
      if (dim + 1 == t.dim()) {
        os << ' ';
      } else {
        os << std::string(t.dim() - dim - 1, '\n') << std::string(indent + 1, ' ');
      }
    }
    print_rec(os, t, dim + 1, p + i * st, f, summarize, indent + 1);
    if (i + 1 < n) os << ',';
  }
  os << ']';
}

}  // namespace

std::string Tensor::to_string() const {
  std::ostringstream os;
  if (!defined()) return "tensor(<undefined>)";
  os << "tensor(";
  const bool summarize = numel() > kSummarizeThreshold;
  Formatter f{dtype()};
  if (device().is_cpu() && numel() > 0) {
    std::vector<double> values;
    collect(*this, 0, static_cast<const char*>(data_ptr()), summarize, values);
    if (is_floating(dtype())) {
      double lo = INFINITY, hi = 0;
      for (double v : values) {
        if (!std::isfinite(v)) continue;
        if (v != std::nearbyint(v)) f.int_mode = false;
        const double a = std::fabs(v);
        if (a != 0) lo = std::min(lo, a);
        hi = std::max(hi, a);
      }
      if (f.int_mode) {
        f.sci_mode = hi > 1e8;
      } else {
        f.sci_mode = hi > 1e8 || (lo < INFINITY && (hi / lo > 1000.0 || lo < 1e-4));
      }
    }
    for (double v : values) f.width = std::max<int>(f.width, static_cast<int>(f.format(v).size()));
    print_rec(os, *this, 0, static_cast<const char*>(data_ptr()), f, summarize, 7);
  } else {
    os << "[]";
  }
  const bool default_dtype = dtype() == ScalarType::Float32 || dtype() == ScalarType::Int64 ||
                             dtype() == ScalarType::Bool;
  if (numel() == 0 && dim() != 1) {
    os << ", size=(";
    for (std::int64_t i = 0; i < dim(); ++i) os << (i ? ", " : "") << sizes()[i];
    os << (dim() == 1 ? ",)" : ")");
  }
  if (!device().is_cpu()) os << ", device='" << device() << "'";
  if (!default_dtype || (numel() == 0 && dtype() != ScalarType::Float32))
    os << ", dtype=kael." << dtype_name(dtype());
  os << ')';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

}  // namespace kael
