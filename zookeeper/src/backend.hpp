// Private to dlock::zookeeper: the backend behind dlock::zookeeper::provider.
//
// Start here. One ZooKeeper session per provider (session.hpp) runs every call; acquire.hpp
// runs Curator's recipes over it in the layout of node_layout.hpp; a grant is a lease
// (lease.hpp) whose node held_watch.hpp watches, and whose minimum hold min_hold.hpp keeps in
// a TTL node; semaphore_count.hpp counts a semaphore's leases; election_board.cpp keeps leader
// records in Curator's LeaderLatch layout, and inspector.cpp shows and breaks what the nodes
// hold. Every recipe step runs on the provider's io thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <dlock/core/backend/backend.hpp>
#include <dlock/zookeeper/options.hpp>

#include "held_watch.hpp"
#include "session.hpp"

namespace dlock::zookeeper::detail {

class zookeeper_backend final : public dlock::backend,
                                public std::enable_shared_from_this<zookeeper_backend> {
 public:
  /// Validates `opts`. Throws std::invalid_argument naming a bad option.
  explicit zookeeper_backend(options opts);
  ~zookeeper_backend() override;

  std::string_view scheme() const noexcept override { return "zookeeper"; }
  /// Empty when the server takes TTL nodes, which keep a hold past its holder's session
  /// (min_hold.hpp); else why not, naming the server setting. Asks the server the first time
  /// and keeps a clear answer. Throws connection_error when it does not answer.
  std::string min_hold_refusal() const override;
  /// The hosts, then the chroot: the C client's connect string.
  std::string endpoint() const override { return options_.hosts + options_.chroot; }
  std::shared_ptr<acquire_operation> start_acquire(acquire_request request,
                                                   acquire_completion done) override;
  /// max_count minus the lease nodes now; std::nullopt on the io thread (it cannot wait).
  /// Throws std::invalid_argument when the recorded max_count differs; connection_error.
  std::optional<std::uint32_t> current_count(const acquire_request& request) override;
  /// Not connected while the session has no server (from the first sign of the outage).
  provider_health health() const override;

  /// Opens the session and waits up to connect_timeout for it. Throws connection_error.
  void start() override;

  /// Leader records in the candidates' nodes (election_board.cpp).
  std::shared_ptr<election_board> elections() override;
  /// Holders and waiters from the name's nodes, their data and stat (inspector.cpp).
  lock_inspection inspect(const std::string& name) override;
  /// inspect() of the names below base_path that start with `prefix`.
  std::vector<lock_inspection> list_locks(const std::string& prefix) override;
  /// Deletes the holders' nodes; their watches mark them lost.
  void break_lock(const std::string& name) override;

  /// The calls one blocking read or write makes: `send(answer)` passes `answer()` as the
  /// handler of each session call it makes, with answer_on_client_thread set.
  using call_sender = std::function<void(const std::function<zk_handler()>& answer)>;
  /// Makes the calls of `send` and waits for every answer, up to release_timeout in all;
  /// returns them in call order. Works on any thread; on the io thread it reads the answers
  /// itself (zk_session::await). Throws connection_error(`no_answer`) when one does not come.
  std::vector<zk_reply> ask(const call_sender& send, const std::string& no_answer) const;

  const options& settings() const noexcept { return options_; }
  /// `<base_path>/<escaped name>`.
  std::string node_of(std::string_view name) const;

  zk_session& session() const noexcept { return *session_; }
  held_watch& held() noexcept { return *held_; }

 private:
  options options_;
  std::shared_ptr<zk_session> session_;
  std::shared_ptr<held_watch> held_;
  // min_hold_refusal()'s answer, once the server gave a clear one.
  mutable std::mutex ttl_answer_mutex_;
  mutable std::optional<std::string> ttl_refusal_;
};

}  // namespace dlock::zookeeper::detail
