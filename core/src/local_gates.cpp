#include "local_gates.hpp"

namespace dlock::detail {

std::string local_gates::key_of(const lock_target& target) {
  std::string key(1, static_cast<char>('0' + static_cast<int>(target.kind)));
  return key + target.name;
}

bool local_gates::try_enter(const std::string& key) {
  std::lock_guard lock(mutex_);
  return gates_.try_emplace(key).second;
}

bool local_gates::enter(const std::string& key, const std::shared_ptr<acquire_op>& op) {
  std::lock_guard lock(mutex_);
  auto [it, inserted] = gates_.try_emplace(key);
  if (!inserted) it->second.push_back(op);
  return inserted;
}

std::shared_ptr<acquire_op> local_gates::leave(const std::string& key) {
  std::lock_guard lock(mutex_);
  auto it = gates_.find(key);
  if (it == gates_.end()) return nullptr;
  if (it->second.empty()) {
    gates_.erase(it);
    return nullptr;
  }
  auto next = std::move(it->second.front());
  it->second.pop_front();
  return next;
}

bool local_gates::withdraw(const std::string& key, const acquire_op* op) {
  std::lock_guard lock(mutex_);
  auto it = gates_.find(key);
  if (it == gates_.end()) return false;
  auto& waiting = it->second;
  for (auto w = waiting.begin(); w != waiting.end(); ++w) {
    if (w->get() == op) {
      waiting.erase(w);
      return true;
    }
  }
  return false;
}

}  // namespace dlock::detail
