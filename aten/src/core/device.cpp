#include "kael/core/device.h"

#include <charconv>
#include <limits>
#include <optional>

#include "kael/core/error.h"

namespace kael {

std::string Device::str() const {
  if (is_cpu()) return "cpu";
  return index == 0 ? std::string("cuda") : "cuda:" + std::to_string(index);
}

namespace {

// The string as Python's repr shows it inside quotes: control bytes (such as NUL) escaped.
std::string quoted(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else if (c == '\\' || c == '\'') {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
  return out + "'";
}

// A run of ASCII digits without leading zeros (checked by the caller), if it fits.
std::optional<long long> parse_index(std::string_view digits) {
  long long index = -1;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return index;
}

}  // namespace

// PyTorch's grammar: a device type, optionally ':' and an index. The index of a CPU device is
// accepted and dropped (PyTorch's tensors on 'cpu:0' report device 'cpu').
Device parse_device(std::string_view name) {
  KAEL_CHECK(!name.empty(), "device: Device string must not be empty");
  const std::size_t colon = name.find(':');
  const std::string_view type = name.substr(0, colon);
  KAEL_CHECK(type == "cpu" || type == "cuda",
             "device: Expected one of cpu, cuda device type at start of device string: " << quoted(name));
  const DeviceType device_type = type == "cpu" ? DeviceType::CPU : DeviceType::CUDA;
  if (colon == std::string_view::npos) return Device{device_type, 0};
  const std::string_view digits = name.substr(colon + 1);
  bool all_digits = !digits.empty();
  for (const char c : digits) all_digits = all_digits && c >= '0' && c <= '9';
  KAEL_CHECK(all_digits && !(digits.size() > 1 && digits[0] == '0'), "device: Invalid device string: " << quoted(name));
  const std::optional<long long> index = parse_index(digits);
  KAEL_CHECK(index && *index <= std::numeric_limits<std::int32_t>::max(),
             "device: Could not parse device index " << quoted(digits) << " in device string " << quoted(name));
  if (device_type == DeviceType::CPU) return kCPU;
  KAEL_CHECK(*index <= std::numeric_limits<std::int8_t>::max(),
             "device: CUDA device index " << *index << " in device string " << quoted(name)
                                          << " is out of range (kael supports indices 0 to "
                                          << int{std::numeric_limits<std::int8_t>::max()} << ")");
  return Device{DeviceType::CUDA, static_cast<std::int8_t>(*index)};
}

bool cuda_backend_built() {
#ifdef KAEL_WITH_CUDA
  return true;
#else
  return false;
#endif
}

void check_device_available(const char* op, Device device) {
  KAEL_CHECK(!device.is_cuda() || cuda_backend_built(),
             op << ": device '" << device.str() << "' requested, but this build of kael has no CUDA backend");
}

}  // namespace kael
