// FileCheck-style matching for tests that print a plan or a kernel and compare it with
// expected text, the way LLVM's and XLA's tests do. `checks` holds one directive per line:
//
//   CHECK: text        the next line at or after the current position containing `text`
//   CHECK-NEXT: text   the line right after the previous match contains `text`
//   CHECK-SAME: text   the previous match's line contains `text` after the previous match
//   CHECK-NOT: text    no line between the previous match and the next one contains `text`
//
// Other lines (blank, comments) are ignored. The result says which directive failed and
// where the search stood. Header-only: tests include it; the library does not link GoogleTest.
#pragma once

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace tilefuse {

namespace file_check_detail {

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

struct Directive {
  std::string kind, pattern;
  int line = 0;  // in `checks`, for messages
};

inline std::vector<Directive> Parse(const std::string& checks) {
  std::vector<Directive> out;
  int number = 0;
  for (const std::string& line : Lines(checks)) {
    ++number;
    for (const char* kind : {"CHECK-NEXT:", "CHECK-SAME:", "CHECK-NOT:", "CHECK:"}) {
      size_t at = line.find(kind);
      if (at == std::string::npos) continue;
      std::string pattern = line.substr(at + std::string(kind).size());
      size_t first = pattern.find_first_not_of(' ');
      out.push_back({std::string(kind, std::string(kind).size() - 1), first == std::string::npos ? "" : pattern.substr(first), number});
      break;
    }
  }
  return out;
}

}  // namespace file_check_detail

inline testing::AssertionResult MatchesChecks(const std::string& text, const std::string& checks) {
  using namespace file_check_detail;
  const std::vector<std::string> lines = Lines(text);
  size_t line = 0, column = 0;  // just past the previous match
  bool matched_any = false;
  std::vector<const Directive*> pending_not;
  auto fail = [&](const Directive& d, const std::string& why) {
    return testing::AssertionFailure() << "check line " << d.line << " (" << d.kind << ": " << d.pattern << ") " << why
                                       << " (searching from text line " << line + 1 << ")\n--- text ---\n" << text;
  };
  // The CHECK-NOTs waiting for the next match hold over lines [from, to).
  auto check_nots = [&](size_t from, size_t to, size_t from_column) -> const Directive* {
    for (const Directive* d : pending_not)
      for (size_t l = from; l < to && l < lines.size(); ++l)
        if (lines[l].find(d->pattern, l == from ? from_column : 0) != std::string::npos) return d;
    return nullptr;
  };
  const std::vector<Directive> directives = Parse(checks);  // pending_not points into it
  for (const Directive& d : directives) {
    if (d.kind == "CHECK-NOT") {
      pending_not.push_back(&d);
      continue;
    }
    size_t found_line = lines.size(), found_column = 0;
    if (d.kind == "CHECK") {
      for (size_t l = line; l < lines.size(); ++l) {
        size_t at = lines[l].find(d.pattern, l == line ? column : 0);
        if (at != std::string::npos) {
          found_line = l;
          found_column = at + d.pattern.size();
          break;
        }
      }
    } else {
      if (!matched_any) return fail(d, "has no previous match");
      size_t target = d.kind == "CHECK-NEXT" ? line + 1 : line;
      size_t from = d.kind == "CHECK-NEXT" ? 0 : column;
      if (target < lines.size()) {
        size_t at = lines[target].find(d.pattern, from);
        if (at != std::string::npos) {
          found_line = target;
          found_column = at + d.pattern.size();
        }
      }
    }
    if (found_line == lines.size()) return fail(d, "not found");
    if (const Directive* bad = check_nots(line, found_line + 1, column)) return fail(*bad, "matched before the next check");
    pending_not.clear();
    line = found_line;
    column = found_column;
    matched_any = true;
  }
  if (const Directive* bad = check_nots(line, lines.size(), column)) return fail(*bad, "matched after the last check");
  return testing::AssertionSuccess();
}

}  // namespace tilefuse
