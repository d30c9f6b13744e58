#pragma once
// AVX-512 helpers shared by the float32 GEMM (gemm.cpp) and the small-M product (gemm_small_m.cpp).

#include <immintrin.h>

namespace kael::native {

// Transposes a 16 x 16 block held as 16 rows. (The zero-masking forms with every lane kept are
// the plain instructions; GCC 12's unmasked intrinsics start from _mm512_undefined_ps, which
// -Wmaybe-uninitialized reports.)
inline void transpose16(__m512 r[16]) {
  constexpr __mmask16 kAll = 0xffff;
  constexpr __mmask8 kAll8 = 0xff;
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_maskz_unpacklo_ps(kAll, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_ps(kAll, r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    const __m512d t0 = _mm512_castps_pd(t[i]), t1 = _mm512_castps_pd(t[i + 1]);
    const __m512d t2 = _mm512_castps_pd(t[i + 2]), t3 = _mm512_castps_pd(t[i + 3]);
    r[i] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(kAll8, t0, t2));
    r[i + 1] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(kAll8, t0, t2));
    r[i + 2] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(kAll8, t1, t3));
    r[i + 3] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(kAll8, t1, t3));
  }
  // r[4g + j] now holds, in each 128-bit lane l, rows 4g..4g+3 of column 4l + j.
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_maskz_shuffle_f32x4(kAll, r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_maskz_shuffle_f32x4(kAll, r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_maskz_shuffle_f32x4(kAll, r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_maskz_shuffle_f32x4(kAll, r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_maskz_shuffle_f32x4(kAll, t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_maskz_shuffle_f32x4(kAll, t[i], t[i + 8], 0xdd);
    r[i + 4] = _mm512_maskz_shuffle_f32x4(kAll, t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_maskz_shuffle_f32x4(kAll, t[i + 4], t[i + 12], 0xdd);
  }
}

}  // namespace kael::native
