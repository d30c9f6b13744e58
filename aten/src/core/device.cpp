#include "kael/core/device.h"

#include <charconv>

#include "kael/core/error.h"

namespace kael {

std::string Device::str() const {
  if (is_cpu()) return "cpu";
  return index == 0 ? std::string("cuda") : "cuda:" + std::to_string(index);
}

Device parse_device(std::string_view name) {
  if (name == "cpu") return kCPU;
  if (name == "cuda") return Device{DeviceType::CUDA, 0};
  if (name.starts_with("cuda:")) {
    std::string_view digits = name.substr(5);
    int index = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty() && index >= 0 &&
        index < 128)
      return Device{DeviceType::CUDA, static_cast<std::int8_t>(index)};
  }
  KAEL_CHECK_VALUE(false, "device: expected a device name such as 'cpu', 'cuda' or 'cuda:0', got '"
                              << std::string(name) << "'");
  return kCPU;
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
