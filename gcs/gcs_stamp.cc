#include "gcs/gcs_stamp.h"

#include "core/ids.h"

namespace troupe::gcs {
namespace {
constexpr const char* kTable = "cluster";
constexpr const char* kKey = "stamp";
}  // namespace

std::string new_gcs_stamp() { return JobId::random().hex(); }

Status write_gcs_stamp(Store& store, const std::string& stamp) {
  return store.put(kTable, kKey, stamp).with_context("writing the head's stamp into the GCS");
}

Expected<bool> gcs_stamp_present(Store& store, const std::string& stamp) {
  auto got = store.get(kTable, kKey);
  if (!got.ok()) return got.status().with_context("reading the head's stamp in the GCS");
  return got->has_value() && **got == stamp;
}

}  // namespace troupe::gcs
