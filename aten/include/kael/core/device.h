#pragma once
// Devices: "cpu", "cuda", "cuda:N".

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "kael/enums.h"

namespace kael {

enum class DeviceType : std::uint8_t { CPU, CUDA };
inline constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::CPU;
  std::int8_t index = 0;

  bool operator==(const Device&) const = default;
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  std::string str() const;
  // The backend dispatch key of tensors on this device.
  DispatchKey backend_key() const { return is_cuda() ? DispatchKey::CUDA : DispatchKey::CPU; }
};

inline constexpr Device kCPU{};

// Parses a device string strictly, as PyTorch does: "cpu", "cpu:N" (the index is dropped),
// "cuda", "cuda:N"; anything else (case, spaces, NUL bytes, signs, leading zeros) raises
// RuntimeError "device: ..." showing the string.
Device parse_device(std::string_view name);

// Whether this build has a CUDA backend.
bool cuda_backend_built();
// Raises a RuntimeError naming `op` when `device` is CUDA and no CUDA backend is built.
void check_device_available(const char* op, Device device);

inline std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace kael
