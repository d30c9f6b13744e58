#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
// counter-based generator behind every random op (Note [Random streams] in generator.h), and
// the conversions of its words into numbers.

#include <array>
#include <cmath>
#include <cstdint>

#include "kael/runtime/generator.h"

namespace kael::random {

using Block = std::array<std::uint32_t, 4>;

// The Random123 reference function: ten rounds over counter c with key k.
inline Block philox4x32_10(Block c, std::array<std::uint32_t, 2> k) {
  constexpr std::uint64_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += kW0;
      k[1] += kW1;
    }
    const std::uint64_t p0 = kM0 * c[0], p1 = kM1 * c[2];
    c = {static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<std::uint32_t>(p1),
         static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<std::uint32_t>(p0)};
  }
  return c;
}

// Block `index` of a stream: counter (index, stream offset), key the seed.
inline Block block(const PhiloxStream& s, std::uint64_t index) {
  return philox4x32_10({static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
                        static_cast<std::uint32_t>(s.offset), static_cast<std::uint32_t>(s.offset >> 32)},
                       {static_cast<std::uint32_t>(s.seed), static_cast<std::uint32_t>(s.seed >> 32)});
}

inline std::uint64_t u64(std::uint32_t hi, std::uint32_t lo) { return (static_cast<std::uint64_t>(hi) << 32) | lo; }

// Uniform in [0, 1): 24 random bits as a float, 53 as a double (every value a multiple of 2^-24
// or 2^-53, so each representable step is equally likely).
inline float uniform_float(std::uint32_t w) { return static_cast<float>(w >> 8) * 0x1p-24f; }
inline double uniform_double(std::uint64_t w) { return static_cast<double>(w >> 11) * 0x1p-53; }

// An integer uniform in [0, range) from 64 random bits (Lemire's multiply-shift; the bias is at
// most range / 2^64). range == 0 stands for 2^64.
__extension__ using Uint128 = unsigned __int128;  // GCC and Clang on 64-bit targets
inline std::uint64_t below(std::uint64_t w, std::uint64_t range) {
  if (range == 0) return w;
  return static_cast<std::uint64_t>((static_cast<Uint128>(w) * range) >> 64);
}

}  // namespace kael::random
