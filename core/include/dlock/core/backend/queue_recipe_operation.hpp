// dlock/core/backend/queue_recipe_operation.hpp: dlock::queue_recipe_operation, the base of a
// backend's acquire that drives a queue_recipe (for backend implementers; etcd's and
// ZooKeeper's acquires derive from it). Start with queue_recipe_machine.hpp for the phases.
#pragma once

#include <memory>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>

#include <dlock/core/backend/backend.hpp>
#include <dlock/core/backend/queue_recipe.hpp>

namespace dlock {

/// An acquire_operation whose phases are a queue_recipe's. `Op`, the backend's acquire, derives
/// from it and implements queue_recipe::steps with its client; start() and cancel() post to
/// the backend's io thread, where the recipe starts and withdraws and every step runs.
template <class Op>
class queue_recipe_operation : public acquire_operation,
                               protected queue_recipe::steps,
                               public std::enable_shared_from_this<Op> {
 public:
  /// Makes `Op` of `request` for `backend` and starts it; `done` runs once on the io thread.
  template <class Backend>
  static std::shared_ptr<acquire_operation> launch(std::shared_ptr<Backend> backend,
                                                   acquire_request request,
                                                   acquire_completion done) {
    const bool waits = request.wait;
    auto op = std::make_shared<Op>(std::move(backend), std::move(request), std::move(done));
    op->start(waits);
    return op;
  }

  void cancel() noexcept override {
    boost::asio::post(executor_, [self = this->shared_from_this()] {
      self->recipe_.feed(queue_recipe::event::withdraw);
    });
  }

 protected:
  using event = queue_recipe::event;

  explicit queue_recipe_operation(boost::asio::any_io_executor executor)
      : executor_(std::move(executor)) {}

  /// Starts the recipe on the io thread; `waits` is false for a one-shot attempt.
  void start(bool waits) {
    boost::asio::post(executor_, [self = this->shared_from_this(), waits] {
      // A withdrawal may have come first (then the recipe is done).
      if (self->recipe_.current() == queue_recipe::phase::idle) self->recipe_.start(waits);
    });
  }

  /// The continuation of a call, run only while its answer still counts (queue_recipe::step).
  template <class Step>
  auto step(Step next) {
    return recipe_.step(this->shared_from_this(), std::move(next));
  }

  boost::asio::any_io_executor executor_;
  queue_recipe recipe_{*this};
};

}  // namespace dlock
