// The phases of one queue-recipe acquire (see dlock/core/backend/queue_recipe_machine.hpp).
#include <dlock/core/backend/queue_recipe_machine.hpp>

#include <array>
#include <cstddef>
#include <stdexcept>

namespace dlock {

queue_recipe_machine::actions queue_recipe_machine::start(bool waits) {
  if (phase_ != phase::idle) throw std::logic_error("dlock: a queue recipe started twice");
  waits_ = waits;
  phase_ = phase::queueing;
  actions out;
  out.push(action::queue_key);
  return out;
}

queue_recipe_machine::actions queue_recipe_machine::on(event e) {
  actions out;
  // Before the start only a withdrawal means something; after the end nothing does.
  if (phase_ == phase::done) return out;
  if (phase_ == phase::idle) return e == event::withdraw ? report(action::report_declined) : out;
  const bool queueing = phase_ == phase::queueing;
  switch (e) {
    case event::call_sent:
      ++calls_out_;
      return out;
    case event::call_answered:
      if (calls_out_ == 0) return out;  // nothing of ours was out
      --calls_out_;
      return on_call_answered();
    case event::call_failed:
      if (calls_out_ > 0) --calls_out_;
      if (queueing || phase_ == phase::withdrawing) return fail();
      return on_call_answered();
    case event::failed:
      if (queueing || phase_ == phase::withdrawing) return fail();
      return out;
    case event::connection_lost:
      // A withdrawal ends on its own: its delete answers once the client gives up.
      if (queueing) return fail();
      return out;
    case event::first_in_queue:
      if (queueing) return report(action::report_granted);
      return out;
    case event::someone_in_front:
      if (!queueing) return out;
      if (!waits_) return withdraw();
      out.push(action::watch_predecessor);
      return out;
    case event::own_key_gone:
      if (queueing) out.push(action::queue_key);
      return out;
    case event::predecessor_gone:
      if (queueing) out.push(action::list_queue);
      return out;
    case event::withdraw:
      if (queueing) return withdraw();
      return out;
    case event::key_deleted:
      if (phase_ != phase::deleting) return out;
      if (calls_out_ == 0) return report(action::report_declined);
      // Something went out meanwhile and may create our key again: delete once it answered.
      phase_ = phase::withdrawing;
      return out;
  }
  return out;
}

queue_recipe_machine::actions queue_recipe_machine::on_call_answered() {
  actions out;
  switch (phase_) {
    case phase::queueing:
      out.push(action::read_answer);
      break;
    case phase::withdrawing:
      if (calls_out_ == 0) {
        phase_ = phase::deleting;
        out.push(action::delete_own_key);
      }
      break;
    case phase::abandoning:
      if (calls_out_ == 0) {
        phase_ = phase::done;
        out.push(action::abandon_own_key);
      }
      break;
    case phase::idle:
    case phase::deleting:
    case phase::done:
      break;
  }
  return out;
}

queue_recipe_machine::actions queue_recipe_machine::withdraw() {
  actions out;
  if (calls_out_ > 0) {
    // One of them may be creating our key: its answer tells us what to delete.
    phase_ = phase::withdrawing;
    return out;
  }
  phase_ = phase::deleting;
  out.push(action::delete_own_key);
  return out;
}

queue_recipe_machine::actions queue_recipe_machine::fail() {
  if (calls_out_ > 0) {
    auto out = report(action::report_failed);
    phase_ = phase::abandoning;
    return out;
  }
  actions out;
  out.push(action::abandon_own_key);
  out.push(action::report_failed);
  reported_ = true;
  phase_ = phase::done;
  return out;
}

queue_recipe_machine::actions queue_recipe_machine::report(action a) {
  actions out;
  out.push(a);
  reported_ = true;
  phase_ = phase::done;
  return out;
}

// In the order of each enum's values.
std::string_view name_of(queue_recipe_machine::phase p) {
  static constexpr std::array<std::string_view, queue_recipe_machine::all_phases.size()> names{
      "idle", "queueing", "withdrawing", "deleting", "abandoning", "done"};
  return names.at(static_cast<std::size_t>(p));
}

std::string_view name_of(queue_recipe_machine::event e) {
  static constexpr std::array<std::string_view, queue_recipe_machine::all_events.size()> names{
      "call_sent",        "call_answered", "call_failed",     "first_in_queue",
      "someone_in_front", "own_key_gone",  "predecessor_gone", "withdraw",
      "connection_lost",  "failed",        "key_deleted"};
  return names.at(static_cast<std::size_t>(e));
}

std::string_view name_of(queue_recipe_machine::action a) {
  static constexpr std::array<std::string_view, 9> names{
      "queue_key",       "read_answer",    "list_queue",      "watch_predecessor",
      "delete_own_key",  "abandon_own_key", "report_granted", "report_declined",
      "report_failed"};
  return names.at(static_cast<std::size_t>(a));
}

}  // namespace dlock
