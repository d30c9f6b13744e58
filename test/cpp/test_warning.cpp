// kael::warn and the warning handler (the Python extension installs a buffering one).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "kael/core/warning.h"

namespace {

std::vector<std::pair<kael::WarningKind, std::string>>& seen() {
  static std::vector<std::pair<kael::WarningKind, std::string>> v;
  return v;
}

void record(kael::WarningKind kind, const std::string& message) { seen().emplace_back(kind, message); }

TEST(Warning, HandlerReceivesKindAndMessage) {
  seen().clear();
  const kael::WarningHandler previous = kael::set_warning_handler(record);
  kael::warn(kael::WarningKind::User, "op: first");
  kael::warn(kael::WarningKind::Deprecation, "op: second");
  EXPECT_EQ(kael::set_warning_handler(previous), &record);
  ASSERT_EQ(seen().size(), 2u);
  EXPECT_EQ(seen()[0].first, kael::WarningKind::User);
  EXPECT_EQ(seen()[0].second, "op: first");
  EXPECT_EQ(seen()[1].first, kael::WarningKind::Deprecation);
  kael::warn(kael::WarningKind::User, "op: after restore");  // goes to the previous handler
  EXPECT_EQ(seen().size(), 2u);
}

TEST(Warning, DefaultHandlerPrintsToStderr) {
  const kael::WarningHandler previous = kael::set_warning_handler(nullptr);
  ::testing::internal::CaptureStderr();
  kael::warn(kael::WarningKind::User, "op: printed");
  const std::string err = ::testing::internal::GetCapturedStderr();
  kael::set_warning_handler(previous);
  EXPECT_NE(err.find("kael warning: op: printed"), std::string::npos) << err;
}

}  // namespace
