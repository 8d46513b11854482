// Private to dlock::etcd: a gRPC bidirectional stream whose events run on the provider's
// executor (the Watch and LeaseKeepAlive streams).
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include <boost/asio/post.hpp>
#include <grpcpp/grpcpp.h>

#include "client.hpp"

namespace dlock::etcd::detail {

/// One stream: write() queues requests (gRPC takes one write at a time), every response and
/// the final status are posted to the client's executor. The stream keeps itself alive until
/// gRPC is done with it; cancel() ends it early. After on_done, nothing more is delivered.
///
/// Thread safety: write() and cancel() from any thread.
template <class Request, class Response>
class bidi_stream final : public grpc::ClientBidiReactor<Request, Response> {
 public:
  using read_handler = std::function<void(Response)>;
  using done_handler = std::function<void(grpc::Status)>;

  /// Opens a stream with `start(context, reactor)` (the stub's async() call).
  template <class Start>
  static std::shared_ptr<bidi_stream> open(etcd_client& client, Start start,
                                           read_handler on_read, done_handler on_done) {
    std::shared_ptr<bidi_stream> stream(
        new bidi_stream(client, std::move(on_read), std::move(on_done)));
    stream->self_ = stream;
    start(stream->context_.get(), stream.get());
    stream->StartRead(&stream->response_);
    stream->AddHold();  // writes come later; the stream stays until cancel() or the end
    stream->StartCall();
    return stream;
  }

  void write(Request request) {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    queue_.push_back(std::move(request));
    if (queue_.size() == 1) this->StartWrite(&queue_.front());
  }

  void cancel() { context_->TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The stream is ending: no new writes; the hold goes once no write is in flight.
      bool release = false;
      {
        std::lock_guard lock(mutex_);
        finished_ = true;
        release = queue_.empty() && !std::exchange(released_hold_, true);
      }
      if (release) this->RemoveHold();
      return;
    }
    boost::asio::post(client_.executor(),
                      [on_read = on_read_, response = std::move(response_)]() mutable {
                        on_read(std::move(response));
                      });
    response_ = Response{};
    this->StartRead(&response_);
  }

  void OnWriteDone(bool /*ok: a failed write also fails the read, which ends the stream*/) override {
    bool release = false;
    {
      std::lock_guard lock(mutex_);
      queue_.pop_front();
      if (finished_) {
        queue_.clear();
        release = !std::exchange(released_hold_, true);
      } else if (!queue_.empty()) {
        this->StartWrite(&queue_.front());
      }
    }
    if (release) this->RemoveHold();
  }

  void OnDone(const grpc::Status& status) override {
    boost::asio::post(client_.executor(), [on_done = on_done_, status] { on_done(status); });
    // Untracked last, once this stream may be gone: shutdown() returns after it, and a
    // stream still alive then would outlive its provider.
    etcd_client& client = client_;
    const auto context = context_;
    self_.reset();  // may destroy this
    client.stream_done(context);
  }

 private:
  bidi_stream(etcd_client& client, read_handler on_read, done_handler on_done)
      : client_(client),
        context_(client.stream_context()),
        on_read_(std::move(on_read)),
        on_done_(std::move(on_done)) {}

  etcd_client& client_;
  std::shared_ptr<grpc::ClientContext> context_;
  read_handler on_read_;
  done_handler on_done_;
  Response response_;
  std::mutex mutex_;
  std::deque<Request> queue_;
  bool finished_ = false;
  bool released_hold_ = false;
  std::shared_ptr<bidi_stream> self_;
};

}  // namespace dlock::etcd::detail
