// Private to dlock::etcd: the gRPC channel to the cluster and every call made over it.
//
// Unary calls (Txn, Range, DeleteRange, LeaseGrant, LeaseRevoke) and the two streams (Watch,
// LeaseKeepAlive) go through etcd_client, which adds the auth token, bounds each unary call by
// a deadline, and posts every answer to the provider's executor, so the rest of the backend
// runs on that one thread. shutdown() cancels whatever is still out and waits for gRPC to let
// go of it, so no answer arrives after the backend is gone.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>
#include <grpcpp/grpcpp.h>

#include <dlock/core/detail/unique_function.hpp>
#include <dlock/etcd/options.hpp>

#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace dlock::etcd::detail {

namespace pb = ::etcdserverpb;

template <class Response>
using reply_handler = dlock::detail::unique_function<void(grpc::Status, Response)>;

class etcd_client {
 public:
  /// Builds the channel (nothing connects yet). Throws std::invalid_argument for a TLS file
  /// that cannot be read.
  etcd_client(const options& opts, boost::asio::any_io_executor executor);
  /// Calls shutdown().
  ~etcd_client();

  /// Authenticates with the options' user and password, if any, waiting up to `timeout`.
  /// Returns an empty string on success, else what failed.
  std::string authenticate(std::chrono::nanoseconds timeout);

  /// Why the channel cannot connect (gRPC's last error: refused, TLS handshake failed and
  /// OpenSSL's reason), found by a call that does not wait for a connection; empty if it can.
  /// Blocks up to a second. A call that waits for a connection only says "Deadline Exceeded".
  std::string connection_failure();

  // etcd forgets a token unused for --auth-token-ttl (simple tokens, 5 min by default) and
  // answers "invalid auth token": every unary call then logs in again once and is sent again.

  /// Each answers on the executor, exactly once (a cancelled or timed-out call with its status).
  void txn(pb::TxnRequest request, reply_handler<pb::TxnResponse> done);
  void range(pb::RangeRequest request, reply_handler<pb::RangeResponse> done);
  void remove(pb::DeleteRangeRequest request, reply_handler<pb::DeleteRangeResponse> done);
  void grant(pb::LeaseGrantRequest request, std::chrono::nanoseconds timeout,
             reply_handler<pb::LeaseGrantResponse> done);
  void revoke(pb::LeaseRevokeRequest request, std::chrono::nanoseconds timeout,
              reply_handler<pb::LeaseRevokeResponse> done);

  /// A Txn and a Range on the calling thread (blocking calls), waiting up to `timeout`.
  grpc::Status txn_now(const pb::TxnRequest& request, pb::TxnResponse& response,
                       std::chrono::nanoseconds timeout);
  grpc::Status range_now(const pb::RangeRequest& request, pb::RangeResponse& response,
                         std::chrono::nanoseconds timeout);
  /// Revokes lease `lease_id` on the calling thread (a blocking call), waiting up to `timeout`.
  grpc::Status revoke_now(std::int64_t lease_id, std::chrono::nanoseconds timeout);
  /// Asks for the time left on lease `lease_id` (LeaseTimeToLive) on the calling thread (a
  /// blocking call), waiting up to `timeout`.
  grpc::Status time_to_live_now(std::int64_t lease_id, pb::LeaseTimeToLiveResponse& response,
                                std::chrono::nanoseconds timeout);

  pb::Watch::Stub& watch_stub() { return *watch_; }
  pb::Lease::Stub& lease_stub() { return *lease_; }
  const boost::asio::any_io_executor& executor() const { return executor_; }

  /// A context for a stream (no deadline), with the auth token; registered so shutdown()
  /// cancels it. The stream calls stream_done() when gRPC is finished with it.
  std::shared_ptr<grpc::ClientContext> stream_context();
  void stream_done(const std::shared_ptr<grpc::ClientContext>& context);

  /// Cancels every stream, gives the calls still out (a release's delete) up to `grace` to
  /// finish, cancels the rest, and waits until gRPC has finished with them all. Idempotent.
  /// After it, new calls answer CANCELLED at once.
  void shutdown(std::chrono::nanoseconds grace = std::chrono::nanoseconds::zero());

 private:
  template <class Request, class Response>
  struct unary_call {
    std::shared_ptr<grpc::ClientContext> context;
    Request request;
    Response response;
    reply_handler<Response> done;
    bool logged_in_again = false;
  };

  /// Runs the blocking `call(context)` with a tracked context (token, deadline `timeout`).
  template <class Call>
  grpc::Status blocking(std::chrono::nanoseconds timeout, Call call);
  template <class Request, class Response, class Start>
  void unary(Request request, std::chrono::nanoseconds timeout, Start start,
             reply_handler<Response> done);
  template <class Request, class Response, class Start>
  void send(std::shared_ptr<unary_call<Request, Response>> c, std::chrono::nanoseconds timeout,
            Start start);
  /// Authenticates again without blocking; `done` hears the status, on a gRPC thread.
  void log_in_again(std::chrono::nanoseconds timeout,
                    dlock::detail::unique_function<void(grpc::Status)> done);
  std::shared_ptr<grpc::ClientContext> new_context(std::chrono::nanoseconds timeout,
                                                   bool with_token = true);
  bool track(const std::shared_ptr<grpc::ClientContext>& context, bool stream = false);
  void untrack(const std::shared_ptr<grpc::ClientContext>& context);

  boost::asio::any_io_executor executor_;
  std::chrono::nanoseconds call_timeout_;
  tls_options tls_;
  std::string user_;
  std::string password_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::KV::Stub> kv_;
  std::unique_ptr<pb::Watch::Stub> watch_;
  std::unique_ptr<pb::Lease::Stub> lease_;
  std::unique_ptr<pb::Auth::Stub> auth_;

  std::mutex mutex_;
  std::condition_variable idle_;
  std::string token_;
  bool shut_down_ = false;
  struct call_out {
    std::shared_ptr<grpc::ClientContext> context;
    bool stream;
  };
  std::map<grpc::ClientContext*, call_out> out_;
  std::size_t live_contexts_ = 0;  // made by new_context and not yet destroyed
};

/// The key just past every key that begins with `prefix` (etcd's range_end for a prefix).
std::string prefix_end(const std::string& prefix);

/// Whether etcd refused the call's auth token (expired, or older than the auth store): the
/// client must authenticate again.
bool is_stale_token(const grpc::Status& status);
bool is_stale_token(const std::string& message);

/// Whether a failed call may succeed when simply sent again (connection broken, member
/// without leader, deadline passed).
bool is_transient(const grpc::Status& status);

/// "UNAVAILABLE: <message>": a status for messages.
std::string describe(const grpc::Status& status);

}  // namespace dlock::etcd::detail
