#include "agent/torch/call_context.h"

#include <utility>

namespace parity::agent {
namespace {

struct SpareContext {
  void* memory = nullptr;
  ~SpareContext() { ::operator delete(memory); }
};
thread_local SpareContext t_spare_context;
thread_local std::vector<WatchedInput> t_spare_read_only;

}  // namespace

void* CallContext::operator new(std::size_t n) {
  if (n == sizeof(CallContext) && t_spare_context.memory != nullptr) {
    return std::exchange(t_spare_context.memory, nullptr);
  }
  return ::operator new(n);
}

// Deleted on another thread than the one that made it (not the hook's case), the memory becomes
// that thread's spare, or is freed.
void CallContext::operator delete(void* p) {
  if (t_spare_context.memory == nullptr) {
    t_spare_context.memory = p;
  } else {
    ::operator delete(p);
  }
}

void CallContext::SwapReadOnlyList() {
  read_only.clear();
  read_only.swap(t_spare_read_only);
}

}  // namespace parity::agent
