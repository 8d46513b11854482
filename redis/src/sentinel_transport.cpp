#include "sentinel_transport.hpp"

#include <boost/asio/post.hpp>

#include "connection.hpp"
#include "sentinel_master.hpp"

namespace dlock::redis::detail {

namespace {

class sentinel_transport final : public transport {
 public:
  sentinel_transport(const boost::asio::any_io_executor& executor,
                     const server_settings& settings)
      : executor_(executor), master_(*settings.sentinel) {}

  ~sentinel_transport() override { alive_.reset(); }

  void async_open(open_handler done) override {
    done_ = std::move(done);
    ask(0);
  }
  void async_write(boost::asio::const_buffer bytes, io_handler done) override {
    inner_->async_write(bytes, std::move(done));
  }
  void async_read_some(boost::asio::mutable_buffer into, io_handler done) override {
    inner_->async_read_some(into, std::move(done));
  }
  void close() noexcept override {
    closed_ = true;
    if (inner_) inner_->close();
    // The question in flight: its connection goes (and with it its handler); the open
    // completes as aborted, later, as every open does.
    boost::asio::post(executor_, [asking = std::move(asking_)] {});
    if (done_) {
      boost::asio::post(executor_, [done = std::move(done_)]() mutable { done("closed"); });
    }
  }
  std::string failure_text(const boost::system::error_code& error) const override {
    return inner_ ? inner_->failure_text(error) : error.message();
  }
  int descriptor() noexcept override { return inner_ && !closed_ ? inner_->descriptor() : -1; }

 private:
  // Asks the n-th sentinel (in preference order) for the master; on no answer, the next.
  void ask(std::size_t n) {
    if (closed_) return;
    if (n == master_.sentinel_count()) {
      finish("no sentinel named the master: " + failures_);
      return;
    }
    const std::size_t index = master_.sentinel_index(n);
    // The previous question's connection may be the caller: it goes later.
    boost::asio::post(executor_, [asking = std::move(asking_)] {});
    asking_ = std::make_unique<connection>(executor_, master_.sentinel(index));
    ask_for_master(*asking_, master_.name(),
                   [this, alive = std::weak_ptr<bool>(alive_), n, index](
                       std::optional<master_address> at, const std::string& why) {
                       if (alive.expired() || closed_) return;
                       if (!at) {
                         const server_settings& s = master_.sentinel(index);
                         if (!failures_.empty()) failures_ += "; ";
                         failures_ += s.host + ":" + std::to_string(s.port) + ": " + why;
                         ask(n + 1);
                         return;
                       }
                       master_.learned(index, *at);
                       open_master(*at);
                     });
  }

  void open_master(const master_address& at) {
    boost::asio::post(executor_, [asking = std::move(asking_)] {});
    settings_ = master_.master_settings(at);
    inner_ = make_transport(executor_, settings_);
    inner_->async_open([this, alive = std::weak_ptr<bool>(alive_)](std::string failure) {
      if (alive.expired() || closed_) return;
      finish(failure.empty() ? std::string()
                             : "master " + settings_.host + ":" + std::to_string(settings_.port) +
                                   ": " + failure);
    });
  }

  void finish(std::string failure) {
    if (!done_) return;
    auto done = std::move(done_);
    done(std::move(failure));
  }

  boost::asio::any_io_executor executor_;
  sentinel_master& master_;
  open_handler done_;
  std::unique_ptr<connection> asking_;
  std::string failures_;
  server_settings settings_;  // the master's, once found; the inner transport refers to it
  std::unique_ptr<transport> inner_;
  bool closed_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace

std::unique_ptr<transport> make_sentinel_transport(const boost::asio::any_io_executor& executor,
                                                   const server_settings& settings) {
  return std::make_unique<sentinel_transport>(executor, settings);
}

}  // namespace dlock::redis::detail
