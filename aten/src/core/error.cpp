#include "kael/core/error.h"

namespace kael::detail {

std::string check_location(const char* file, int line, const char* cond) {
  std::string where = "check '";
  where += cond;
  where += "' failed at ";
  where += file;
  where += ':';
  where += std::to_string(line);
  return where;
}

}  // namespace kael::detail
