#include "agent/transport/thread_priority.h"

#include <algorithm>
#include <cerrno>

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace parity::agent {

#if defined(__linux__)
namespace {
id_t ThisThreadId() { return static_cast<id_t>(::syscall(SYS_gettid)); }
}  // namespace

int ThisThreadNice() {
  errno = 0;
  const int nice = ::getpriority(PRIO_PROCESS, ThisThreadId());
  return errno == 0 ? nice : 0;
}

void LowerThisThreadOnce(int nice) {
  thread_local bool lowered = false;
  if (lowered || nice <= 0) return;
  lowered = true;
  ::setpriority(PRIO_PROCESS, ThisThreadId(), std::min(ThisThreadNice() + nice, 19));
}
#else
int ThisThreadNice() { return 0; }
void LowerThisThreadOnce(int) {}
#endif

}  // namespace parity::agent
