#include "kael/core/error.h"

namespace kael::detail {

std::string format_check(const char* file, int line, const char* cond, const std::string& why) {
  std::string msg = "kael error at ";
  msg += file;
  msg += ':';
  msg += std::to_string(line);
  msg += ": check '";
  msg += cond;
  msg += "' failed: ";
  msg += why;
  return msg;
}

}  // namespace kael::detail
