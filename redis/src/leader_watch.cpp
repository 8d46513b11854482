#include "leader_watch.hpp"

#include <mutex>
#include <vector>

#include <boost/asio/post.hpp>

#include "backend.hpp"

namespace dlock::redis::detail {

namespace {

// The observer's callback, and whether it may still be called: guarded, so that once the
// watch is destroyed no listener still running on the network thread calls it.
struct observer {
  std::mutex mutex;
  std::function<void()> changed;

  void tell() {
    std::lock_guard lock(mutex);
    if (changed) changed();
  }
  void stop() {
    std::lock_guard lock(mutex);
    changed = nullptr;
  }
  bool stopped() {
    std::lock_guard lock(mutex);
    return !changed;
  }
};

// One channel on one node. A lost subscription (the connection dropped, the slot moved) is
// listened to again: node_set routes it where the channel now lives.
class channel_watch final : public channel_listener,
                            public std::enable_shared_from_this<channel_watch> {
 public:
  channel_watch(std::weak_ptr<redis_backend> backend, std::size_t node, std::string channel,
                std::shared_ptr<observer> told)
      : backend_(std::move(backend)), node_(node), channel_(std::move(channel)),
        told_(std::move(told)) {}

  // On the network thread.
  void listen() {
    if (told_->stopped()) return;
    if (auto backend = backend_.lock()) backend->nodes().listen(node_, channel_, shared_from_this());
  }
  void unlisten() {
    if (auto backend = backend_.lock()) backend->nodes().unlisten(node_, channel_, this);
  }

  void on_channel_event(channel_event event) override {
    told_->tell();
    if (event == channel_event::lost) listen();
  }

 private:
  std::weak_ptr<redis_backend> backend_;
  std::size_t node_;
  std::string channel_;
  std::shared_ptr<observer> told_;
};

// The watch the board hands out: its destruction stops the callback at once and unsubscribes
// on the network thread.
class leader_watch {
 public:
  leader_watch(const std::shared_ptr<redis_backend>& backend,
               std::vector<std::shared_ptr<channel_watch>> channels, std::shared_ptr<observer> told)
      : network_(backend->network_executor()), channels_(std::move(channels)),
        told_(std::move(told)) {
    boost::asio::post(network_, [channels = channels_] {
      for (const auto& c : channels) c->listen();
    });
  }
  leader_watch(const leader_watch&) = delete;
  leader_watch& operator=(const leader_watch&) = delete;
  ~leader_watch() {
    told_->stop();
    boost::asio::post(network_, [channels = std::move(channels_)] {
      for (const auto& c : channels) c->unlisten();
    });
  }

 private:
  boost::asio::any_io_executor network_;
  std::vector<std::shared_ptr<channel_watch>> channels_;
  std::shared_ptr<observer> told_;
};

}  // namespace

std::string leader_channel(const key_set& keys) { return keys.keys.at(3) + ":changed"; }

std::shared_ptr<void> watch_leader(const std::shared_ptr<redis_backend>& backend,
                                   const key_set& keys, std::function<void()> changed) {
  auto told = std::make_shared<observer>();
  told->changed = std::move(changed);
  std::vector<std::shared_ptr<channel_watch>> channels;
  for (std::size_t i = 0; i < backend->nodes().size(); ++i) {
    for (const std::string& channel : {leader_channel(keys), keys.channel}) {
      channels.push_back(std::make_shared<channel_watch>(backend, i, channel, told));
    }
  }
  return std::make_shared<leader_watch>(backend, std::move(channels), std::move(told));
}

}  // namespace dlock::redis::detail
