#include "passes/derived_constants.h"

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace tilefuse {

namespace {

struct Derived {
  std::weak_ptr<const void> source;    // expired: the source's bytes were freed, the entry is stale
  std::weak_ptr<const Tensor> result;  // expired: no graph holds it any more
};

}  // namespace

std::shared_ptr<const Tensor> DerivedConstant(const Tensor& source, const std::string& how, const std::function<Tensor()>& make) {
  static std::mutex mutex;
  // Never destroyed (as the allocators' tables): nothing to release at exit.
  static auto& derived = *new std::map<std::tuple<const std::byte*, size_t, DType, Shape, std::string>, Derived>();
  std::lock_guard<std::mutex> lock(mutex);  // held over make(): two compiles of one weight derive it once
  for (auto it = derived.begin(); it != derived.end();) {
    const bool stale = it->second.source.expired() || it->second.result.expired();
    it = stale ? derived.erase(it) : std::next(it);
  }
  // While the source's owner lives (the entry holds it weakly), no other tensor has its address.
  Derived& entry = derived[{source.data(), source.num_bytes(), source.dtype(), source.shape(), how}];
  std::shared_ptr<const Tensor> result = entry.result.lock();
  if (!result || entry.source.expired()) {
    result = std::make_shared<const Tensor>(make());
    entry = {source.owner(), result};
  }
  return result;
}

}  // namespace tilefuse
