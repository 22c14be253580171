#include "core/serving/stop_strings.h"

#include <gtest/gtest.h>

namespace moesplit::serving {
namespace {

TEST(StopStringsTest, HoldsBackPossibleStartsAndCutsAtTheMatch) {
  StopStrings s({"\nUser:", "END"});
  EXPECT_EQ(s.Push("Hello\nUs"), "Hello");
  EXPECT_FALSE(s.stopped());
  EXPECT_EQ(s.Push("ually"), "\nUsually");  // not a match after all
  EXPECT_EQ(s.Push(" the E"), " the ");
  EXPECT_EQ(s.Push("NDING"), "");  // "END" matched inside "ENDING"
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.matched(), "END");
  EXPECT_EQ(s.Push("more"), "");
  EXPECT_EQ(s.Flush(), "");
}

TEST(StopStringsTest, EveryPieceSplitGivesTheSameText) {
  const std::string text = "abc<stop>def";
  for (size_t cut1 = 0; cut1 <= text.size(); ++cut1) {
    for (size_t cut2 = cut1; cut2 <= text.size(); ++cut2) {
      StopStrings s({"<stop>", "zz"});
      std::string out = s.Push(text.substr(0, cut1));
      out += s.Push(text.substr(cut1, cut2 - cut1));
      out += s.Push(text.substr(cut2));
      out += s.Flush();
      EXPECT_EQ(out, "abc") << cut1 << " " << cut2;
      EXPECT_TRUE(s.stopped());
    }
  }
}

TEST(StopStringsTest, NoStopsPassEverythingAndFlushReturnsTheRest) {
  StopStrings none({});
  EXPECT_EQ(none.Push("x<"), "x<");
  StopStrings s({"<end>"});
  EXPECT_EQ(s.Push("a<en"), "a");
  EXPECT_EQ(s.Flush(), "<en");
}

}  // namespace
}  // namespace moesplit::serving
