#include "kael/runtime/generator.h"

#include <random>

namespace kael {

Generator::Generator() : impl_(std::make_shared<Impl>()) {}

Generator::Generator(std::uint64_t seed) : impl_(std::make_shared<Impl>()) { manual_seed(seed); }

void Generator::manual_seed(std::uint64_t seed) const {
  impl_->seed.store(seed, std::memory_order_relaxed);
  impl_->offset.store(0, std::memory_order_relaxed);
}

std::uint64_t Generator::seed() const {
  std::random_device device;
  const std::uint64_t s = (static_cast<std::uint64_t>(device()) << 32) | device();
  manual_seed(s);
  return s;
}

std::uint64_t Generator::initial_seed() const { return impl_->seed.load(std::memory_order_relaxed); }

PhiloxStream Generator::get_state() const {
  return {impl_->seed.load(std::memory_order_relaxed), impl_->offset.load(std::memory_order_relaxed)};
}

void Generator::set_state(PhiloxStream state) const {
  impl_->seed.store(state.seed, std::memory_order_relaxed);
  impl_->offset.store(state.offset, std::memory_order_relaxed);
}

PhiloxStream Generator::next_stream() const {
  const std::uint64_t seed = impl_->seed.load(std::memory_order_relaxed);
  return {seed, impl_->offset.fetch_add(1, std::memory_order_relaxed)};
}

const Generator& default_generator() {
  static const Generator g;
  return g;
}

}  // namespace kael
