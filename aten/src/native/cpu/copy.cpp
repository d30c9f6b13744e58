// Strided copies with dtype conversion (see Note [Conversions between dtypes]), and fills.
#include "kael/core/convert.h"
#include "kael/core/error.h"
#include "kael/core/mem_overlap.h"
#include "kael/native/pointwise.h"

namespace kael::native {

namespace {

template <typename To, typename From>
struct Convert {
  To operator()(From v) const { return convert<To>(v); }
};

// A bool is read as its byte and converted by a select: GCC vectorises neither a load of bool
// nor a conversion of one to a floating type, and does vectorise this (a kael bool holds 0 or 1;
// != 0 keeps any other byte true). bool to bool stays a copy of bytes.
template <typename To>
struct ConvertBool {
  To operator()(std::uint8_t v) const {
    if constexpr (std::is_arithmetic_v<To>) {
      return v != 0 ? To(1) : To(0);
    } else {
      return convert<To>(static_cast<std::uint8_t>(v != 0));  // float16, bfloat16: through float
    }
  }
};

template <typename To, typename From>
void copy_loop(const LoopGeometry<2>& g) {
  // the loops of pointwise ops (streaming stores for a large output; Note [One copy of the loops])
  if constexpr (std::is_same_v<From, bool>) {
    // a bool is read as its byte (Note [Bool bytes]), bool to bool included: a foreign bool's byte
    // may be neither 0 nor 1, and the copy holds 0 or 1, as torch's
    using Inner = PointwiseInner<To, std::uint8_t, 1, ConvertBool<To>>;
    const Inner inner{};
    run_rows<2>(g, &Inner::row, &inner);
  } else {
    using Inner = PointwiseInner<To, From, 1, Convert<To, From>>;
    const Inner inner{};
    run_rows<2>(g, &Inner::row, &inner);
  }
}

// dst <- src once every check has passed.
void copy_unchecked(const Tensor& dst, const Tensor& src) {
  const LoopGeometry<2> g = make_geometry<2>(dst.sizes(), {view_of(dst), view_of(src)});
  visit_dtype(dst.dtype(), [&](auto to) {
    visit_dtype(src.dtype(), [&](auto from) {
      copy_loop<typename decltype(to)::type, typename decltype(from)::type>(g);
    });
  });
}

}  // namespace

Tensor snapshot_cpu(const Tensor& src) {
  Tensor out = alloc_cpu(src.sizes(), src.dtype());
  copy_unchecked(out, src);
  return out;
}

namespace {

// The loop of copy_, on the call's own tensors (Note [Concurrency] in kael/core/concurrency.h).
void copy_unchecked_unlocked(const Tensor& dst, const Tensor& src) {
  UnlockedSection section;
  const Tensor& d = section.own(dst);
  const Tensor& s = section.own(src);
  section.unlock();
  copy_unchecked(d, s);
}

template <bool Unlocking>
void copy_checked(const Tensor& dst, const Tensor& src) {
  constexpr auto run = Unlocking ? copy_unchecked_unlocked : copy_unchecked;
  check_copy_shapes(dst, src);
  assert_no_internal_overlap("copy_", dst);
  const MemOverlapStatus overlap = get_overlap_status(dst, src);
  assert_no_partial_overlap("copy_", dst, src);
  if (dst.numel() == 0) return;
  if (overlap == MemOverlapStatus::Full && dst.dtype() == src.dtype()) return;  // the same elements
  // Full with another dtype (a view of the same bytes as another type) or too hard to tell:
  // read everything before writing anything.
  if ((overlap == MemOverlapStatus::Full || overlap == MemOverlapStatus::TooHard) && may_share_memory(dst, src)) {
    run(dst, snapshot_cpu(src));
    return;
  }
  run(dst, src);
}

}  // namespace

void copy_cpu(const Tensor& dst, const Tensor& src) { copy_checked<false>(dst, src); }

void copy_cpu_op(const Tensor& dst, const Tensor& src) { copy_checked<true>(dst, src); }

Tensor to_dtype_cpu(const Tensor& src, ScalarType dtype) {
  if (src.dtype() == dtype) return src;
  Tensor out = alloc_cpu(src.sizes(), dtype);
  copy_cpu(out, src);
  return out;
}

void fill_cpu(const Tensor& dst, const Scalar& value) {
  visit_dtype(dst.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = value.checked_to<T>("fill_");
    const LoopGeometry<1> g = make_geometry<1>(dst.sizes(), {view_of(dst)});
    run_loop<1>(g, [v](char* const* ptrs, const std::int64_t* strides, std::int64_t n) {
      if (strides[0] == sizeof(T)) {
        T* __restrict out = reinterpret_cast<T*>(ptrs[0]);
        for (std::int64_t i = 0; i < n; ++i) out[i] = v;
        return;
      }
      for (std::int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(ptrs[0] + i * strides[0]) = v;
    });
  });
}

}  // namespace kael::native
