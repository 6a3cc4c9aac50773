#include "common/transport/grpc_tuning.h"

#include <grpc/grpc.h>
#include <malloc.h>

namespace parity::common {

std::vector<std::pair<std::string, int>> StreamChannelArgs() {
  return {
      // Keepalive: pings every 60 s, tolerated every 10 s without data (server side).
      {GRPC_ARG_KEEPALIVE_TIME_MS, 60000},
      {GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000},
      {GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1},
      {GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000},
      // A stream window of several calls, and large frames: fewer window updates and wakeups.
      {GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 8 << 20},
      {GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 1 << 20},
      {GRPC_ARG_HTTP2_WRITE_BUFFER_SIZE, 4 << 20},
      {GRPC_ARG_TSI_MAX_FRAME_SIZE, 1 << 20},
      {GRPC_ARG_TCP_READ_CHUNK_SIZE, 1 << 20},
      {GRPC_ARG_TCP_MIN_READ_CHUNK_SIZE, 256 << 10},
      {GRPC_ARG_TCP_MAX_READ_CHUNK_SIZE, 4 << 20},
  };
}

void KeepLargeAllocations(std::size_t bytes) {
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(std::min<std::size_t>(bytes, 1u << 30)));
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(std::min<std::size_t>(bytes, 1u << 30)));
  mallopt(M_ARENA_MAX, 1);
}

}  // namespace parity::common
