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

#include "kael/core/device.h"

namespace kael {

// PyTorch's default seed of its CPU generator, so kael.initial_seed() starts from the same number.
inline constexpr std::uint64_t kDefaultSeed = 67280421310721ULL;

struct PhiloxStream {
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;
};

// Note [A generator per device]
// A Generator belongs to a device: the ops of that device draw from it (a generator given to an
// op on another device raises, as in PyTorch). Each device has its own default generator,
// default_generator(device), made on first use and seeded with kDefaultSeed, so CPU and device
// streams advance independently; kael.manual_seed seeds the CPU's (PyTorch's also seeds every
// CUDA device's: a CUDA backend adds that). The state is the same two integers on every device.
class Generator {
 public:
  // A new generator seeded with kDefaultSeed.
  Generator();
  explicit Generator(std::uint64_t seed);
  // A new generator of `device`, seeded with kDefaultSeed. Only state: it needs no backend of
  // the device until an op draws from it there.
  explicit Generator(Device device);

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
  // The device whose ops draw from it.
  Device device() const { return device_; }

 private:
  struct Impl {
    std::atomic<std::uint64_t> seed{kDefaultSeed};
    std::atomic<std::uint64_t> offset{0};
  };
  std::shared_ptr<Impl> impl_;
  Device device_ = kCPU;
};

// The process-wide generator of `device` that its random ops use when none is given
// (kael.manual_seed seeds the CPU's); the same object on every call for one device.
const Generator& default_generator(Device device = kCPU);

// Raises a RuntimeError naming `op` unless g draws for `device` (PyTorch's message).
void check_generator_device(const char* op, const Generator& g, Device device);

// The stream of one call of `op` on `device` from `g`, or from the device's default generator
// when `g` is empty.
inline PhiloxStream next_stream(const std::optional<Generator>& g, Device device = kCPU, const char* op = "random") {
  if (!g) return default_generator(device).next_stream();
  if (g->device() != device) [[unlikely]] check_generator_device(op, *g, device);
  return g->next_stream();
}

}  // namespace kael
