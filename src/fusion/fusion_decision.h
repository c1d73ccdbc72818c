// FusionDecision: the answer to "may these fuse?". Empty means yes; otherwise it holds
// the human-readable reason, which `tilefuse explain` prints for every rejected merge.
#pragma once

#include <string>
#include <utility>

namespace tilefuse {

class FusionDecision {
 public:
  static FusionDecision Allow() { return FusionDecision(); }
  static FusionDecision Forbid(std::string reason) { return FusionDecision(std::move(reason)); }

  bool CanFuse() const { return reason_.empty(); }
  explicit operator bool() const { return CanFuse(); }
  const std::string& Explain() const { return reason_; }

  // The first failing decision wins (short-circuit friendly when written as a chain).
  FusionDecision And(const FusionDecision& other) const { return CanFuse() ? other : *this; }

 private:
  FusionDecision() = default;
  explicit FusionDecision(std::string reason) : reason_(std::move(reason)) {}
  std::string reason_;
};

}  // namespace tilefuse
