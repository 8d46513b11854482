// Takes a lock through an installed dlock::file; exits 0 when it held and released it.
#include <cstdio>
#include <filesystem>

#include <dlock/file.hpp>

int main() {
  const auto directory = std::filesystem::temp_directory_path() / "dlock-consumer";
  auto files = std::make_shared<dlock::file::provider>(dlock::file::options{.directory = directory});
  std::shared_ptr<dlock::lock_provider> locks = files;
  auto held = locks->create_lock("consumer").try_acquire();
  if (!held) return 1;
  std::printf("held 'consumer' with fencing token %llu\n",
              static_cast<unsigned long long>(held->fencing_token()));
  return 0;
}
