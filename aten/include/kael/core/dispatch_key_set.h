#pragma once
// A set of dispatch keys as a bitmask; the highest key in it decides the kernel.

#include <bit>
#include <cstdint>

#include "kael/enums.h"

namespace kael {

class DispatchKeySet {
 public:
  constexpr DispatchKeySet() = default;
  constexpr explicit DispatchKeySet(DispatchKey k) : bits_(bit(k)) {}
  static constexpr DispatchKeySet from_bits(std::uint32_t bits) {
    DispatchKeySet s;
    s.bits_ = bits;
    return s;
  }
  static constexpr DispatchKeySet all() { return from_bits((1u << kNumDispatchKeys) - 1); }

  constexpr bool has(DispatchKey k) const { return (bits_ & bit(k)) != 0; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr std::uint32_t bits() const { return bits_; }
  constexpr DispatchKeySet operator|(DispatchKeySet o) const { return from_bits(bits_ | o.bits_); }
  constexpr DispatchKeySet operator&(DispatchKeySet o) const { return from_bits(bits_ & o.bits_); }
  constexpr DispatchKeySet operator-(DispatchKeySet o) const { return from_bits(bits_ & ~o.bits_); }
  constexpr DispatchKeySet add(DispatchKey k) const { return from_bits(bits_ | bit(k)); }
  constexpr DispatchKeySet remove(DispatchKey k) const { return from_bits(bits_ & ~bit(k)); }
  constexpr bool operator==(const DispatchKeySet&) const = default;
  // The keys of this set of lower priority than k (what a kernel at k redispatches to).
  constexpr DispatchKeySet below(DispatchKey k) const { return from_bits(bits_ & (bit(k) - 1u)); }
  // The highest-priority key; the set must not be empty.
  constexpr DispatchKey highest() const {
    return static_cast<DispatchKey>(31 - std::countl_zero(bits_));
  }

 private:
  static constexpr std::uint32_t bit(DispatchKey k) { return 1u << static_cast<unsigned>(k); }
  std::uint32_t bits_ = 0;
};

}  // namespace kael
