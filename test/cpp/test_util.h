#pragma once
// Helpers shared by the GoogleTest files.

#include <gtest/gtest.h>

#include <string>
#include <typeinfo>

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

// Runs f, which must throw exactly E (not a subclass of it): kael::Error is Python's RuntimeError,
// which torch raises where kael's subclasses would be ValueError, IndexError or TypeError.
template <typename E, typename F>
void expect_exactly(F&& f) {
  try {
    f();
  } catch (const kael::Error& e) {
    EXPECT_TRUE(typeid(e) == typeid(E)) << "threw " << typeid(e).name() << ": " << e.what();
    return;
  }
  ADD_FAILURE() << "expected a " << typeid(E).name();
}

}  // namespace kael::testing
