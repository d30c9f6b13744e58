// Random ops on the CPU: uniform_, normal_, random_, bernoulli_, randperm, multinomial.
//
// Every kernel draws from one stream per call (Note [Random streams] in
// kael/runtime/generator.h): element i of the output (in row-major order) is computed from
// Philox block i / k of the call's stream, where k is how many elements one block of four 32-bit
// words feeds (4 for float uniforms and normals, 2 where an element takes 64 bits). The loops
// are split among threads by the loop engine (run_loop), and no value depends on the split.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <utility>
#include <vector>

#include "kael/core/error.h"
#include "kael/core/mem_overlap.h"
#include "kael/native/declarations.h"
#include "kael/native/loops.h"
#include "kael/native/pointwise.h"
#include "kael/ops/expand.h"
#include "kael/runtime/philox.h"

namespace kael::native {

namespace {

using random::Block;

// The C++ name PyTorch's messages give a dtype ("out of bounds for int"), kael's own otherwise.
const char* type_word(ScalarType t) {
  switch (t) {
    case ScalarType::UInt8:
      return "unsigned char";
    case ScalarType::Int8:
      return "signed char";
    case ScalarType::Int16:
      return "short";
    case ScalarType::Int32:
      return "int";
    case ScalarType::Int64:
      return "long int";
    case ScalarType::Float32:
      return "float";
    case ScalarType::Float64:
      return "double";
    default:
      return dtype_name(t);
  }
}

// Runs f(begin, end) over the element indices [0, numel) of a contiguous tensor, split among
// threads above the loop engine's grain: a one-dim loop over t's own elements.
template <typename F>
void parallel_range(const Tensor& t, F f) {
  const std::int64_t n = t.numel();
  if (n == 0) return;
  LoopGeometry<1> g;
  g.shape.push_back(n);
  g.strides[0].push_back(t.element_size());
  g.data[0] = static_cast<char*>(t.data_ptr());
  g.numel = n;
  char* const base = g.data[0];
  const std::int64_t size = t.element_size();
  run_loop(g, [&](char* const* ptrs, const std::int64_t*, std::int64_t len) {
    const std::int64_t begin = (ptrs[0] - base) / size;
    f(begin, begin + len);
  });
}

// Calls emit(i, block, lane) for i in [begin, end), where element i takes lane i % PerBlock of
// block i / PerBlock; each block is computed once.
template <int PerBlock, typename Emit>
void for_blocks(const PhiloxStream& s, std::int64_t begin, std::int64_t end, Emit&& emit) {
  std::int64_t i = begin;
  while (i < end) {
    const std::int64_t b = i / PerBlock;
    const Block w = random::block(s, static_cast<std::uint64_t>(b));
    const std::int64_t stop = std::min(end, (b + 1) * PerBlock);
    for (; i < stop; ++i) emit(i, w, static_cast<int>(i - b * PerBlock));
  }
}

// Fills self with value(i) for each element i (row-major order). A non-contiguous self gets
// the values of a contiguous tensor copied in, so its values equal a contiguous one's.
template <typename T, typename Fill>
void fill_elements(const Tensor& self, Fill fill) {
  self.impl()->storage()->check_write();  // Note [Inference tensors]
  const Tensor dst = self.is_contiguous() ? self : alloc_cpu(self.sizes(), self.dtype());
  T* const out = dst.data<T>();
  parallel_range(dst, [&](std::int64_t begin, std::int64_t end) { fill(out, begin, end); });
  if (!dst.is_same(self)) copy_cpu_op(self, dst);
  self.bump_version();
}

std::uint64_t u64_lane(const Block& w, int lane) { return random::u64(w[2 * lane], w[2 * lane + 1]); }

void check_floating(const char* op, const Tensor& self) {
  KAEL_CHECK_IMPLEMENTED(is_floating(self.dtype()),
                         op << ": not implemented for dtype " << dtype_name(self.dtype())
                            << " (a floating dtype is needed)");
}

// The largest finite value of a floating dtype.
double finite_max(ScalarType t) {
  switch (t) {
    case ScalarType::Float16:
      return 65504.0;
    case ScalarType::BFloat16:
      return 3.3895313892515355e38;
    case ScalarType::Float32:
      return static_cast<double>(std::numeric_limits<float>::max());
    default:
      return std::numeric_limits<double>::max();
  }
}

// The largest integer up to which every integer is exact in a floating dtype (2^digits).
std::int64_t exact_integer_limit(ScalarType t) {
  switch (t) {
    case ScalarType::Float16:
      return std::int64_t{1} << 11;
    case ScalarType::BFloat16:
      return std::int64_t{1} << 8;
    case ScalarType::Float32:
      return std::int64_t{1} << 24;
    default:
      return std::int64_t{1} << 53;
  }
}

// [lowest, max] of an integral dtype (bool: [0, 1]).
std::pair<std::int64_t, std::int64_t> integer_range(ScalarType t) {
  return visit_dtype(t, [](auto tag) -> std::pair<std::int64_t, std::int64_t> {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      return {0, 1};
    } else if constexpr (std::is_integral_v<T>) {
      return {static_cast<std::int64_t>(std::numeric_limits<T>::lowest()),
              static_cast<std::int64_t>(std::numeric_limits<T>::max())};
    } else {
      return {0, 0};
    }
  });
}

// Writes from + below(range) (an integer in [from, from + range), range 0 meaning 2^64) into
// every element of self.
void fill_random_integers(const Tensor& self, std::int64_t from, std::uint64_t range, const PhiloxStream& s) {
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_elements<T>(self, [&](T* out, std::int64_t begin, std::int64_t end) {
      for_blocks<2>(s, begin, end, [&](std::int64_t i, const Block& w, int lane) {
        const std::uint64_t v = static_cast<std::uint64_t>(from) + random::below(u64_lane(w, lane), range);
        out[i] = convert<T>(static_cast<std::int64_t>(v));
      });
    });
  });
}

}  // namespace

