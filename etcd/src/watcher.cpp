#include "watcher.hpp"

#include <utility>
#include <vector>

#include "etcd/mvcc/mvccpb/kv.pb.h"

namespace dlock::etcd::detail {

std::uint64_t watcher::watch(std::string key, std::string range_end,
                             std::int64_t start_revision, handler on_event,
                             created_handler on_created) {
  return add(entry{std::move(key), std::move(range_end), start_revision, std::move(on_event),
                   std::move(on_created)});
}

std::uint64_t watcher::follow(std::string key, std::string range_end, handler on_event,
                              created_handler on_created) {
  return add(entry{std::move(key), std::move(range_end), 0, std::move(on_event),
                   std::move(on_created), true});
}

std::uint64_t watcher::add(entry e) {
  const std::uint64_t id = next_id_++;
  auto [it, inserted] = watches_.emplace(id, std::move(e));
  if (closed_) return id;
  if (stream_) {
    send_create(id, it->second);
  } else {
    ensure_stream();  // sends every watch
  }
  return id;
}

void watcher::cancel(std::uint64_t id) {
  if (watches_.erase(id) == 0 || !stream_) return;
  pb::WatchRequest request;
  request.mutable_cancel_request()->set_watch_id(static_cast<std::int64_t>(id));
  stream_->write(std::move(request));
}

void watcher::close() {
  closed_ = true;
  watches_.clear();
  if (stream_) stream_->cancel();
  stream_.reset();
}

void watcher::ensure_stream() {
  auto self = weak_from_this();
  // Weak: the stream keeps its handlers, so a strong pointer here would keep it forever.
  auto opened = std::make_shared<std::weak_ptr<stream>>();
  stream_ = stream::open(
      client_,
      [this](grpc::ClientContext* context, stream* reactor) {
        client_.watch_stub().async()->Watch(context, reactor);
      },
      [self](pb::WatchResponse response) {
        if (auto me = self.lock()) me->on_response(response);
      },
      [self, opened](grpc::Status) {
        auto me = self.lock();
        auto ended = opened->lock();
        if (me && ended) me->on_stream_done(ended);
      });
  *opened = stream_;
  for (const auto& [id, e] : watches_) send_create(id, e);
}

void watcher::send_create(std::uint64_t id, const entry& e) {
  pb::WatchRequest request;
  auto& create = *request.mutable_create_request();
  create.set_key(e.key);
  if (!e.range_end.empty()) create.set_range_end(e.range_end);
  create.set_start_revision(e.start_revision);
  if (!e.follows) create.add_filters(pb::WatchCreateRequest::NOPUT);
  create.set_watch_id(static_cast<std::int64_t>(id));
  stream_->write(std::move(request));
}

void watcher::on_response(const pb::WatchResponse& response) {
  const auto id = static_cast<std::uint64_t>(response.watch_id());
  if (response.canceled()) {
    // A stream keeps the token it was opened with; once etcd has forgotten that token it
    // cancels every watch created on the stream. So the stream ends here: the watches look
    // again (a read, which logs in again) and go out on a new stream with the new token.
    if (is_stale_token(response.cancel_reason()) && stream_) {
      auto ended = stream_;
      ended->cancel();
      return on_stream_done(ended);
    }
    return fire(id, watch_event::recheck);
  }
  if (response.created()) {
    auto it = watches_.find(id);
    if (it != watches_.end() && it->second.on_created) {
      // Once: a watch created again on a new stream starts where it was asked to, not "now".
      auto on_created = std::move(it->second.on_created);
      it->second.on_created = nullptr;
      it->second.start_revision = response.header().revision() + 1;
      on_created(response.header().revision());
    }
  }
  if (response.events().empty()) return;
  if (auto it = watches_.find(id); it != watches_.end() && it->second.follows) {
    handler on_event = it->second.on_event;  // a copy: the handler may cancel the watch
    return on_event(watch_event::changed);
  }
  for (const auto& event : response.events()) {
    if (event.type() == mvccpb::Event::DELETE) return fire(id, watch_event::deleted);
  }
}

void watcher::on_stream_done(const std::shared_ptr<stream>& ended) {
  if (stream_ != ended || closed_) return;  // an older stream, or closed on purpose
  stream_.reset();
  std::vector<std::uint64_t> ids;
  for (const auto& [id, e] : watches_) ids.push_back(id);
  for (std::uint64_t id : ids) fire(id, watch_event::recheck);
}

void watcher::fire(std::uint64_t id, watch_event event) {
  auto it = watches_.find(id);
  if (it == watches_.end()) return;
  handler on_event = std::move(it->second.on_event);
  cancel(id);
  on_event(event);
}

}  // namespace dlock::etcd::detail
