// The driver of a queue_recipe_machine (see dlock/core/backend/queue_recipe.hpp).
#include <dlock/core/backend/queue_recipe.hpp>

namespace dlock {

bool queue_recipe::call_answered() {
  using action = queue_recipe_machine::action;
  const auto todo = machine_.on(event::call_answered);
  if (todo.contains(action::read_answer)) return true;
  perform(todo);
  return false;
}

void queue_recipe::perform(const queue_recipe_machine::actions& todo) {
  using action = queue_recipe_machine::action;
  for (const action a : todo) {
    switch (a) {
      case action::queue_key: steps_.queue_key(); break;
      case action::read_answer: break;  // only call_answered() returns it
      case action::list_queue: steps_.list_queue(); break;
      case action::watch_predecessor: steps_.watch_predecessor(); break;
      case action::delete_own_key: steps_.delete_own_key(); break;
      case action::abandon_own_key: steps_.abandon_own_key(); break;
      case action::report_granted: steps_.report(outcome::granted); break;
      case action::report_declined: steps_.report(outcome::declined); break;
      case action::report_failed: steps_.report(outcome::failed); break;
    }
  }
}

}  // namespace dlock
