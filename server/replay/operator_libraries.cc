#include "server/replay/operator_libraries.h"

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <exception>

#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/torch/torch_pch.h"
#include "server/replay/call_checker.h"
#include "server/replay/stages.h"

namespace parity::server {
namespace {

namespace fs = std::filesystem;

constexpr char kNpuLibrary[] = "libparity_npu_reference.so";

fs::path ExecutableDir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

// What each path loaded to, so a second server in one process (the tests) finds it loaded.
std::mutex g_mu;
std::map<std::string, LoadedLibrary>& Loaded() {
  static auto* loaded = new std::map<std::string, LoadedLibrary>();
  return *loaded;
}

// A library whose registration throws in a static initializer (a namespace another library
// already defined, a malformed schema) makes dlopen call std::terminate: the exception cannot
// cross it. So each library is first loaded in a child process, which reports the failure's
// text through a pipe; only one that loads there is loaded here.
int g_probe_fd = -1;

[[noreturn]] void ProbeTerminate() {
  std::string why = "terminated while loading";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      why = ErrorText(ex);
    } catch (...) {
    }
  }
  if (g_probe_fd >= 0) (void)!write(g_probe_fd, why.data(), why.size());
  _exit(1);
}

// Empty when `path` loads in a child process; else why it does not.
std::string ProbeLoad(const std::string& path) {
  int fds[2];
  if (pipe(fds) != 0) return "";  // cannot probe: load directly
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return "";
  }
  if (pid == 0) {
    close(fds[0]);
    g_probe_fd = fds[1];
    std::set_terminate(ProbeTerminate);
    if (dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      const char* why = dlerror();
      const std::string text = why ? why : "dlopen failed";
      (void)!write(fds[1], text.data(), text.size());
      _exit(1);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string why;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) why.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  return why.empty() ? "the library failed to load" : why.substr(0, why.find('\n'));
}

absl::StatusOr<LoadedLibrary> LoadOne(const std::string& path) {
  std::error_code ec;
  const fs::path canonical = fs::canonical(path, ec);
  if (ec) {
    return absl::NotFoundError(absl::StrCat("operator library ", path, ": ", ec.message()));
  }
  const std::string key = canonical.string();
  auto it = Loaded().find(key);
  if (it != Loaded().end()) return it->second;
  const std::vector<std::string> known = KnownOperatorNames();
  const std::set<std::string> before(known.begin(), known.end());
  const std::string probe = ProbeLoad(key);
  if (!probe.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("operator library ", path, ": ", probe));
  }
  void* handle = dlopen(key.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(
        absl::StrCat("operator library ", path, ": ", why ? why : "dlopen failed"));
  }
  LoadedLibrary lib;
  lib.path = key;
  std::set<std::string> added;  // one name per operator, not per overload
  for (const std::string& name : KnownOperatorNames()) {
    if (before.count(name) == 0) added.insert(name);
  }
  lib.operators.assign(added.begin(), added.end());
  Loaded().emplace(key, lib);
  return lib;
}

}  // namespace

std::string FindNpuReferenceLibrary() {
  const fs::path dir = ExecutableDir();
  std::vector<fs::path> candidates = {dir / kNpuLibrary, dir / "../lib/parity" / kNpuLibrary,
                                      dir / "../lib" / kNpuLibrary};
#ifdef PARITY_BUILD_SERVER_DIR
  candidates.push_back(fs::path(PARITY_BUILD_SERVER_DIR) / kNpuLibrary);
#endif
  for (const fs::path& p : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.lexically_normal().string();
  }
  return "";
}

absl::StatusOr<std::vector<LoadedLibrary>> LoadOperatorLibraries(
    bool npu_reference, const std::vector<std::string>& paths) {
  std::vector<std::string> all;
  if (npu_reference) {
    const std::string npu = FindNpuReferenceLibrary();
    if (npu.empty()) {
      return absl::NotFoundError(
          absl::StrCat(kNpuLibrary,
                       " not found beside the server or in ../lib/parity; install it with the "
                       "server, or set parity.npu_reference: false to replay without it"));
    }
    all.push_back(npu);
  }
  all.insert(all.end(), paths.begin(), paths.end());
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<LoadedLibrary> out;
  for (const std::string& p : all) {
    absl::StatusOr<LoadedLibrary> lib = LoadOne(p);
    if (!lib.ok()) return lib.status();
    out.push_back(*std::move(lib));
  }
  return out;
}

}  // namespace parity::server
