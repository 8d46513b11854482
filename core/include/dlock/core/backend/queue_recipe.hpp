// dlock/core/backend/queue_recipe.hpp: dlock::queue_recipe, the driver of a
// queue_recipe_machine (for backend implementers; etcd and ZooKeeper).
//
// A backend's acquire owns one, implements queue_recipe::steps with its client, and tells it
// of every call it sends and every answer it gets; the recipe feeds the machine and performs
// what it returns on the steps. Start with queue_recipe_machine.hpp for the phases.
#pragma once

#include <memory>
#include <utility>

#include <dlock/core/backend/queue_recipe_machine.hpp>

namespace dlock {

class queue_recipe {
 public:
  using phase = queue_recipe_machine::phase;
  using event = queue_recipe_machine::event;
  enum class outcome { granted, declined, failed };

  /// The actions of queue_recipe_machine, performed with a backend's client. Each may feed
  /// the next event at once (a delete with nothing to delete feeds key_deleted).
  class steps {
   public:
    virtual void queue_key() = 0;
    virtual void list_queue() = 0;
    virtual void watch_predecessor() = 0;
    virtual void delete_own_key() = 0;
    virtual void abandon_own_key() = 0;
    /// Completes the caller: the last thing an action list asks for. After a failure the
    /// recipe may still be abandoning (done() says).
    virtual void report(outcome how) = 0;

   protected:
    ~steps() = default;
  };

  explicit queue_recipe(steps& backend) : steps_(backend) {}
  queue_recipe(const queue_recipe&) = delete;
  queue_recipe& operator=(const queue_recipe&) = delete;

  void start(bool waits) { perform(machine_.start(waits)); }
  /// Feeds `e` and performs what follows.
  void feed(event e) { perform(machine_.on(e)); }
  /// Counts a call going out, before it is sent (its answer may come at once).
  void call_sent() { machine_.on(event::call_sent); }
  /// Counts the answer of a call; true when the caller should read it (the acquire is still
  /// queueing). Otherwise the recipe did what the answer means (a withdrawal goes on).
  bool call_answered();
  /// Counts a call going out and returns its continuation, which runs `next(*op, answer...)`
  /// only while the answer still counts. `op` owns this recipe; the continuation keeps it.
  template <class Op, class Next>
  auto step(std::shared_ptr<Op> op, Next next) {
    call_sent();
    return [this, op = std::move(op), next = std::move(next)](auto&&... answer) mutable {
      if (call_answered()) next(*op, std::forward<decltype(answer)>(answer)...);
    };
  }

  phase current() const { return machine_.current(); }
  bool queueing() const { return current() == phase::queueing; }
  bool done() const { return current() == phase::done; }
  int calls_out() const { return machine_.calls_out(); }

 private:
  void perform(const queue_recipe_machine::actions& todo);

  queue_recipe_machine machine_;
  steps& steps_;
};

}  // namespace dlock
