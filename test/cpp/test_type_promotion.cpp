// Tests of dtypes and type promotion (see Note [Type promotion]), directly and through the
// dtypes of pointwise op results.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "kael/core/error.h"
#include "kael/core/scalar.h"
#include "kael/core/scalar_type.h"
#include "kael/ops.h"

namespace {

using kael::ScalarType;
using kael::Tensor;
using I64 = std::vector<std::int64_t>;

constexpr ScalarType B = ScalarType::Bool, L = ScalarType::Int64, F = ScalarType::Float32, D = ScalarType::Float64;
constexpr ScalarType kAll[] = {B, L, F, D};

// A 1-d tensor [0, 1, 2] of the given dtype.
Tensor vec3(ScalarType t) { return kael::arange(3, t); }
// A 0-d tensor holding v.
Tensor scalar_tensor(double v, ScalarType t) { return kael::full(kael::IntArrayRef{}, v, t); }

// ---------------------------------------------------------------- dtype basics

TEST(Dtype, NamesSizesCategories) {
  EXPECT_STREQ(kael::dtype_name(B), "bool");
  EXPECT_STREQ(kael::dtype_name(L), "int64");
  EXPECT_STREQ(kael::dtype_name(F), "float32");
  EXPECT_STREQ(kael::dtype_name(D), "float64");
  EXPECT_EQ(kael::itemsize(B), 1);
  EXPECT_EQ(kael::itemsize(L), 8);
  EXPECT_EQ(kael::itemsize(F), 4);
  EXPECT_EQ(kael::itemsize(D), 8);
  EXPECT_FALSE(kael::is_floating(B));
  EXPECT_FALSE(kael::is_floating(L));
  EXPECT_TRUE(kael::is_floating(F));
  EXPECT_TRUE(kael::is_floating(D));
  EXPECT_TRUE(kael::is_integral(B, true));
  EXPECT_FALSE(kael::is_integral(B, false));
  EXPECT_TRUE(kael::is_integral(L, false));
  EXPECT_FALSE(kael::is_integral(F, true));
  EXPECT_EQ(kael::default_dtype(), F);
}

// Note [The default dtype]: set_default_dtype changes what a Python float, an integer promoted
// to floating and a factory without a dtype give; float32 again after.
TEST(Dtype, DefaultDtypeFollowsTheSetting) {
  struct Restore {
    ~Restore() { kael::set_default_dtype(F); }
  } restore;
  kael::set_default_dtype(D);
  EXPECT_EQ(kael::default_dtype(), D);
  EXPECT_EQ(kael::Scalar(2.5).wrapped_dtype(), D);
  EXPECT_EQ(kael::mul(vec3(L), kael::Scalar(1.5)).dtype(), D);
  EXPECT_EQ(kael::mul(vec3(F), kael::Scalar(1.5)).dtype(), F);  // a float tensor keeps its dtype
  EXPECT_EQ(kael::div(vec3(L), vec3(L)).dtype(), D);
  EXPECT_EQ(kael::zeros(I64{2}).dtype(), D);
  EXPECT_EQ(kael::randn(I64{2}).dtype(), D);
  kael::set_default_dtype(ScalarType::Float16);
  EXPECT_EQ(kael::ones(I64{2}).dtype(), ScalarType::Float16);
  EXPECT_EQ(kael::sqrt(vec3(L)).dtype(), ScalarType::Float16);
}

TEST(Dtype, ParseDtype) {
  EXPECT_EQ(kael::parse_dtype("bool"), B);
  EXPECT_EQ(kael::parse_dtype("int64"), L);
  EXPECT_EQ(kael::parse_dtype("float32"), F);
  EXPECT_EQ(kael::parse_dtype("float64"), D);
  EXPECT_EQ(kael::parse_dtype("kael.float32"), F);
  EXPECT_EQ(kael::parse_dtype("kael.bool"), B);
  for (ScalarType t : kAll) EXPECT_EQ(kael::parse_dtype(kael::dtype_name(t)), t);
}

TEST(Dtype, ParseDtypeRejectsUnknownNames) {
  for (const char* name : {"", "kael.", "float", "half", "uint16", "Float32", "float32 ", " float32", "torch.float32",
                           "kael.kael.float32", "float3", "float644"})
    EXPECT_EQ(kael::parse_dtype(name), std::nullopt) << "'" << name << "'";
}

TEST(Dtype, WrappedDtypeOfScalars) {
  EXPECT_EQ(kael::Scalar(true).wrapped_dtype(), B);
  EXPECT_EQ(kael::Scalar(3).wrapped_dtype(), L);
  EXPECT_EQ(kael::Scalar(std::int64_t{1} << 40).wrapped_dtype(), L);
  EXPECT_EQ(kael::Scalar(2.5).wrapped_dtype(), F);  // a Python float counts as the default float
  EXPECT_EQ(kael::Scalar(2.5f).wrapped_dtype(), F);
}

// ---------------------------------------------------------------- promote_types / can_cast

TEST(PromoteTypes, AllPairs) {
  // Rows: a; columns: b (bool, int64, float32, float64).
  const ScalarType expected[4][4] = {
      {B, L, F, D},
      {L, L, F, D},
      {F, F, F, D},
      {D, D, D, D},
  };
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      EXPECT_EQ(kael::promote_types(kAll[i], kAll[j]), expected[i][j]) << kAll[i] << " + " << kAll[j];
}

TEST(PromoteTypes, NewDtypes) {
  using kael::promote_types;
  const ScalarType U8 = ScalarType::UInt8, I8 = ScalarType::Int8, I16 = ScalarType::Int16, I32 = ScalarType::Int32,
                   H = ScalarType::Float16, BF = ScalarType::BFloat16;
  EXPECT_EQ(promote_types(H, BF), F);
  EXPECT_EQ(promote_types(U8, I8), I16);
  EXPECT_EQ(promote_types(B, U8), U8);
  EXPECT_EQ(promote_types(U8, I16), I16);
  EXPECT_EQ(promote_types(U8, I32), I32);
  EXPECT_EQ(promote_types(I32, L), L);
  EXPECT_EQ(promote_types(L, H), H);
  EXPECT_EQ(promote_types(BF, F), F);
  EXPECT_EQ(promote_types(H, D), D);
  EXPECT_FALSE(kael::can_cast(H, I32));
  EXPECT_TRUE(kael::can_cast(D, BF));
  EXPECT_FALSE(kael::can_cast(U8, B));
}

std::vector<ScalarType> every_dtype() {
  std::vector<ScalarType> v;
  for (int i = 0; i < kael::kNumScalarTypes; ++i) v.push_back(static_cast<ScalarType>(i));
  return v;
}

TEST(PromoteTypes, SymmetricIdempotentAssociative) {
  for (ScalarType a : every_dtype()) {
    EXPECT_EQ(kael::promote_types(a, a), a);
    for (ScalarType b : every_dtype()) {
      EXPECT_EQ(kael::promote_types(a, b), kael::promote_types(b, a));
      for (ScalarType c : every_dtype())
        EXPECT_EQ(kael::promote_types(kael::promote_types(a, b), c), kael::promote_types(a, kael::promote_types(b, c)));
    }
  }
}

TEST(CanCast, AllPairs) {
  // Rows: from; columns: to (bool, int64, float32, float64).
  const bool expected[4][4] = {
      {true, true, true, true},     // bool -> anything
      {false, true, true, true},    // int64 -/-> bool
      {false, false, true, true},   // float32 -/-> integral
      {false, false, true, true},   // float64 -/-> integral; float64 -> float32 is allowed
  };
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      EXPECT_EQ(kael::can_cast(kAll[i], kAll[j]), expected[i][j]) << kAll[i] << " -> " << kAll[j];
}

TEST(CanCast, PromotedTypeIsCastableFromBoth) {
  for (ScalarType a : every_dtype())
    for (ScalarType b : every_dtype()) {
      const ScalarType p = kael::promote_types(a, b);
      EXPECT_TRUE(kael::can_cast(a, p)) << a << " " << b;
      EXPECT_TRUE(kael::can_cast(b, p)) << a << " " << b;
    }
}

// ---------------------------------------------------------------- ResultTypeState

struct Arg {
  enum Kind { Dim, ZeroDim, Wrapped } kind;
  ScalarType dtype;
};

ScalarType result_of(std::initializer_list<Arg> args) {
  kael::ResultTypeState s;
  for (const Arg& a : args) {
    if (a.kind == Arg::Wrapped) {
      s.add_wrapped(a.dtype);
    } else {
      s.add_tensor(a.dtype, a.kind == Arg::ZeroDim);
    }
  }
  return s.result();
}

TEST(ResultType, DocumentedExamples) {
  EXPECT_EQ(result_of({{Arg::Dim, F}, {Arg::ZeroDim, D}}), F);      // float32 tensor + float64 0-d
  EXPECT_EQ(result_of({{Arg::Dim, L}, {Arg::Wrapped, F}}), F);      // int64 tensor + 2.5
  EXPECT_EQ(result_of({{Arg::Dim, B}, {Arg::Wrapped, L}}), L);      // bool tensor + 1
  EXPECT_EQ(result_of({{Arg::Dim, L}, {Arg::Wrapped, B}}), L);      // int64 tensor + True
  EXPECT_EQ(result_of({{Arg::ZeroDim, L}, {Arg::Wrapped, F}}), F);  // int64 0-d + 2.5
}

TEST(ResultType, SameTierPromotesNormally) {
  EXPECT_EQ(result_of({{Arg::Dim, F}, {Arg::Dim, D}}), D);
  EXPECT_EQ(result_of({{Arg::Dim, B}, {Arg::Dim, L}}), L);
  EXPECT_EQ(result_of({{Arg::ZeroDim, F}, {Arg::ZeroDim, D}}), D);
  EXPECT_EQ(result_of({{Arg::Wrapped, L}, {Arg::Wrapped, F}}), F);
  EXPECT_EQ(result_of({{Arg::Wrapped, B}, {Arg::Wrapped, B}}), B);
  for (ScalarType t : kAll) {
    EXPECT_EQ(result_of({{Arg::Dim, t}}), t);
    EXPECT_EQ(result_of({{Arg::ZeroDim, t}}), t);
    EXPECT_EQ(result_of({{Arg::Wrapped, t}}), t);
  }
}

TEST(ResultType, LowerTierCountsOnlyWhenHigherCategory) {
  // Same category: the dimensioned tensor wins.
  EXPECT_EQ(result_of({{Arg::Dim, F}, {Arg::Wrapped, F}}), F);
  EXPECT_EQ(result_of({{Arg::Dim, D}, {Arg::Wrapped, F}}), D);
  EXPECT_EQ(result_of({{Arg::Dim, L}, {Arg::ZeroDim, L}}), L);
  EXPECT_EQ(result_of({{Arg::Dim, F}, {Arg::ZeroDim, L}}), F);
  // Higher category: promotes with the lower tier's dtype.
  EXPECT_EQ(result_of({{Arg::Dim, L}, {Arg::ZeroDim, D}}), D);
  EXPECT_EQ(result_of({{Arg::Dim, L}, {Arg::ZeroDim, F}}), F);
  EXPECT_EQ(result_of({{Arg::Dim, B}, {Arg::ZeroDim, D}}), D);
  EXPECT_EQ(result_of({{Arg::Dim, B}, {Arg::ZeroDim, L}}), L);
  EXPECT_EQ(result_of({{Arg::Dim, B}, {Arg::Wrapped, F}}), F);
  EXPECT_EQ(result_of({{Arg::ZeroDim, B}, {Arg::Wrapped, L}}), L);
  EXPECT_EQ(result_of({{Arg::ZeroDim, L}, {Arg::Wrapped, B}}), L);
  EXPECT_EQ(result_of({{Arg::ZeroDim, F}, {Arg::Wrapped, F}}), F);
  EXPECT_EQ(result_of({{Arg::ZeroDim, D}, {Arg::Wrapped, F}}), D);
}

TEST(ResultType, ThreeTiers) {
  // The 0-d and wrapped tiers combine first, then with the dimensioned tier.
  EXPECT_EQ(result_of({{Arg::Dim, B}, {Arg::ZeroDim, B}, {Arg::Wrapped, F}}), F);
  EXPECT_EQ(result_of({{Arg::Dim, L}, {Arg::ZeroDim, D}, {Arg::Wrapped, F}}), D);
  EXPECT_EQ(result_of({{Arg::Dim, L}, {Arg::ZeroDim, L}, {Arg::Wrapped, F}}), F);
  EXPECT_EQ(result_of({{Arg::Dim, F}, {Arg::ZeroDim, D}, {Arg::Wrapped, F}}), F);
  // Order of the arguments does not matter.
  EXPECT_EQ(result_of({{Arg::Wrapped, F}, {Arg::ZeroDim, L}, {Arg::Dim, B}}), F);
}

TEST(ResultType, NoArgumentsIsDefaultFloat) { EXPECT_EQ(kael::ResultTypeState().result(), F); }

// ---------------------------------------------------------------- dtypes of op results

TEST(OpDtypes, AddDocumentedExamples) {
  const Tensor f32 = vec3(F), i64 = vec3(L);
  const Tensor b = kael::full(I64{3}, true);
  ASSERT_EQ(b.dtype(), B);
  EXPECT_EQ(kael::add(f32, scalar_tensor(1.0, D)).dtype(), F);
  EXPECT_EQ(kael::add(i64, 2.5).dtype(), F);
  EXPECT_EQ(kael::add(b, 1).dtype(), L);
  EXPECT_EQ(kael::add(i64, true).dtype(), L);
  const Tensor z = kael::add(scalar_tensor(2.0, L), 2.5);
  EXPECT_EQ(z.dtype(), F);
  EXPECT_EQ(z.dim(), 0);
  EXPECT_FLOAT_EQ(z.item().to<float>(), 4.5f);
}

TEST(OpDtypes, AddValuesInPromotedDtype) {
  const Tensor i64 = vec3(L);
  const Tensor r = kael::add(i64, 2.5);
  ASSERT_EQ(r.dtype(), F);
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(r.data<float>()[i], static_cast<float>(i) + 2.5f);

  const Tensor s = kael::add(kael::full(I64{2}, true), 1);
  ASSERT_EQ(s.dtype(), L);
  EXPECT_EQ(s.data<std::int64_t>()[0], 2);

  const Tensor t = kael::add(i64, true);
  ASSERT_EQ(t.dtype(), L);
  EXPECT_EQ(t.data<std::int64_t>()[2], 3);
}

TEST(OpDtypes, AddMoreMixes) {
  const Tensor f32 = vec3(F), f64 = vec3(D), i64 = vec3(L), b = kael::full(I64{3}, false);
  EXPECT_EQ(kael::add(f32, f64).dtype(), D);
  EXPECT_EQ(kael::add(f64, f32).dtype(), D);
  EXPECT_EQ(kael::add(i64, f32).dtype(), F);
  EXPECT_EQ(kael::add(b, i64).dtype(), L);
  EXPECT_EQ(kael::add(b, b).dtype(), B);
  EXPECT_EQ(kael::add(i64, i64).dtype(), L);
  EXPECT_EQ(kael::add(i64, 1).dtype(), L);
  EXPECT_EQ(kael::add(1, i64).dtype(), L);
  EXPECT_EQ(kael::add(2.5, i64).dtype(), F);
  EXPECT_EQ(kael::add(f64, 2.5).dtype(), D);
  EXPECT_EQ(kael::add(f64, 2.5f).dtype(), D);
  EXPECT_EQ(kael::add(i64, scalar_tensor(1.0, D)).dtype(), D);
  EXPECT_EQ(kael::add(i64, scalar_tensor(1.0, F)).dtype(), F);
  EXPECT_EQ(kael::add(f32, scalar_tensor(1.0, L)).dtype(), F);
  EXPECT_EQ(kael::add(b, scalar_tensor(1.0, D)).dtype(), D);
  EXPECT_EQ(kael::add(scalar_tensor(1.0, F), scalar_tensor(1.0, D)).dtype(), D);
  EXPECT_EQ(kael::add(kael::Scalar(true), i64).dtype(), L);
}

TEST(OpDtypes, Div) {
  const Tensor i64 = vec3(L), f64 = vec3(D), b = kael::full(I64{3}, true);
  EXPECT_EQ(kael::div(i64, i64).dtype(), F);
  EXPECT_EQ(kael::div(i64, 2).dtype(), F);
  EXPECT_EQ(kael::div(2, i64).dtype(), F);
  EXPECT_EQ(kael::div(b, b).dtype(), F);
  EXPECT_EQ(kael::div(f64, 2).dtype(), D);
  EXPECT_EQ(kael::div(i64, f64).dtype(), D);
  EXPECT_EQ(kael::div(i64, scalar_tensor(2.0, D)).dtype(), D);
  EXPECT_EQ(kael::div(vec3(F), scalar_tensor(2.0, D)).dtype(), F);
  const Tensor q = kael::div(i64, 2);
  EXPECT_FLOAT_EQ(q.data<float>()[1], 0.5f);  // true division
  EXPECT_FLOAT_EQ(q.data<float>()[2], 1.0f);
}

TEST(OpDtypes, EqIsAlwaysBool) {
  const Tensor i64 = vec3(L), f32 = vec3(F), b = kael::full(I64{3}, true);
  for (const Tensor& r : {kael::eq(i64, 2.5), kael::eq(i64, 1), kael::eq(f32, scalar_tensor(1.0, D)),
                          kael::eq(b, true), kael::eq(b, i64), kael::eq(1, f32), kael::eq(vec3(D), f32)})
    EXPECT_EQ(r.dtype(), B);
  const Tensor e = kael::eq(i64, 1.0);
  EXPECT_FALSE(e.data<bool>()[0]);
  EXPECT_TRUE(e.data<bool>()[1]);
  EXPECT_FALSE(e.data<bool>()[2]);
  const Tensor h = kael::eq(i64, 1.5);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(h.data<bool>()[i]);  // compared as float32, not truncated
}

TEST(OpDtypes, EqComparesInComputeDtype) {
  // float32 tensor vs float64 0-d: the comparison runs in float32, so 1/3 rounds alike.
  const Tensor third32 = kael::full(I64{1}, 1.0 / 3.0, F);
  EXPECT_TRUE(kael::eq(third32, scalar_tensor(1.0 / 3.0, D)).item().to<bool>());
  // float32 tensor vs float64 tensor with dims: compared as float64, so they differ.
  EXPECT_FALSE(kael::eq(third32, kael::full(I64{1}, 1.0 / 3.0, D)).item().to<bool>());
}

TEST(OpDtypes, InPlaceRespectsCanCast) {
  const Tensor i64 = vec3(L);
  EXPECT_THROW(kael::add_(i64, 2.5), kael::Error);  // float32 result into int64
  const Tensor b = kael::full(I64{3}, true);
  EXPECT_THROW(kael::add_(b, 1), kael::Error);      // int64 result into bool
  EXPECT_THROW(kael::div_(vec3(L), 2), kael::Error);
  const Tensor f32 = vec3(F);
  kael::add_(f32, vec3(D));  // float64 result cast back into float32
  EXPECT_EQ(f32.dtype(), F);
  EXPECT_FLOAT_EQ(f32.data<float>()[2], 4.0f);
}

TEST(OpDtypes, ArgumentChecksDependOnPromotion) {
  const Tensor b = kael::full(I64{3}, true);
  EXPECT_THROW(kael::sub(b, b), kael::Error);
  EXPECT_THROW(kael::add(vec3(L), 1, 2.5), kael::Error);  // float alpha with an integral result
  EXPECT_NO_THROW(kael::add(vec3(L), 1.0, 2.5));            // fine when the result is float
}

TEST(OpDtypes, FactoriesDefaultDtypes) {
  EXPECT_EQ(kael::zeros(I64{2}).dtype(), F);
  EXPECT_EQ(kael::full(I64{2}, 1).dtype(), L);
  EXPECT_EQ(kael::full(I64{2}, 1.5).dtype(), F);
  EXPECT_EQ(kael::full(I64{2}, false).dtype(), B);
  EXPECT_EQ(kael::arange(3).dtype(), L);
  EXPECT_EQ(kael::arange(3.0).dtype(), F);
  EXPECT_EQ(kael::arange(0, 3, 0.5).dtype(), F);
}

}  // namespace
