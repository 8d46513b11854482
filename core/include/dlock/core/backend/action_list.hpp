// dlock/core/backend/action_list.hpp: dlock::action_list, what one event of a phase machine
// asks for (for backend implementers; queue_recipe_machine.hpp, and core's acquire machine).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>

namespace dlock {

/// Up to `Capacity` actions of type `Action`, in the order they are to be performed: a fixed
/// array, so that feeding a machine allocates nothing.
template <class Action, std::size_t Capacity>
class action_list {
 public:
  /// Requires: fewer than Capacity actions so far.
  void push(Action a) { items_[size_++] = a; }
  const Action* begin() const { return items_.data(); }
  const Action* end() const { return items_.data() + size_; }
  std::size_t size() const { return size_; }
  bool contains(Action a) const { return std::find(begin(), end(), a) != end(); }

 private:
  std::array<Action, Capacity> items_{};
  std::size_t size_ = 0;
};

}  // namespace dlock
