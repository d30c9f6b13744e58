#pragma once
// kael::Generator: the state of one random stream.
//
// Note [Random streams]
// Every random op draws from Philox4x32-10 (kael/runtime/philox.h), a counter-based generator:
// a block of four 32-bit words is a pure function of a 64-bit key and a 128-bit counter. A
// Generator holds the key (the seed) and an offset; each op call takes the generator's current
// offset as its stream and advances it by one, and element i of that call's output is computed
// from the block (seed, offset, i / k) alone (k: how many elements one block feeds). So the
// values never depend on the thread count or on how the work is split, and a device backend
// can generate the same values wherever it runs them. The state is two integers, 16 bytes in
// get_state(): seed then offset, little-endian.
//
// The state is two atomics rather than a mutex-guarded pair, so a forked child never inherits
// a held lock; a concurrent set_state and draw on one generator is the user's race, as in
// PyTorch.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

namespace kael {

// PyTorch's default seed of its CPU generator, so kael.initial_seed() starts from the same number.
inline constexpr std::uint64_t kDefaultSeed = 67280421310721ULL;

struct PhiloxStream {
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;
};

class Generator {
 public:
  // A new generator seeded with kDefaultSeed.
  Generator();
  explicit Generator(std::uint64_t seed);

  // Seeds the generator and rewinds its stream.
  void manual_seed(std::uint64_t seed) const;
  // Seeds it from std::random_device and returns the seed.
  std::uint64_t seed() const;
  std::uint64_t initial_seed() const;

  PhiloxStream get_state() const;
  void set_state(PhiloxStream state) const;

  // The stream of one op call: the current (seed, offset); advances the offset by one.
  PhiloxStream next_stream() const;

  bool is_same(const Generator& o) const { return impl_ == o.impl_; }

 private:
  struct Impl {
    std::atomic<std::uint64_t> seed{kDefaultSeed};
    std::atomic<std::uint64_t> offset{0};
  };
  std::shared_ptr<Impl> impl_;
};

// The process-wide generator that random ops use when none is given (kael.manual_seed seeds it).
const Generator& default_generator();

// The stream of one op call from `g`, or from the default generator when `g` is empty.
inline PhiloxStream next_stream(const std::optional<Generator>& g) {
  return (g ? *g : default_generator()).next_stream();
}

}  // namespace kael
