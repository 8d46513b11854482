// What a phase machine's event asked for, as a vector to compare and as text to print, and a
// row of its table: for the unit tests of core's machines (acquire_machine_test.cpp,
// queue_recipe_machine_test.cpp).
#pragma once

#include <string>
#include <type_traits>
#include <vector>

namespace support {

/// The actions of `actions` (a machine's action list), in order.
template <class Actions>
auto list(const Actions& actions) {
  using action = std::remove_cvref_t<decltype(*actions.begin())>;
  return std::vector<action>(actions.begin(), actions.end());
}

/// "{a, b}", each action by its name_of().
template <class Action>
std::string describe(const std::vector<Action>& actions) {
  std::string text = "{";
  for (const auto a : actions) {
    if (text.size() > 1) text += ", ";
    text += name_of(a);
  }
  return text + "}";
}

/// One row of a machine's table: what an event asks for, and the phase it leaves.
template <class Action, class Phase>
struct outcome {
  std::vector<Action> actions;
  Phase next;
};

}  // namespace support
