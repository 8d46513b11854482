// The backend base: defaults of the optional parts, the event sink before core attaches its
// own, and the wording every backend's messages share.
#include <dlock/core/backend/backend.hpp>

#include <iostream>
#include <utility>
#include <stdexcept>

#include <boost/asio/post.hpp>

#include <dlock/core/backend/naming.hpp>

namespace dlock {

void report_background_error(const error_handler& handler, std::exception_ptr error) noexcept {
  try {
    if (handler) {
      handler(error);
      return;
    }
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    std::cerr << e.what() << '\n';
  } catch (...) {
    std::cerr << "dlock: unknown error in background work\n";
  }
}

backend::~backend() = default;

void backend::check_name(resource_kind, std::string_view) const {}

std::optional<std::uint32_t> backend::current_count(const acquire_request&) {
  return std::nullopt;
}

namespace {

[[noreturn]] void unsupported(const backend& b, std::string_view what) {
  throw unsupported_operation(b.message(std::string(what) + " is not supported by this backend"));
}

}  // namespace

lock_inspection backend::inspect(const std::string&) { unsupported(*this, "inspect"); }

std::vector<lock_inspection> backend::list_locks(const std::string&) {
  unsupported(*this, "listing locks");
}

void backend::break_lock(const std::string&) { unsupported(*this, "break_lock"); }

std::invalid_argument backend::no_token_records(std::string_view option,
                                                std::string_view name) const {
  return std::invalid_argument(message(
      "is_current needs a record of each grant's fencing token, which this provider keeps "
      "none of: " + std::string(option),
      name));
}

std::string backend::min_hold_refusal() const {
  return "it keeps nothing of a lock past its release";
}

bool backend::is_current(const acquire_request& request, std::uint64_t fencing_token) {
  const party_kind wanted =
      request.kind == resource_kind::lock ? party_kind::exclusive : party_kind::write;
  for (const auto& holder : inspect(request.name).holders) {
    if (holder.kind == wanted && holder.fencing_token == fencing_token) return true;
  }
  return false;
}

void backend::attach_events(std::shared_ptr<backend_events> events) noexcept {
  events_ = std::move(events);
}

namespace {

class printing_events final : public backend_events {
 public:
  void acquire_waiting() noexcept override {}
  void extension_failed() noexcept override {}
  void reconnected() noexcept override {}
  void background_error(std::exception_ptr error) noexcept override {
    report_background_error({}, std::move(error));
  }
};

}  // namespace

backend_events& backend::events() const noexcept {
  static printing_events fallback;
  return events_ ? *events_ : static_cast<backend_events&>(fallback);
}

bool inline_acquirer::waits_inline(const acquire_request&) const noexcept { return false; }

std::unique_ptr<lease> inline_acquirer::acquire_waiting_inline(const acquire_request& request,
                                                              std::stop_token, std::stop_token) {
  throw std::logic_error("dlock: acquire_waiting_inline of '" + request.name +
                         "' on a backend whose waits_inline is false");
}

std::string backend::message(std::string_view what) const {
  std::string text = "dlock: ";
  text += scheme();
  text += ' ';
  text += endpoint();
  text += ": ";
  text += what;
  return text;
}

std::string backend::message(std::string_view what, std::string_view name) const {
  return message(what) + " for lock '" + naming::quote_for_message(name) + "'";
}

void backend::check_slot_count(const acquire_request& request, std::uint32_t most) const {
  if (request.kind != resource_kind::semaphore || request.max_count <= most) return;
  throw std::invalid_argument(message("max_count " + std::to_string(request.max_count) +
                                      " of semaphore '" + naming::quote_for_message(request.name) +
                                      "' exceeds " + std::to_string(most)));
}

void backend::start_on_io_thread(dlock::detail::unique_function<void()> start) {
  if (io_.running_in_this_thread()) {
    start();
  } else {
    boost::asio::post(io_.executor(), std::move(start));
  }
}

std::invalid_argument backend::max_count_mismatch(const acquire_request& request,
                                                  std::uint64_t recorded,
                                                  std::string_view where) const {
  std::string what = "semaphore '" + naming::quote_for_message(request.name) +
                     "' is used with max_count " + std::to_string(request.max_count) +
                     " here but " + std::to_string(recorded) + " by its holders";
  if (!where.empty()) {
    what += " (recorded in ";
    what += where;
    what += ')';
  }
  return std::invalid_argument(message(what));
}

}  // namespace dlock
