#include "kael/core/warning.h"

#include <atomic>
#include <cstdio>

namespace kael {

namespace {

void print_warning(WarningKind kind, const std::string& message) {
  std::fprintf(stderr, "kael %s: %s\n", kind == WarningKind::Deprecation ? "deprecation warning" : "warning",
               message.c_str());
}

std::atomic<WarningHandler> handler{nullptr};

}  // namespace

void warn(WarningKind kind, const std::string& message) {
  WarningHandler h = handler.load(std::memory_order_acquire);
  (h != nullptr ? h : print_warning)(kind, message);
}

WarningHandler set_warning_handler(WarningHandler h) { return handler.exchange(h, std::memory_order_acq_rel); }

}  // namespace kael
