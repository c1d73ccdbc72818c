#include "codegen/cuda/cuda_config_json.h"

namespace tilefuse {

nlohmann::json CudaConfigToJson(const CudaKernelConfig& c) {
  nlohmann::json j = {{"threads", c.threads}, {"vector", c.vector}, {"threads_per_row", c.threads_per_row}, {"cache_row", c.cache_row}};
  if (c.tile != -1) j["tile"] = c.tile;
  if (c.splits != 0) j["splits"] = c.splits;  // the column template's only
  if (c.cluster > 1) j["cluster"] = c.cluster;  // the row template's, when a row spans a cluster
  if (c.broadcast_with_row) j["broadcast_with_row"] = true;
  return j;
}

CudaKernelConfig CudaConfigFromJson(const nlohmann::json& j) {
  CudaKernelConfig c;
  c.threads = j.value("threads", 0);
  c.vector = j.value("vector", 0);
  c.threads_per_row = j.value("threads_per_row", 0);
  c.cache_row = j.value("cache_row", -1);
  c.tile = j.value("tile", -1);
  c.splits = j.value("splits", 0);
  c.cluster = j.value("cluster", 1);  // records written before clusters: none
  c.broadcast_with_row = j.value("broadcast_with_row", false);
  return c;
}

}  // namespace tilefuse
