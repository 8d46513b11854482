// dlock/core/backend/queue_recipe_machine.hpp: dlock::queue_recipe_machine, the phases of one
// "queue a key, watch the one in front, withdraw on stop" acquire (for backend implementers).
//
// etcd's acquire (etcd/src/acquire.cpp) and ZooKeeper's (zookeeper/src/acquire.cpp) drive it:
// each performs the actions with its own client and feeds back what happened. What stays in
// a backend is how it reads a listing and the steps only its client needs (etcd's lease, a
// stale key deleted before claiming; ZooKeeper's node found again after a lost answer, a
// semaphore's two stages). Tested without a server in tests/unit/queue_recipe_machine_test.cpp.
#pragma once

#include <array>
#include <string_view>

#include <dlock/core/backend/action_list.hpp>

namespace dlock {

/// One acquire of the queue recipe, as a plain object fed events that returns the actions to
/// perform (sans-I/O, as Boost.Redis's exec_fsm and core's acquire machine).
///
/// Guarantees, whatever order the events come in: exactly one report (granted, declined or
/// failed) by the end; our key is either reported held or deleted; it is deleted only once no
/// call is out (a call out may be creating it); "declined" only once its delete answered. A
/// failure is reported at once, even with calls out: the caller of a partitioned client must
/// not wait for them; the key is abandoned once they answered.
///
/// Not thread-safe: an acquire feeds it from its io thread only.
class queue_recipe_machine {
 public:
  enum class phase {
    idle,         ///< not started
    queueing,     ///< creating our key, listing the queue, or watching the one in front
    withdrawing,  ///< asked to withdraw; waits for the calls out before deleting our key
    deleting,     ///< our key's delete is out; "declined" once it answers
    abandoning,   ///< the caller heard of a failure; our key goes once the calls out answered
    done,         ///< nothing more to do; late answers are dropped
  };
  static constexpr std::array all_phases{phase::idle,     phase::queueing,   phase::withdrawing,
                                         phase::deleting, phase::abandoning, phase::done};

  enum class event {
    call_sent,         ///< a call of the recipe went out (a create, a listing, a backend's own)
    call_answered,     ///< one came back; read it only if the machine says read_answer
    call_failed,       ///< one came back with an error that ends the acquire
    first_in_queue,    ///< the listing (last stage's, for a recipe of stages) admits us
    someone_in_front,  ///< the listing puts someone before us
    own_key_gone,      ///< our key is not in the queue any more (deleted, session expired)
    predecessor_gone,  ///< the watched key in front went (or changed)
    withdraw,          ///< core asked to withdraw: a stop or a timeout
    connection_lost,   ///< the session or lease is out of reach: the caller hears now
    failed,            ///< the recipe cannot go on (a refusal, a max_count mismatch)
    key_deleted,       ///< delete_own_key answered, either way
  };
  static constexpr std::array all_events{
      event::call_sent,        event::call_answered, event::call_failed,
      event::first_in_queue,   event::someone_in_front, event::own_key_gone,
      event::predecessor_gone, event::withdraw,      event::connection_lost,
      event::failed,           event::key_deleted};

  enum class action {
    queue_key,          ///< create our key in the queue (anew, after it was gone)
    read_answer,        ///< the answer just fed still counts: act on it
    list_queue,         ///< list the queue again
    watch_predecessor,  ///< watch the key in front (a one-shot attempt never gets this)
    delete_own_key,     ///< delete our key; feed key_deleted once the server answered
    abandon_own_key,    ///< delete our key without waiting for the answer
    report_granted,     ///< complete the caller with the lock
    report_declined,    ///< ... with "not obtained"
    report_failed,      ///< ... with the error
  };

  /// What one event asks for, in order; a report is always last. At most two actions.
  using actions = action_list<action, 2>;

  /// Begins, once: `waits` is false for a one-shot attempt, which withdraws instead of
  /// watching. Throws std::logic_error when not idle.
  actions start(bool waits);
  /// Feeds `e`. An event that means nothing in the current phase returns no action.
  actions on(event e);

  phase current() const { return phase_; }
  /// Calls sent and not answered yet.
  int calls_out() const { return calls_out_; }
  /// True once a report was returned; it is returned exactly once.
  bool reported() const { return reported_; }

 private:
  actions on_call_answered();
  actions withdraw();
  actions fail();
  actions report(action a);

  phase phase_ = phase::idle;
  int calls_out_ = 0;
  bool waits_ = true;
  bool reported_ = false;
};

std::string_view name_of(queue_recipe_machine::phase p);
std::string_view name_of(queue_recipe_machine::event e);
std::string_view name_of(queue_recipe_machine::action a);

}  // namespace dlock
