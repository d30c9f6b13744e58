#pragma once
// Autocast: ops run in an op-specific dtype while it is enabled on the thread (PyTorch's
// torch.autocast). See docs/decisions/autocast.md.
//
// Note [Autocast]
// The state is per thread: per device type, whether autocast is on and its lower-precision
// dtype; whether the weight cast cache is on; how deep the autocast contexts are nested. While
// it is on for some device type, the Autocast dispatch key is on the thread's included keys.
// That key sits above Autograd; every op falls through it except those of the table in
// aten/src/autocast/autocast.cpp, whose one boxed kernel casts the op's floating tensor
// arguments by the op's policy and calls the op again with Autocast excluded:
//   - LowerPrecision: to the autocast dtype (matmuls, linear, convolutions, attention);
//   - Fp32: to float32 (losses, reductions and linear algebra that need the range);
//   - Promote: to the widest floating dtype among the arguments (cat, stack, index_copy).
// float64 tensors and tensors of another device are never cast. The casts are ordinary `to`
// calls, so autograd records them and gradients reach float32 parameters in float32.
// With the cache on, the lower-precision copy of a float32 leaf that requires grad is kept
// until the outermost autocast context exits, so each weight is converted once per forward.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kael/core/device.h"
#include "kael/core/tensor.h"
#include "kael/core/scalar_type.h"

namespace kael::autocast {

enum class Policy : std::uint8_t { LowerPrecision, Fp32, Promote };

bool is_enabled(DeviceType device);
void set_enabled(DeviceType device, bool enabled);
ScalarType get_dtype(DeviceType device);
void set_dtype(DeviceType device, ScalarType dtype);
bool is_cache_enabled();
void set_cache_enabled(bool enabled);
// The nesting depth of autocast contexts on this thread after the change.
std::int64_t increment_nesting();
std::int64_t decrement_nesting();
// Drops this thread's cached casts.
void clear_cache();
std::int64_t cache_size();

// t cast to `to` as an autocast kernel casts its arguments: a floating tensor of `device` that is
// not float64, through the weight cast cache when `to` is the device's autocast dtype; any
// other tensor as it is. For composites written in Python (kael/amp/autocast_mode.py).
Tensor cast(const Tensor& t, ScalarType to, DeviceType device);

// The policy of an op by its name without the overload (nullopt: the op runs untouched).
std::optional<Policy> policy_of(std::string_view name);
// The schema names of the registry's ops that have an autocast kernel.
std::vector<std::string> registered_ops();

}  // namespace kael::autocast
