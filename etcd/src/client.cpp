#include "client.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include <boost/asio/ip/address.hpp>

namespace dlock::etcd::detail {

namespace {

std::string read_file(const std::string& field, const std::string& path) {
  if (path.empty()) return {};
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::invalid_argument("dlock: etcd provider: option 'tls." + field +
                                "' names a file that cannot be read: " + path);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::shared_ptr<grpc::ChannelCredentials> credentials_of(const tls_options& tls) {
  if (!tls.enabled) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = read_file("ca_file", tls.ca_file);
  ssl.pem_cert_chain = read_file("cert_file", tls.cert_file);
  ssl.pem_private_key = read_file("key_file", tls.key_file);
  return grpc::SslCredentials(ssl);
}

std::vector<std::string> split_endpoints(const std::string& endpoints) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  while (begin <= endpoints.size()) {
    const std::size_t end = std::min(endpoints.find(',', begin), endpoints.size());
    parts.push_back(endpoints.substr(begin, end - begin));
    begin = end + 1;
  }
  return parts;
}

bool is_ipv4_endpoint(const std::string& endpoint) {
  const std::size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos) return false;
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(endpoint.substr(0, colon), ec);
  return !ec && address.is_v4();
}

// gRPC takes several addresses in one target only as literals ("ipv4:a:p,b:p"); pick_first
// then fails over between them. One host name goes through gRPC's resolver as it is (and
// fails over between its addresses).
std::string target_of(const std::string& endpoints) {
  const std::vector<std::string> parts = split_endpoints(endpoints);
  if (parts.size() == 1) return parts.front();
  if (std::all_of(parts.begin(), parts.end(), is_ipv4_endpoint)) return "ipv4:" + endpoints;
  throw std::invalid_argument(
      "dlock: etcd provider: option 'endpoints': several endpoints must be IPv4 addresses "
      "(gRPC takes one host name per channel; give one name that resolves to every member), "
      "not '" + endpoints + "'");
}

grpc::ChannelArguments channel_arguments(const options& opts) {
  grpc::ChannelArguments args;
  args.SetLoadBalancingPolicyName("pick_first");
  // etcd refuses pings more often than every 5 s (--grpc-keepalive-min-time): a silent member
  // is given up one ping interval and a timeout after it fell silent.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
              static_cast<int>(std::clamp<std::int64_t>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(opts.lease_ttl / 3).count(),
                  500, 20000)));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // A restarted member is found again within a second.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return args;
}

}  // namespace

etcd_client::etcd_client(const options& opts, boost::asio::any_io_executor executor)
    : executor_(std::move(executor)),
      call_timeout_(opts.lease_ttl),
      tls_(opts.tls),
      user_(opts.user),
      password_(opts.password),
      channel_(grpc::CreateCustomChannel(target_of(opts.endpoints), credentials_of(opts.tls),
                                         channel_arguments(opts))),
      kv_(pb::KV::NewStub(channel_)),
      watch_(pb::Watch::NewStub(channel_)),
      lease_(pb::Lease::NewStub(channel_)),
      auth_(pb::Auth::NewStub(channel_)) {}

etcd_client::~etcd_client() {
  shutdown();
  std::unique_lock lock(mutex_);
  // Bounded: a context kept by mistake must not hang the provider's destructor.
  idle_.wait_for(lock, std::chrono::seconds(5), [&] { return live_contexts_ == 0; });
}

std::string etcd_client::authenticate(std::chrono::nanoseconds timeout) {
  if (user_.empty()) return {};
  grpc::ClientContext context;
  context.set_wait_for_ready(true);
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  pb::AuthenticateRequest request;
  request.set_name(user_);
  request.set_password(password_);
  pb::AuthenticateResponse response;
  const grpc::Status status = auth_->Authenticate(&context, request, &response);
  if (!status.ok()) return "authentication as '" + user_ + "' failed: " + describe(status);
  std::lock_guard lock(mutex_);
  token_ = response.token();
  return {};
}

std::string etcd_client::connection_failure() {
  auto context = new_context(std::chrono::seconds(1), false);
  context->set_wait_for_ready(false);
  pb::RangeRequest request;
  request.set_key("dlock-connection-probe");
  request.set_count_only(true);
  pb::RangeResponse response;
  if (!track(context)) return {};
  const grpc::Status status = kv_->Range(context.get(), request, &response);
  untrack(context);
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return {};
  std::string failure = "cannot connect: " + describe(status);
  // A member with --client-cert-auth refuses after the handshake (TLS 1.3), and gRPC only
  // says the read failed.
  if (tls_.enabled && tls_.cert_file.empty() &&
      status.error_message().find("read failed") != std::string::npos) {
    failure += "; no client certificate was given (tls.cert_file, tls.key_file), which a "
               "member started with --client-cert-auth requires";
  }
  return failure;
}