const Tensor& uniform_cpu_(const Tensor& self, double from, double to, std::optional<Generator> generator) {
  assert_no_internal_overlap("uniform_", self);
  check_floating("uniform_", self);
  const double max = finite_max(self.dtype());
  KAEL_CHECK(from >= -max && from <= max, "uniform_: from=" << from << " is out of bounds for " << type_word(self.dtype()));
  KAEL_CHECK(to >= -max && to <= max, "uniform_: to=" << to << " is out of bounds for " << type_word(self.dtype()));
  KAEL_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=" << from << " > to=" << to);
  KAEL_CHECK(to - from <= max, "uniform_ expects to-from <= std::numeric_limits<" << type_word(self.dtype())
                                   << ">::max(), but found to=" << to << " and from=" << from
                                   << " which result in to-from to exceed the limit");
  const PhiloxStream s = next_stream(generator);
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, double>) {
      fill_elements<T>(self, [&](T* out, std::int64_t begin, std::int64_t end) {
        for_blocks<2>(s, begin, end, [&](std::int64_t i, const Block& w, int lane) {
          out[i] = from + (to - from) * random::uniform_double(u64_lane(w, lane));
        });
      });
    } else if constexpr (is_floating_v<T>) {
      const float lo = static_cast<float>(from), span = static_cast<float>(to - from);
      fill_elements<T>(self, [&](T* out, std::int64_t begin, std::int64_t end) {
        for_blocks<4>(s, begin, end, [&](std::int64_t i, const Block& w, int lane) {
          out[i] = convert<T>(lo + span * random::uniform_float(w[lane]));
        });
      });
    }
  });
  return self;
}

// Box-Muller: two uniforms give two normals, u1 in (0, 1] so that the log is finite.
const Tensor& normal_cpu_(const Tensor& self, double mean, double std, std::optional<Generator> generator) {
  assert_no_internal_overlap("normal_", self);
  check_floating("normal_", self);
  KAEL_CHECK(std >= 0.0, "normal_ expects std >= 0.0, but found std " << std);
  const PhiloxStream s = next_stream(generator);
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, double>) {
      // one block per pair of elements: 64 bits for each uniform
      fill_elements<T>(self, [&](T* out, std::int64_t begin, std::int64_t end) {
        std::int64_t pair = -1;
        double z[2] = {0, 0};
        for_blocks<2>(s, begin, end, [&](std::int64_t i, const Block& w, int lane) {
          if (i / 2 != pair) {  // both normals of a pair from one log and one sincos
            pair = i / 2;
            const double u1 = 1.0 - random::uniform_double(random::u64(w[0], w[1]));
            const double theta = 2.0 * std::numbers::pi * random::uniform_double(random::u64(w[2], w[3]));
            const double r = std::sqrt(-2.0 * std::log(u1));
            z[0] = r * std::cos(theta);
            z[1] = r * std::sin(theta);
          }
          out[i] = mean + std * z[lane];
        });
      });
    } else if constexpr (is_floating_v<T>) {
      // one block per two pairs: 32 bits for each uniform
      const float m = static_cast<float>(mean), sd = static_cast<float>(std);
      fill_elements<T>(self, [&](T* out, std::int64_t begin, std::int64_t end) {
        std::int64_t pair = -1;
        float z[2] = {0, 0};
        for_blocks<4>(s, begin, end, [&](std::int64_t i, const Block& w, int lane) {
          if (i / 2 != pair) {
            pair = i / 2;
            const int k = lane >> 1;
            const float u1 = 1.0f - random::uniform_float(w[2 * k]);
            const float theta = 2.0f * std::numbers::pi_v<float> * random::uniform_float(w[2 * k + 1]);
            const float r = std::sqrt(-2.0f * std::log(u1));
            z[0] = r * std::cos(theta);
            z[1] = r * std::sin(theta);
          }
          out[i] = convert<T>(m + sd * z[lane & 1]);
        });
      });
    }
  });
  return self;
}

