#include "backend_plugins.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include <dlock/core/backend/provider_url.hpp>
#include <dlock/core/errors.hpp>
#if DLOCK_CLI_WITH_FILE
#include <dlock/file.hpp>
#endif
#if DLOCK_CLI_WITH_MEMORY
#include <dlock/memory.hpp>
#endif

namespace dlock::cli {

namespace {

struct plugin_scheme {
  std::string_view scheme;
  std::string_view backend;
};

// Every scheme a networked backend registers, and its plugin.
constexpr plugin_scheme plugin_schemes[] = {
    {"redis", "redis"},         {"rediss", "redis"},       {"redis+unix", "redis"},
    {"postgres", "postgres"},   {"postgresql", "postgres"}, {"zookeeper", "zookeeper"},
    {"mysql", "mysql"},         {"mariadb", "mysql"},      {"etcd", "etcd"},
};

std::filesystem::path plugin_directory() {
  std::error_code ec;
  const auto executable = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return (executable.parent_path() / DLOCK_PLUGIN_DIR_FROM_BIN).lexically_normal();
}

// Opens the plugin of `backend` once and registers its schemes. A plugin this installation
// does not have leaves the scheme unknown, for the registry to report.
void load_plugin(std::string_view backend) {
  static std::mutex mutex;
  static std::vector<std::string> loaded;
  std::lock_guard guard(mutex);
  if (std::find(loaded.begin(), loaded.end(), backend) != loaded.end()) return;
  const auto path =
      plugin_directory() / ("dlock-backend-" + std::string(backend) + ".so");
  if (!std::filesystem::exists(path)) return;
  // Never closed: the providers it makes live until the process ends.
  void* module = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!module) {
    throw dlock::error("dlock: cannot load the " + std::string(backend) + " backend (" +
                       path.string() + "): " + ::dlerror());
  }
  auto* register_backend = reinterpret_cast<void (*)()>(::dlsym(module, "dlock_register_backend"));
  if (!register_backend) {
    throw dlock::error("dlock: " + path.string() + " is not a dlock backend plugin");
  }
  register_backend();
  loaded.emplace_back(backend);
}

bool is_linked_scheme(std::string_view url) {
  const std::string_view scheme = url.substr(0, url.find(':'));
  return scheme == "file" || scheme == "memory";
}

// This process's argv, for the hand-over to dlock-networked (execv with the same arguments).
char** own_arguments = nullptr;

void register_linked_backends() {
#if DLOCK_CLI_WITH_FILE
  file::register_scheme();
#endif
#if DLOCK_CLI_WITH_MEMORY
  memory::register_scheme();
#endif
}

}  // namespace

std::string watchdog_helper_path() {
  const auto directory = plugin_directory();
  return directory.empty() ? std::string() : (directory / "dlock-watchdog").string();
}

void remember_command_line(char** argv) { own_arguments = argv; }

void hand_over_if_networked(std::string_view url) {
  if (!DLOCK_CLI_LOCAL_ONLY || is_linked_scheme(url) || own_arguments == nullptr) return;
  const auto networked = plugin_directory() / "dlock-networked";
  std::error_code ec;
  if (!std::filesystem::exists(networked, ec)) return;
  ::execv(networked.c_str(), own_arguments);
  throw dlock::error("dlock: cannot run " + networked.string() + " for a networked URL: " +
                     std::strerror(errno));
}

std::shared_ptr<provider> make_provider(std::string_view url) {
  hand_over_if_networked(url);
  static std::once_flag registered;
  std::call_once(registered, register_linked_backends);
  const std::string_view scheme = url.substr(0, url.find(':'));
  const bool linked = is_linked_scheme(url);
  if (DLOCK_CLI_LOCAL_ONLY) return create_registered_provider(url);  // no plugin: one runtime
  bool known = linked;
  for (const auto& entry : plugin_schemes) {
    if (entry.scheme == scheme) {
      load_plugin(entry.backend);
      known = true;
    }
  }
  if (!known) {
    // Only for the registry's error, which lists every scheme this installation knows.
    for (const auto& entry : plugin_schemes) load_plugin(entry.backend);
  }
  return create_registered_provider(url);
}

}  // namespace dlock::cli
