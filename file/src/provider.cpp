#include <dlock/file/provider.hpp>

#include <stdexcept>

#include <dlock/core/backend/naming.hpp>
#include <dlock/core/backend/provider_url.hpp>

#include "backend.hpp"

namespace dlock::file {

namespace {

std::shared_ptr<detail::file_backend> make_backend(const options& opts) {
  return std::make_shared<detail::file_backend>(opts);
}

}  // namespace

provider::provider(options opts) : provider(make_backend(opts), opts.on_error) {}

provider::provider(std::shared_ptr<detail::file_backend> backend, error_handler on_error)
    : dlock::provider(backend, std::move(on_error)), backend_(std::move(backend)) {}

std::filesystem::path provider::lock_file_path(std::string_view name) const {
  naming::validate_name(name);
  return backend_->directory() / backend_->lock_file_name(name);
}

void register_scheme() {
  dlock::register_scheme("file", [](provider_url url) -> std::shared_ptr<dlock::provider> {
    if (!url.hosts.empty() && !(url.hosts.size() == 1 && url.hosts[0].host == "localhost" &&
                                !url.hosts[0].port)) {
      throw std::invalid_argument("dlock: file URL '" + url.redacted() +
                                  "' names a host; use file:///absolute/directory");
    }
    if (!url.user.empty() || url.password) {
      throw std::invalid_argument("dlock: file URL '" + url.redacted() +
                                  "' must not carry a user or password");
    }
    if (url.path.empty() || url.path == "/") {
      throw std::invalid_argument("dlock: file URL '" + url.redacted() +
                                  "' needs a directory, e.g. file:///var/lock/myapp");
    }
    options opts{.directory = url.path};
    if (auto value = url.take_option("remove_files")) {
      opts.remove_files_on_release = parse_bool("remove_files", *value);
    }
    if (auto value = url.take_option("monitor_period")) {
      opts.monitor_period = parse_duration("monitor_period", *value);
    }
    if (auto value = url.take_option("retry_period")) {
      opts.retry_period = parse_duration("retry_period", *value);
    }
    url.reject_unknown_options();
    return std::make_shared<provider>(std::move(opts));
  });
}

}  // namespace dlock::file