const Tensor& random_from_cpu_(const Tensor& self, std::int64_t from, std::optional<std::int64_t> to,
                               std::optional<Generator> generator) {
  assert_no_internal_overlap("random_", self);
  const ScalarType t = self.dtype();
  std::uint64_t range = 0;
  if (is_floating(t)) {
    const double max = finite_max(t);
    KAEL_CHECK(static_cast<double>(from) >= -max && static_cast<double>(from) <= max,
               "random_: from=" << from << " is out of bounds for " << type_word(t));
    if (to) {
      KAEL_CHECK(from < *to, "random_ expects 'from' to be less than 'to', but got from=" << from << " >= to=" << *to);
      KAEL_CHECK(static_cast<double>(*to - 1) <= max, "random_: to - 1 = " << (*to - 1) << " is out of bounds for "
                                                                            << type_word(t));
      range = static_cast<std::uint64_t>(*to) - static_cast<std::uint64_t>(from);
    } else {
      const std::int64_t top = exact_integer_limit(t);  // inclusive, as PyTorch
      KAEL_CHECK(from <= top, "random_ expects 'from' to be less than or equal to " << top << " for "
                                                                                     << type_word(t) << ", but got from=" << from);
      range = static_cast<std::uint64_t>(top) - static_cast<std::uint64_t>(from) + 1;
    }
  } else {
    const auto [lowest, highest] = integer_range(t);
    KAEL_CHECK(from >= lowest && from <= highest, "random_: from=" << from << " is out of bounds for " << type_word(t));
    if (to) {
      KAEL_CHECK(from < *to, "random_ expects 'from' to be less than 'to', but got from=" << from << " >= to=" << *to);
      KAEL_CHECK(*to - 1 <= highest, "random_: to - 1 = " << (*to - 1) << " is out of bounds for " << type_word(t));
      range = static_cast<std::uint64_t>(*to) - static_cast<std::uint64_t>(from);
    } else {
      range = static_cast<std::uint64_t>(highest) - static_cast<std::uint64_t>(from) + 1;  // 0 stands for 2^64
    }
  }
  fill_random_integers(self, from, range, next_stream(generator));
  return self;
}

const Tensor& random_to_cpu_(const Tensor& self, std::int64_t to, std::optional<Generator> generator) {
  return random_from_cpu_(self, 0, to, generator);
}

// As PyTorch: [0, 2**digits] for floating dtypes (every integer the dtype holds exactly), [0,
// the largest value] for integer ones (bool: 0 and 1).
const Tensor& random_cpu_(const Tensor& self, std::optional<Generator> generator) {
  return random_from_cpu_(self, 0, std::nullopt, generator);
}

const Tensor& bernoulli_float_cpu_(const Tensor& self, double p, std::optional<Generator> generator) {
  assert_no_internal_overlap("bernoulli_", self);
  KAEL_CHECK(p >= 0 && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=" << p);
  const PhiloxStream s = next_stream(generator);
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_elements<T>(self, [&](T* out, std::int64_t begin, std::int64_t end) {
      for_blocks<2>(s, begin, end, [&](std::int64_t i, const Block& w, int lane) {
        out[i] = convert<T>(random::uniform_double(u64_lane(w, lane)) < p ? 1 : 0);
      });
    });
  });
  return self;
}

