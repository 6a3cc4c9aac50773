// See deferred_start.h. Python is reached through the interpreter's own C API, looked up in the
// running process (dlsym): the agent links no libpython, and in a process without Python the
// lookups fail and the rank stays unknown.
#include "agent/torch/deferred_start.h"

#include <ATen/record_function.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

namespace parity::agent {
namespace {

// The CPython functions the probe calls; PyObject is opaque here.
struct Python {
  using Obj = void*;
  int (*is_initialized)() = nullptr;
  int (*is_finalizing)() = nullptr;
  int (*gil_ensure)() = nullptr;
  void (*gil_release)(int) = nullptr;
  Obj (*unicode)(const char*) = nullptr;
  Obj (*get_module)(Obj) = nullptr;
  Obj (*get_attr)(Obj, const char*) = nullptr;
  Obj (*call)(Obj, Obj) = nullptr;
  int (*is_true)(Obj) = nullptr;
  long (*as_long)(Obj) = nullptr;  // NOLINT(google-runtime-int): CPython's type
  void (*dec_ref)(Obj) = nullptr;
  void (*err_fetch)(Obj*, Obj*, Obj*) = nullptr;
  void (*err_restore)(Obj, Obj, Obj) = nullptr;
  bool ok = false;
};

template <typename F>
void Find(F* f, const char* name) {
  *f = reinterpret_cast<F>(::dlsym(RTLD_DEFAULT, name));
}

const Python& Api() {
  static const Python api = [] {
    Python p;
    Find(&p.is_initialized, "Py_IsInitialized");
    Find(&p.is_finalizing, "Py_IsFinalizing");  // 3.13
    if (p.is_finalizing == nullptr) Find(&p.is_finalizing, "_Py_IsFinalizing");
    Find(&p.gil_ensure, "PyGILState_Ensure");
    Find(&p.gil_release, "PyGILState_Release");
    Find(&p.unicode, "PyUnicode_FromString");
    Find(&p.get_module, "PyImport_GetModule");  // 3.7
    Find(&p.get_attr, "PyObject_GetAttrString");
    Find(&p.call, "PyObject_CallObject");
    Find(&p.is_true, "PyObject_IsTrue");
    Find(&p.as_long, "PyLong_AsLong");
    Find(&p.dec_ref, "Py_DecRef");
    Find(&p.err_fetch, "PyErr_Fetch");
    Find(&p.err_restore, "PyErr_Restore");
    p.ok = p.is_initialized && p.is_finalizing && p.gil_ensure && p.gil_release && p.unicode &&
           p.get_module && p.get_attr && p.call && p.is_true && p.as_long && p.dec_ref &&
           p.err_fetch && p.err_restore;
    return p;
  }();
  return api;
}

// `module.name()`, a new reference or null (its exception dropped).
void* CallAttr(const Python& py, void* module, const char* name) {
  void* fn = py.get_attr(module, name);
  if (fn == nullptr) return nullptr;
  void* result = py.call(fn, nullptr);
  py.dec_ref(fn);
  return result;
}

// Under the GIL: torch.distributed's default group, when it is initialized.
bool ReadGroup(const Python& py, GroupRank* out) {
  void* name = py.unicode("torch.distributed");
  if (name == nullptr) return false;
  void* dist = py.get_module(name);  // only an imported module: nothing is imported here
  py.dec_ref(name);
  if (dist == nullptr) return false;
  bool found = false;
  if (void* initialized = CallAttr(py, dist, "is_initialized")) {
    found = py.is_true(initialized) == 1;
    py.dec_ref(initialized);
  }
  if (found) {
    void* rank = CallAttr(py, dist, "get_rank");
    void* world = CallAttr(py, dist, "get_world_size");
    found = rank != nullptr && world != nullptr;
    if (found) {
      out->rank = static_cast<int>(py.as_long(rank));
      out->world_size = static_cast<int>(py.as_long(world));
      found = out->rank >= 0 && out->world_size > out->rank;
    }
    if (rank != nullptr) py.dec_ref(rank);
    if (world != nullptr) py.dec_ref(world);
  }
  py.dec_ref(dist);
  return found;
}

std::mutex g_mu;
std::function<void(const GroupRank&)>* g_start = nullptr;  // guarded by g_mu; set once
std::atomic<bool> g_done{false};
std::atomic<uint64_t> g_handle{0};
thread_local int t_depth = 0;

std::unique_ptr<at::ObserverContext> OnEnter(const at::RecordFunction& /*fn*/) {
  ++t_depth;
  return nullptr;
}

void OnExit(const at::RecordFunction& /*fn*/, at::ObserverContext* /*ctx*/) {
  if (t_depth > 0) --t_depth;
  if (t_depth != 0 || g_done.load(std::memory_order_acquire)) return;
  GroupRank group;
  if (!PythonGroupRank(&group)) return;
  std::function<void(const GroupRank&)> start;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_done.exchange(true) || g_start == nullptr) return;
    start = std::move(*g_start);
  }
  if (const uint64_t handle = g_handle.load()) at::removeCallback(handle);
  start(group);
}

}  // namespace

bool PythonGroupRank(GroupRank* out) {
  const Python& py = Api();
  if (!py.ok || py.is_initialized() == 0 || py.is_finalizing() != 0) return false;
  const int gil = py.gil_ensure();
  void* type = nullptr;
  void* value = nullptr;
  void* trace = nullptr;
  py.err_fetch(&type, &value, &trace);  // the caller's pending exception, if any, survives
  const bool found = ReadGroup(py, out);
  void* raised[3] = {nullptr, nullptr, nullptr};
  py.err_fetch(&raised[0], &raised[1], &raised[2]);  // what the probe raised is dropped
  for (void* o : raised) py.dec_ref(o);              // Py_DecRef takes null
  py.err_restore(type, value, trace);
  py.gil_release(gil);
  return found;
}

void StartWhenInProcessGroup(std::function<void(const GroupRank&)> start) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_start != nullptr) return;
    g_start = new std::function<void(const GroupRank&)>(std::move(start));  // never freed
  }
  g_handle.store(at::addGlobalCallback(
      at::RecordFunctionCallback(&OnEnter, &OnExit).scopes({at::RecordScope::FUNCTION})));
}

}  // namespace parity::agent