void etcd_client::log_in_again(std::chrono::nanoseconds timeout,
                               dlock::detail::unique_function<void(grpc::Status)> done) {
  struct call {
    std::shared_ptr<grpc::ClientContext> context;
    pb::AuthenticateRequest request;
    pb::AuthenticateResponse response;
    dlock::detail::unique_function<void(grpc::Status)> done;
  };
  // No token: the stale one is what etcd refuses.
  auto c = std::make_shared<call>(call{new_context(timeout, false), {}, {}, std::move(done)});
  if (!track(c->context)) {
    return c->done(grpc::Status(grpc::StatusCode::CANCELLED, "the provider is shutting down"));
  }
  c->request.set_name(user_);
  c->request.set_password(password_);
  auth_->async()->Authenticate(c->context.get(), &c->request, &c->response,
                               [this, c](grpc::Status status) {
                                 if (status.ok()) {
                                   std::lock_guard lock(mutex_);
                                   token_ = c->response.token();
                                 }
                                 auto done = std::move(c->done);
                                 done(std::move(status));
                                 untrack(c->context);  // last, like unary's answers
                               });
}

std::shared_ptr<grpc::ClientContext> etcd_client::new_context(std::chrono::nanoseconds timeout,
                                                               bool with_token) {
  {
    std::lock_guard lock(mutex_);
    ++live_contexts_;
  }
  // A context holds a reference to the channel and is often destroyed on one of gRPC's
  // callback threads; were it the channel's last, gRPC would tear down that very thread's pool
  // from inside it (a double free at exit under AddressSanitizer). So ~etcd_client, which
  // holds the channel, waits until every context is gone.
  std::shared_ptr<grpc::ClientContext> context(new grpc::ClientContext,
                                               [this](grpc::ClientContext* finished) {
                                                 delete finished;
                                                 std::lock_guard lock(mutex_);
                                                 if (--live_contexts_ == 0) idle_.notify_all();
                                               });
  // A call waits through a reconnect (to this member or the next) instead of failing at once.
  context->set_wait_for_ready(true);
  if (timeout != std::chrono::nanoseconds::max()) {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::duration_cast<std::chrono::system_clock::duration>(timeout));
  }
  std::lock_guard lock(mutex_);
  if (with_token && !token_.empty()) context->AddMetadata("token", token_);
  return context;
}

bool etcd_client::track(const std::shared_ptr<grpc::ClientContext>& context, bool stream) {
  std::lock_guard lock(mutex_);
  if (shut_down_) return false;
  out_.emplace(context.get(), call_out{context, stream});
  return true;
}

void etcd_client::untrack(const std::shared_ptr<grpc::ClientContext>& context) {
  std::lock_guard lock(mutex_);
  out_.erase(context.get());
  if (out_.empty()) idle_.notify_all();
}

std::shared_ptr<grpc::ClientContext> etcd_client::stream_context() {
  auto context = new_context(std::chrono::nanoseconds::max());
  context->set_wait_for_ready(false);
  if (!track(context, true)) context->TryCancel();
  return context;
}

void etcd_client::stream_done(const std::shared_ptr<grpc::ClientContext>& context) {
  untrack(context);
}

template <class Request, class Response, class Start>
void etcd_client::unary(Request request, std::chrono::nanoseconds timeout, Start start,
                        reply_handler<Response> done) {
  send(std::make_shared<unary_call<Request, Response>>(
           unary_call<Request, Response>{{}, std::move(request), {}, std::move(done)}),
       timeout, std::move(start));
}

template <class Request, class Response, class Start>
void etcd_client::send(std::shared_ptr<unary_call<Request, Response>> c,
                       std::chrono::nanoseconds timeout, Start start) {
  c->context = new_context(timeout);
  const auto answer = [this](std::shared_ptr<unary_call<Request, Response>> c,
                             grpc::Status status) {
    // The answer alone goes to the executor: a handler still queued there when the provider
    // goes must not keep the context (see new_context).
    boost::asio::post(executor_, [done = std::move(c->done), status = std::move(status),
                                  response = std::move(c->response)]() mutable {
      done(std::move(status), std::move(response));
    });
  };
  if (!track(c->context)) {
    return answer(std::move(c),
                  grpc::Status(grpc::StatusCode::CANCELLED, "the provider is shutting down"));
  }
  start(c->context.get(), &c->request, &c->response,
        [this, c, timeout, start, answer](grpc::Status status) {
          if (is_stale_token(status) && !user_.empty() && !c->logged_in_again) {
            c->logged_in_again = true;
            // Tracked before the call is untracked, so shutdown() still waits for it.
            log_in_again(timeout, [this, c, timeout, start, answer](grpc::Status login) {
              if (login.ok()) {
                c->response = Response{};
                return send(c, timeout, start);
              }
              answer(c, grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                     "the auth token expired and logging in again as '" + user_ +
                                         "' failed: " + describe(login)));
            });
          } else {
            answer(c, std::move(status));
          }
          untrack(c->context);  // last: shutdown() may return, and the executor go, after this
        });
}

void etcd_client::txn(pb::TxnRequest request, reply_handler<pb::TxnResponse> done) {
  unary(std::move(request), call_timeout_,
        [this](auto* context, auto* req, auto* resp, auto callback) {
          kv_->async()->Txn(context, req, resp, std::move(callback));
        },
        std::move(done));
}