const Tensor& bernoulli_tensor_cpu_(const Tensor& self, const Tensor& p, std::optional<Generator> generator) {
  assert_no_internal_overlap("bernoulli_", self);
  // PyTorch returns an empty self before it looks at p (its shape, dtype and values)
  if (self.numel() == 0) return self;
  KAEL_CHECK_IMPLEMENTED(is_floating(p.dtype()),
                         "bernoulli_: not implemented for probabilities of dtype " << dtype_name(p.dtype())
                            << " (a floating dtype is needed)");
  check_same_device("bernoulli_", self.device(), p.device());
  bool expandable = p.dim() <= self.dim();
  for (std::int64_t d = 1; expandable && d <= p.dim(); ++d)
    expandable = p.size(-d) == 1 || p.size(-d) == self.size(-d);
  KAEL_CHECK(expandable, "bernoulli_: p of size " << shape_str(p.sizes()) << " cannot be expanded to input's size "
                                                  << shape_str(self.sizes()));
  // p broadcast to self's shape, as float64 in self's row-major order
  const Tensor probs = alloc_cpu(self.sizes(), ScalarType::Float64);
  copy_cpu(probs, kael::expand(p, self.sizes()));
  const double* const pr = probs.data<double>();
  for (std::int64_t i = 0; i < probs.numel(); ++i)
    KAEL_CHECK(pr[i] >= 0 && pr[i] <= 1, "bernoulli_ expects all elements of p to be in [0, 1], but got p=" << pr[i]);
  const PhiloxStream s = next_stream(generator);
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_elements<T>(self, [&](T* out, std::int64_t begin, std::int64_t end) {
      for_blocks<2>(s, begin, end, [&](std::int64_t i, const Block& w, int lane) {
        out[i] = convert<T>(random::uniform_double(u64_lane(w, lane)) < pr[i] ? 1 : 0);
      });
    });
  });
  return self;
}

// Fisher-Yates from the top: step i (n - 1 down to 1) swaps element i with one drawn uniformly
// from [0, i], using the 64 bits of draw i. Sequential, as every value depends on the last.
Tensor randperm_cpu(std::int64_t n, std::optional<Generator> generator, std::optional<ScalarType> dtype,
                    std::optional<Device> device) {
  const ScalarType t = dtype.value_or(ScalarType::Int64);
  const std::int64_t size[] = {n};
  checked_numel("randperm", size);
  if (device) {
    check_device_available("randperm", *device);
    KAEL_CHECK(device->is_cpu(), "randperm: device '" << device->str() << "' is not supported by this kernel");
  }
  KAEL_CHECK_IMPLEMENTED(t != ScalarType::Bool, "randperm: not implemented for dtype bool");
  if (is_floating(t)) {
    const std::int64_t limit = exact_integer_limit(t) + 1;
    KAEL_CHECK(n <= limit, "randperm: n cannot be greater than " << limit << " for " << dtype_name(t) << ", got " << n);
  } else {
    const std::int64_t highest = integer_range(t).second;
    KAEL_CHECK(n - 1 <= highest, "randperm: n - 1 = " << (n - 1) << " cannot be converted to type " << dtype_name(t)
                                                      << " without overflow");
  }
  // the output is allocated first: a size that cannot be allocated fails there (MemoryError)
  Tensor out = alloc_cpu(size, t);
  const Tensor work = t == ScalarType::Int64 ? out : alloc_cpu(size, ScalarType::Int64);
  std::int64_t* const perm = work.data<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) perm[i] = i;
  const PhiloxStream s = next_stream(generator);
  Block w{};
  std::int64_t cached = -1;
  for (std::int64_t i = n - 1; i >= 1; --i) {
    if (i / 2 != cached) {
      cached = i / 2;
      w = random::block(s, static_cast<std::uint64_t>(cached));
    }
    const auto j = static_cast<std::int64_t>(
        random::below(u64_lane(w, static_cast<int>(i % 2)), static_cast<std::uint64_t>(i) + 1));
    std::swap(perm[i], perm[j]);
  }
  if (!work.is_same(out)) {
    visit_dtype(t, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* p = out.data<T>();
      for (std::int64_t i = 0; i < n; ++i) p[i] = convert<T>(perm[i]);
    });
  }
  return out;
}

