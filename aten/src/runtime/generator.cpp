#include "kael/runtime/generator.h"

#include <atomic>
#include <limits>
#include <random>

#include "kael/core/error.h"

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

Generator::Generator(Device device) : impl_(std::make_shared<Impl>()), device_(device) {}

namespace {
// Default generators of devices other than the CPU, made on first use (a CUDA build has up to
// 128 devices); never freed, so references to them stay valid for the process.
constexpr int kMaxDevices = std::numeric_limits<std::int8_t>::max() + 1;
std::atomic<const Generator*> device_generators[kMaxDevices];
}  // namespace

const Generator& default_generator(Device device) {
  static const Generator cpu;
  if (device.is_cpu()) [[likely]] return cpu;
  KAEL_CHECK(device.index >= 0, "default_generator: device index " << int{device.index} << " is negative");
  std::atomic<const Generator*>& slot = device_generators[device.index];
  if (const Generator* g = slot.load(std::memory_order_acquire)) return *g;
  const Generator* made = new Generator(device);
  const Generator* expected = nullptr;
  if (!slot.compare_exchange_strong(expected, made, std::memory_order_acq_rel)) {
    delete made;  // another thread made it first
    return *expected;
  }
  return *made;
}

void check_generator_device(const char* op, const Generator& g, Device device) {
  const auto type = [](Device d) { return d.is_cpu() ? "cpu" : "cuda"; };
  KAEL_CHECK(g.device() == device, op << ": Expected a '" << type(device) << "' device type for generator but found '"
                                      << type(g.device()) << "'");
}

}  // namespace kael
