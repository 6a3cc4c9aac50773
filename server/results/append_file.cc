#include "server/results/append_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"

namespace parity::server {

const char* RowsLostReason(const absl::Status& written) {
  switch (written.code()) {
    case absl::StatusCode::kResourceExhausted:
      return "disk_full";
    case absl::StatusCode::kPermissionDenied:
      return "not_writable";
    default:
      return "io_error";
  }
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<bool> AppendFile::Open(const std::string& path) {
  path_ = path;
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd_ < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": cannot open for append (", std::strerror(errno), ")"));
  }
  ::fchmod(fd_, 0640);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return Error("stat");
  device_ = st.st_dev;
  inode_ = st.st_ino;
  rows_ = 0;
  if (st.st_size == 0) return false;
  PARITY_ASSIGN_OR_RETURN(const off_t keep, WholeLinesEnd(st.st_size));
  if (keep == st.st_size) return true;
  if (::ftruncate(fd_, keep) != 0) return Error("truncate");
  common::LogWarning(absl::StrCat(path, ": removed ", st.st_size - keep,
                                  " bytes of a line cut by an earlier crash"));
  return keep > 0;
}

absl::Status AppendFile::Append(const std::string& bytes, bool row) {
  const off_t before = ::lseek(fd_, 0, SEEK_END);
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int failed = n == 0 ? EIO : errno;
      if (before >= 0 && ::ftruncate(fd_, before) != 0) {
        return absl::DataLossError(absl::StrCat(path_, ": write failed (", std::strerror(failed),
                                                ") and its partial row could not be removed (",
                                                std::strerror(errno), ")"));
      }
      return WriteError(failed);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (row) ++rows_;
  return absl::OkStatus();
}

bool AppendFile::StillThere() const {
  struct stat st {};
  return ::stat(path_.c_str(), &st) == 0 && st.st_dev == device_ && st.st_ino == inode_;
}

void AppendFile::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

absl::StatusOr<off_t> AppendFile::WholeLinesEnd(off_t size) {
  const int rfd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (rfd < 0) return Error("read");
  char buf[4096];
  off_t end = size;
  off_t found = 0;
  while (end > 0) {
    const off_t start = end > static_cast<off_t>(sizeof buf) ? end - sizeof buf : 0;
    const ssize_t n = ::pread(rfd, buf, static_cast<size_t>(end - start), start);
    if (n <= 0) break;
    const void* nl = nullptr;
    for (ssize_t i = n - 1; i >= 0; --i) {
      if (buf[i] == '\n') {
        nl = buf + i;
        break;
      }
    }
    if (nl != nullptr) {
      found = start + (static_cast<const char*>(nl) - buf) + 1;
      break;
    }
    end = start;
  }
  ::close(rfd);
  return found;
}

absl::Status AppendFile::WriteError(int failed) const {
  const std::string what =
      absl::StrCat(path_, ": write failed (", std::strerror(failed), "); the row was not kept");
  switch (failed) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return absl::ResourceExhaustedError(what);
    case EROFS:
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(what);
    default:
      return absl::DataLossError(what);
  }
}

absl::Status AppendFile::Error(const char* what) const {
  return absl::DataLossError(
      absl::StrCat(path_, ": ", what, " failed (", std::strerror(errno), ")"));
}

}  // namespace parity::server
