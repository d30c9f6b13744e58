#pragma once
// Helpers shared by the GoogleTest files.

#include <gtest/gtest.h>

#include <string>

#include "kael/core/error.h"

namespace kael::testing {

// Runs f, which must throw kael::Error (or a subclass), and returns the message.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const kael::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a kael::Error";
  return {};
}

}  // namespace kael::testing