void etcd_client::range(pb::RangeRequest request, reply_handler<pb::RangeResponse> done) {
  unary(std::move(request), call_timeout_,
        [this](auto* context, auto* req, auto* resp, auto callback) {
          kv_->async()->Range(context, req, resp, std::move(callback));
        },
        std::move(done));
}

void etcd_client::remove(pb::DeleteRangeRequest request,
                         reply_handler<pb::DeleteRangeResponse> done) {
  unary(std::move(request), call_timeout_,
        [this](auto* context, auto* req, auto* resp, auto callback) {
          kv_->async()->DeleteRange(context, req, resp, std::move(callback));
        },
        std::move(done));
}

template <class Call>
grpc::Status etcd_client::blocking(std::chrono::nanoseconds timeout, Call call) {
  grpc::Status status;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto context = new_context(timeout);
    if (!track(context)) return {grpc::StatusCode::CANCELLED, "the provider is shutting down"};
    status = call(context.get());
    untrack(context);
    if (attempt > 0 || !is_stale_token(status) || user_.empty()) break;
    if (std::string failure = authenticate(timeout); !failure.empty()) {
      return {grpc::StatusCode::UNAUTHENTICATED, "the auth token expired and " + failure};
    }
  }
  return status;
}

grpc::Status etcd_client::txn_now(const pb::TxnRequest& request, pb::TxnResponse& response,
                                  std::chrono::nanoseconds timeout) {
  return blocking(timeout, [&](grpc::ClientContext* context) {
    return kv_->Txn(context, request, &response);
  });
}

grpc::Status etcd_client::range_now(const pb::RangeRequest& request, pb::RangeResponse& response,
                                    std::chrono::nanoseconds timeout) {
  return blocking(timeout, [&](grpc::ClientContext* context) {
    return kv_->Range(context, request, &response);
  });
}

grpc::Status etcd_client::revoke_now(std::int64_t lease_id, std::chrono::nanoseconds timeout) {
  pb::LeaseRevokeRequest request;
  request.set_id(lease_id);
  pb::LeaseRevokeResponse response;
  return blocking(timeout, [&](grpc::ClientContext* context) {
    return lease_->LeaseRevoke(context, request, &response);
  });
}

grpc::Status etcd_client::time_to_live_now(std::int64_t lease_id,
                                           pb::LeaseTimeToLiveResponse& response,
                                           std::chrono::nanoseconds timeout) {
  pb::LeaseTimeToLiveRequest request;
  request.set_id(lease_id);
  return blocking(timeout, [&](grpc::ClientContext* context) {
    return lease_->LeaseTimeToLive(context, request, &response);
  });
}

void etcd_client::grant(pb::LeaseGrantRequest request, std::chrono::nanoseconds timeout,
                        reply_handler<pb::LeaseGrantResponse> done) {
  unary(std::move(request), timeout,
        [this](auto* context, auto* req, auto* resp, auto callback) {
          lease_->async()->LeaseGrant(context, req, resp, std::move(callback));
        },
        std::move(done));
}

void etcd_client::revoke(pb::LeaseRevokeRequest request, std::chrono::nanoseconds timeout,
                         reply_handler<pb::LeaseRevokeResponse> done) {
  unary(std::move(request), timeout,
        [this](auto* context, auto* req, auto* resp, auto callback) {
          lease_->async()->LeaseRevoke(context, req, resp, std::move(callback));
        },
        std::move(done));
}

void etcd_client::shutdown(std::chrono::nanoseconds grace) {
  std::unique_lock lock(mutex_);
  shut_down_ = true;
  for (auto& [raw, call] : out_) {
    if (call.stream) call.context->TryCancel();
  }
  idle_.wait_for(lock, grace, [&] { return out_.empty(); });
  for (auto& [raw, call] : out_) call.context->TryCancel();
  idle_.wait(lock, [&] { return out_.empty(); });
}

std::string prefix_end(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

bool is_stale_token(const std::string& message) {
  return message.find("invalid auth token") != std::string::npos ||
         message.find("revision of auth store is old") != std::string::npos;
}

bool is_stale_token(const grpc::Status& status) {
  return !status.ok() && is_stale_token(status.error_message());
}

bool is_transient(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return true;
    default:
      // "etcdserver: leader changed", "no leader", "request timed out": a member between
      // leaders answers these, and the next try usually lands.
      return status.error_message().find("leader") != std::string::npos ||
             status.error_message().find("timed out") != std::string::npos;
  }
}

std::string describe(const grpc::Status& status) {
  static constexpr const char* names[] = {
      "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
      "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
      "UNAUTHENTICATED"};
  const auto code = static_cast<std::size_t>(status.error_code());
  std::string text = code < std::size(names) ? names[code] : "code " + std::to_string(code);
  if (!status.error_message().empty()) text += ": " + status.error_message();
  return text;
}

}  // namespace dlock::etcd::detail
