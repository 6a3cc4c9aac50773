// Client-supplied text in logs: control characters escaped, lengths capped, and no message can
// start a line that looks like a log record of its own.
#include "common/base/text.h"

#include "common/base/log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace parity::common {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(TextTest, EscapesEveryControlCharacterAndKeepsUtf8) {
  EXPECT_EQ(EscapeControl("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(EscapeControl(std::string("x\0y\x1b[31m\x7f", 9)), "x\\x00y\\x1b[31m\\x7f");
  EXPECT_EQ(EscapeControl("hôte-数据"), "hôte-数据");
}

TEST(TextTest, PrintableCutsLongTextWithoutSplittingACharacter) {
  EXPECT_EQ(Printable("short", 10), "short");
  EXPECT_EQ(Printable(std::string(300, 'r'), 256), std::string(256, 'r') + "...(300 bytes)");
  // "é" is two bytes: a cut at 3 would split the second one, so it keeps "aé".
  EXPECT_EQ(Printable("aéé", 4), "aé...(5 bytes)");
}

TEST(TextTest, ALogMessageCannotForgeARecord) {
  ::testing::internal::CaptureStderr();
  LogWarning("agent connected: host evil\n[parity 2026-01-01 00:00:00 ERROR] forged\x1b[0m");
  const std::string out = ::testing::internal::GetCapturedStderr();
  // The message's second line is an indented continuation, not a record.
  EXPECT_THAT(out, HasSubstr("host evil\n    [parity 2026-01-01 00:00:00 ERROR] forged\\x1b[0m\n"));
  EXPECT_THAT(out, Not(HasSubstr("\n[parity 2026-01-01")));
}

}  // namespace
}  // namespace parity::common
