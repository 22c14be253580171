// Stop strings across token boundaries: generated text goes in piece by piece; what comes out is
// the text that can no longer be the start of a stop string, and a match ends the stream with the
// text before it (the stop string itself is not returned, as the OpenAI API does).
//
//   StopStrings s({"\nUser:"});
//   s.Push("Hi\nUs")  -> "Hi"      ("\nUs" may start "\nUser:": held back)
//   s.Push("er: x")   -> ""        (matched: stopped() is true, the rest is dropped)
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace moesplit::serving {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops);

  // The text safe to emit after appending `piece`; after a match, the text before it and
  // stopped() becomes true (later calls return "").
  std::string Push(std::string_view piece);
  // Whatever is still held back (the stream ended without a match).
  std::string Flush();
  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }  // the stop string that matched

 private:
  std::vector<std::string> stops_;  // non-empty strings
  std::string held_;                // text that may still start a stop string
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace moesplit::serving
