#include "semaphore_count.hpp"

#include <algorithm>

#include <dlock/core/backend/blocking_call.hpp>
#include <dlock/core/errors.hpp>

#include "backend.hpp"
#include "node_layout.hpp"

namespace dlock::zookeeper::detail {

std::exception_ptr recorded_count_mismatch(const dlock::backend& backend,
                                           const acquire_request& request,
                                           const std::string& recorded,
                                           const std::string& leases_path) {
  // Only a plain number is dlock's record; Curator leaves the node empty (or writes other data).
  if (recorded.empty() || recorded.size() > 10 ||
      !std::all_of(recorded.begin(), recorded.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return nullptr;
  }
  if (recorded == std::to_string(request.max_count)) return nullptr;
  return std::make_exception_ptr(
      backend.max_count_mismatch(request, std::stoull(recorded), leases_path));
}

std::uint32_t count_free_slots(zookeeper_backend& backend, const acquire_request& request) {
  const std::string leases = backend.node_of(request.name) + "/leases";
  blocking_reply<zk_reply> data, children;
  // Both answers are only handed over inside the client's processing; the session answers in
  // request order, so the data is there once the listing is.
  backend.session().get_data(
      leases, [data](zk_reply reply) { data.set_value(std::move(reply)); }, true);
  backend.session().get_children(
      leases, [children](zk_reply reply) { children.set_value(std::move(reply)); }, nullptr,
      nullptr, true);
  std::optional<zk_reply> listed;
  backend.session().await(
      [&](std::chrono::nanoseconds wait) {
        if (!listed) listed = children.get_within(wait);
        return listed.has_value();
      },
      std::chrono::steady_clock::now() + backend.settings().release_timeout);
  if (!listed) {
    throw connection_error(backend.message("no answer when counting leases", request.name));
  }
  const zk_reply recorded = data.get();
  if (listed->rc == ZNONODE) return request.max_count;
  if (listed->rc != ZOK) {
    throw connection_error(backend.message(
        std::string("counting leases failed: ") + zerror(listed->rc), request.name));
  }
  if (auto mismatch = recorded_count_mismatch(backend, request, recorded.data, leases)) {
    std::rethrow_exception(mismatch);
  }
  const auto held = static_cast<std::size_t>(
      std::count_if(listed->children.begin(), listed->children.end(),
                    [](const std::string& child) { return is_lease_node(child); }));
  return held >= request.max_count ? 0 : request.max_count - static_cast<std::uint32_t>(held);
}

}  // namespace dlock::zookeeper::detail
