#include "passes/derived_constants.h"

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace tilefuse {

namespace {

struct Derived {
  std::weak_ptr<const void> source;  // expired: the source's bytes were freed, the entry is stale
  Tensor result;
};

}  // namespace

Tensor DerivedConstant(const Tensor& source, const std::string& how, const std::function<Tensor()>& make) {
  static std::mutex mutex;
  // Never destroyed: its tensors would go back to the host buffer pool during static destruction.
  static auto& derived = *new std::map<std::tuple<const std::byte*, size_t, DType, Shape, std::string>, Derived>();
  std::lock_guard<std::mutex> lock(mutex);  // held over make(): two compiles of one weight derive it once
  for (auto it = derived.begin(); it != derived.end();) it = it->second.source.expired() ? derived.erase(it) : std::next(it);
  // While the source's owner lives (the entry holds it weakly), no other tensor has its address.
  Derived& entry = derived[{source.data(), source.num_bytes(), source.dtype(), source.shape(), how}];
  if (entry.source.expired()) entry = {source.owner(), make()};
  return entry.result;
}

}  // namespace tilefuse
