// One result file opened for appending: every row goes out in a single write(2) (no stdio
// buffer that splits a long row in two), so a server killed between rows leaves whole lines.
// The result writer's (result_writer.h) and the replica writer's (replica_writer.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace parity::server {

// parity_server_result_rows_lost_total's reason for a failed Append (its codes, below):
// "disk_full", "not_writable" or "io_error".
const char* RowsLostReason(const absl::Status& written);

class AppendFile {
 public:
  AppendFile() = default;
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  ~AppendFile();

  // Opens (creating, 0640) `path`. An existing file whose last line has no terminator was cut by
  // a crash mid-write: that partial line is removed, so the next row starts on a line of its own.
  // Returns true if the file already held whole lines (a resumed file keeps its header).
  absl::StatusOr<bool> Open(const std::string& path);

  // Appends one whole row, or nothing: a write that fails part way (a full disk, a file size
  // limit) is truncated back, so no partial row stays for the next one to be glued onto. The
  // error's code says why: RESOURCE_EXHAUSTED no space (ENOSPC, EDQUOT, EFBIG),
  // PERMISSION_DENIED not writable (EROFS, EACCES, EPERM), DATA_LOSS anything else.
  absl::Status Append(const std::string& bytes, bool row = true);

  // Whether the file's path still names the file this appends to: false once it was deleted,
  // moved away or replaced (the rows written since went to a file nobody can see).
  bool StillThere() const;
  const std::string& path() const { return path_; }
  // Rows appended since the file was opened (not its header).
  uint64_t rows() const { return rows_; }
  void Close();

 private:
  // The offset just past the file's last '\n' (0 if it has none).
  absl::StatusOr<off_t> WholeLinesEnd(off_t size);
  absl::Status WriteError(int failed) const;
  absl::Status Error(const char* what) const;

  std::string path_;
  int fd_ = -1;
  dev_t device_ = 0;
  ino_t inode_ = 0;
  uint64_t rows_ = 0;
};

}  // namespace parity::server
