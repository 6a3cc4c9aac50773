#include "server/service/blob_store.h"

namespace parity::server {

uint64_t BlobStore::bytes() const {
  uint64_t n = 0;
  for (const auto& [id, b] : blobs_) n += b.size();
  return n;
}

}  // namespace parity::server
