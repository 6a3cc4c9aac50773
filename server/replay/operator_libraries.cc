#include "server/replay/operator_libraries.h"

#include <dlfcn.h>
#include <unistd.h>

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
  void* handle = nullptr;
  try {
    handle = dlopen(key.c_str(), RTLD_NOW | RTLD_GLOBAL);
  } catch (const std::exception& e) {  // a registration that failed in a static initializer
    return absl::FailedPreconditionError(
        absl::StrCat("operator library ", path, " failed to register: ", ErrorText(e)));
  }
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