// Note [multinomial]
// Weights are read as float64, each row checked (finite, non-negative, positive sum) before
// anything is drawn. With replacement, sample k of row r inverts the row's cumulative sums at a
// uniform of draw r * num_samples + k. Without replacement, category c of row r gets the key
// E / w (E exponential from draw r * categories + c; zero weights get +inf) and the samples are
// the num_samples smallest keys in increasing order (ties by index): the exponential-clocks
// form of sequential sampling without replacement, so the first sample follows the weights.
// Rows are split among threads by the loop engine over the weights' elements; the chunk that
// holds a row's first weight samples that row.
Tensor multinomial_cpu(const Tensor& self, std::int64_t num_samples, bool replacement,
                       std::optional<Generator> generator) {
  KAEL_CHECK(is_floating(self.dtype()),
             "multinomial only supports floating-point dtypes for input, got: " << dtype_name(self.dtype()));
  KAEL_CHECK(self.dim() == 1 || self.dim() == 2, "multinomial: prob_dist must be 1 or 2 dim, got " << self.dim());
  KAEL_CHECK(num_samples > 0, "multinomial: cannot sample n_sample <= 0 samples (got " << num_samples << ")");
  const std::int64_t rows = self.dim() == 2 ? self.size(0) : 1;
  const std::int64_t cats = self.size(-1);
  KAEL_CHECK(replacement || num_samples <= cats,
             "multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement (n_sample="
                 << num_samples << ", " << cats << " categories)");
  KAEL_CHECK(cats <= (std::int64_t{1} << 24), "multinomial: number of categories cannot exceed 2^24 (got " << cats << ")");
  const std::int64_t wsize[] = {rows, cats};
  const Tensor weights = alloc_cpu(wsize, ScalarType::Float64);
  copy_cpu(weights, self.dim() == 2 ? self : kael::expand(self, wsize));
  const double* const wp = weights.data<double>();
  for (std::int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (std::int64_t c = 0; c < cats; ++c) {
      const double w = wp[r * cats + c];
      KAEL_CHECK(std::isfinite(w) && w >= 0,
                 "multinomial: probability tensor contains either `inf`, `nan` or element < 0 (got "
                     << w << " at row " << r << ", category " << c << ")");
      sum += w;
    }
    KAEL_CHECK(sum > 0, "multinomial: invalid multinomial distribution (sum of probabilities <= 0) in row " << r);
  }
  const std::int64_t osize1[] = {num_samples}, osize2[] = {rows, num_samples};
  Tensor out = self.dim() == 2 ? alloc_cpu(osize2, ScalarType::Int64) : alloc_cpu(osize1, ScalarType::Int64);
  std::int64_t* const op = out.data<std::int64_t>();
  const PhiloxStream s = next_stream(generator);
  auto sample_row = [&](std::int64_t r) {
    const double* w = wp + r * cats;
    std::int64_t* o = op + r * num_samples;
    if (replacement) {
      std::vector<double> cdf(static_cast<std::size_t>(cats));
      double acc = 0;
      std::int64_t last_positive = 0;
      for (std::int64_t c = 0; c < cats; ++c) {
        acc += w[c];
        cdf[static_cast<std::size_t>(c)] = acc;
        if (w[c] > 0) last_positive = c;
      }
      const std::int64_t first = r * num_samples;
      for_blocks<2>(s, first, first + num_samples, [&](std::int64_t i, const Block& b, int lane) {
        const double u = random::uniform_double(u64_lane(b, lane)) * acc;
        auto c = static_cast<std::int64_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
        o[i - first] = c < cats ? c : last_positive;  // u rounded up to the total
      });
    } else {
      std::vector<double> key(static_cast<std::size_t>(cats));
      const std::int64_t first = r * cats;
      for_blocks<2>(s, first, first + cats, [&](std::int64_t i, const Block& b, int lane) {
        const std::int64_t c = i - first;
        const double e = -std::log1p(-random::uniform_double(u64_lane(b, lane)));
        key[static_cast<std::size_t>(c)] = w[c] > 0 ? e / w[c] : std::numeric_limits<double>::infinity();
      });
      std::vector<std::int64_t> idx(static_cast<std::size_t>(cats));
      for (std::int64_t c = 0; c < cats; ++c) idx[static_cast<std::size_t>(c)] = c;
      auto before = [&](std::int64_t a, std::int64_t b) {
        const double ka = key[static_cast<std::size_t>(a)], kb = key[static_cast<std::size_t>(b)];
        return ka < kb || (ka == kb && a < b);
      };
      std::partial_sort(idx.begin(), idx.begin() + num_samples, idx.end(), before);
      for (std::int64_t k = 0; k < num_samples; ++k) o[k] = idx[static_cast<std::size_t>(k)];
    }
  };
  if (cats == 0) return out;  // no rows to sample (every check above passed: rows == 0)
  parallel_range(weights, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = (begin + cats - 1) / cats; r * cats < end; ++r) sample_row(r);
  });
  return out;
}

}  // namespace kael::native
