// The contract suite against dlock::file, in a fresh directory per test process.
#include <filesystem>
#include <fstream>

#include <dlock/dlock.hpp>

#include "../backend.hpp"
#include "support.hpp"

namespace contract {

namespace {

class file_fixture final : public backend_fixture {
 public:
  std::string label() const override { return "file"; }

  std::shared_ptr<dlock::provider> make_provider() override {
    return std::make_shared<dlock::file::provider>(
        dlock::file::options{.directory = directory_.path()});
  }

  std::string url() const override { return "file://" + directory_.path().string(); }

  void break_lock(const std::string& name) override {
    dlock::file::provider files({.directory = directory_.path()});
    const auto path = files.lock_file_path(name);
    // Replace rather than remove: a new file of the same name that anyone may lock.
    const auto replacement = path.string() + ".new";
    std::ofstream(replacement).put('\n');
    std::filesystem::rename(replacement, path);
  }

  void acquire_from_unreachable_endpoint() override {
    // A directory below a regular file can never be created.
    auto files = std::make_shared<dlock::file::provider>(
        dlock::file::options{.directory = unreachable_endpoint()});
    (void)files->create_lock("x").try_acquire();
  }

  std::string unreachable_endpoint() const override {
    return (directory_.path() / "a-regular-file" / "locks").string();
  }

  file_fixture() { std::ofstream(directory_.path() / "a-regular-file").put('\n'); }

 private:
  support::temp_directory directory_;
};

}  // namespace

backend_fixture& backend() {
  static file_fixture instance;
  return instance;
}

}  // namespace contract
