#include "backend.hpp"

#include <algorithm>
#include <stdexcept>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <dlock/core/backend/naming.hpp>

namespace dlock::memory::detail {

namespace {

lock_party party_of(const acquire_request& request) {
  lock_party party;
  if (request.kind == resource_kind::semaphore) {
    party.kind = party_kind::semaphore_slot;
  } else if (request.kind == resource_kind::reader_writer_lock) {
    party.kind = request.mode == lock_mode::shared ? party_kind::read : party_kind::write;
  }
  party.since = std::chrono::system_clock::now();
  party.owner = request.owner;
  return party;
}

}  // namespace

/// One acquire queued in a domain. Its fields are guarded by the domain's mutex.
class memory_acquire final : public acquire_operation {
 public:
  memory_acquire(std::shared_ptr<memory_domain> domain, acquire_request request,
                 acquire_completion done, boost::asio::any_io_executor executor)
      : domain(std::move(domain)),
        request(std::move(request)),
        done(std::move(done)),
        executor(std::move(executor)) {}

  void cancel() noexcept override { domain->withdraw(this); }

  std::shared_ptr<memory_domain> domain;
  acquire_request request;
  acquire_completion done;
  boost::asio::any_io_executor executor;
  std::chrono::system_clock::time_point since = std::chrono::system_clock::now();
  bool completed = false;
  /// Wakes the queue when a minimum hold ends: no release comes then.
  std::optional<boost::asio::steady_timer> hold_timer;
};

/// A grant in a domain. `attached` is guarded by the domain's mutex: break_name() detaches a
/// lease (its grant is gone) and its later release() is then a no-op.
class memory_lease final : public lease {
 public:
  memory_lease(std::shared_ptr<memory_domain> domain, std::string key,
               const acquire_request& request, std::uint64_t token)
      : lease(token), domain(std::move(domain)), key(std::move(key)), mode(request.mode),
        semaphore(request.kind == resource_kind::semaphore), party(party_of(request)) {
    party.fencing_token = token;
  }
  ~memory_lease() override {
    if (!released_) domain->release(this);
  }
  void release() override {
    released_ = true;
    domain->release(this);
  }

  std::shared_ptr<memory_domain> domain;
  std::string key;
  lock_mode mode;
  bool semaphore;
  lock_party party;
  bool attached = true;

 private:
  bool released_ = false;
};

std::shared_ptr<memory_domain> memory_domain::named(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<memory_domain>> domains;
  std::lock_guard lock(mutex);
  auto& domain = domains[name];
  if (!domain) domain = std::make_shared<memory_domain>(name);
  return domain;
}

// A lock and the reader-writer lock of one name are one resource, as in the file backend
// (and flock(1)); a semaphore of that name is another, and the upgrade gate a third.
std::string memory_domain::key_of(const acquire_request& request) {
  switch (request.kind) {
    case resource_kind::semaphore: return "S" + request.name;
    case resource_kind::upgrade_gate: return "G" + request.name;
    case resource_kind::election: return "E" + request.name;
    case resource_kind::lock:
    case resource_kind::reader_writer_lock: break;
  }
  return "L" + request.name;
}

void memory_domain::check_max_count(resource& r, const acquire_request& request) const {
  if (request.kind != resource_kind::semaphore) return;
  if (r.max_count == 0) r.max_count = request.max_count;
  if (r.max_count != request.max_count) {
    throw std::invalid_argument("dlock: memory " + name_ + ": semaphore '" +
                                naming::quote_for_message(request.name) +
                                "' is used with max_count " + std::to_string(request.max_count) +
                                " here but " + std::to_string(r.max_count) + " by its holders");
  }
}

bool memory_domain::grantable(const resource& r, const acquire_request& request) {
  if (request.kind == resource_kind::semaphore) return r.slots < r.max_count;
  if (std::chrono::steady_clock::now() < r.held_until) return false;
  if (request.mode == lock_mode::shared) return !r.writer;
  return !r.writer && r.readers == 0;
}

std::unique_ptr<lease> memory_domain::grant(const std::string& key, resource& r,
                                            const acquire_request& request) {
  if (request.kind == resource_kind::semaphore) {
    ++r.slots;
  } else if (request.mode == lock_mode::shared) {
    ++r.readers;
  } else {
    r.writer = true;
    if (request.min_hold > std::chrono::nanoseconds::zero()) {
      r.held_until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         request.min_hold);
    }
  }
  auto granted = std::make_unique<memory_lease>(shared_from_this(), key, request, ++last_token_);
  r.holders.push_back(granted.get());
  return granted;
}

void memory_domain::serve_queue(const std::string& key, resource& r,
                                std::vector<completion>& done) {
  // Strict arrival order: a waiting writer holds back the readers queued behind it.
  while (!r.queue.empty() && grantable(r, r.queue.front()->request)) {
    auto op = std::move(r.queue.front());
    r.queue.pop_front();
    op->completed = true;
    auto granted = grant(key, r, op->request);
    done.push_back({std::move(op), nullptr, std::move(granted)});
  }
}

// Each waiter queued behind a minimum hold wakes the queue when the hold ends, on its own
// provider's executor: the waiter of a provider that goes is withdrawn, and the others still
// wake.
void memory_domain::wake_after_hold(const std::string& key, resource& r) {
  if (r.held_until <= std::chrono::steady_clock::now()) return;
  for (const auto& op : r.queue) {
    if (op->hold_timer && op->hold_timer->expiry() >= r.held_until) continue;
    op->hold_timer.emplace(op->executor, r.held_until);
    op->hold_timer->async_wait(
        [domain = shared_from_this(), key](const boost::system::error_code& error) {
          if (!error) domain->serve(key);
        });
  }
}

void memory_domain::serve(const std::string& key) {
  std::vector<completion> done;
  {
    std::lock_guard lock(mutex_);
    auto it = resources_.find(key);
    if (it == resources_.end()) return;
    serve_queue(key, it->second, done);
    forget_if_idle(it);
  }
  complete(done);
}

void memory_domain::forget_if_idle(std::map<std::string, resource>::iterator it) {
  if (it->second.idle()) resources_.erase(it);
}

void memory_domain::complete(std::vector<completion>& done) {
  for (auto& c : done) {
    auto executor = c.op->executor;
    boost::asio::post(executor, [c = std::move(c)]() mutable {
      auto finish = std::move(c.op->done);
      finish(std::move(c.error), std::move(c.granted));
    });
  }
}

std::unique_ptr<lease> memory_domain::try_now(const acquire_request& request) {
  std::lock_guard lock(mutex_);
  const std::string key = key_of(request);
  auto it = resources_.try_emplace(key).first;
  resource& r = it->second;
  try {
    check_max_count(r, request);
  } catch (...) {
    forget_if_idle(it);
    throw;
  }
  if (r.queue.empty() && grantable(r, request)) return grant(key, r, request);
  forget_if_idle(it);
  return nullptr;
}

std::uint32_t memory_domain::current_count(const acquire_request& request) {
  std::lock_guard lock(mutex_);
  auto it = resources_.find(key_of(request));
  if (it == resources_.end()) return request.max_count;
  check_max_count(it->second, request);
  return it->second.max_count - it->second.slots;
}

bool memory_domain::start(const std::shared_ptr<memory_acquire>& op) {
  std::vector<completion> done;
  bool queued = false;
  {
    std::lock_guard lock(mutex_);
    const std::string key = key_of(op->request);
    auto it = resources_.try_emplace(key).first;
    resource& r = it->second;
    try {
      check_max_count(r, op->request);
      if (r.queue.empty() && grantable(r, op->request)) {
        op->completed = true;
        done.push_back({op, nullptr, grant(key, r, op->request)});
      } else if (!op->request.wait) {
        op->completed = true;
        done.push_back({op, nullptr, nullptr});
        forget_if_idle(it);
      } else {
        r.queue.push_back(op);
        queued = true;
        wake_after_hold(key, r);
      }
    } catch (...) {
      op->completed = true;
      done.push_back({op, std::current_exception(), nullptr});
      forget_if_idle(it);
    }
  }
  complete(done);
  return queued;
}

void memory_domain::withdraw(memory_acquire* op) {
  std::vector<completion> done;
  {
    std::lock_guard lock(mutex_);
    if (op->completed) return;
    const std::string key = key_of(op->request);
    auto it = resources_.find(key);
    if (it == resources_.end()) return;
    auto& queue = it->second.queue;
    auto queued = std::find_if(queue.begin(), queue.end(),
                               [op](const auto& waiting) { return waiting.get() == op; });
    if (queued == queue.end()) return;
    auto self = *queued;
    queue.erase(queued);
    self->completed = true;
    done.push_back({std::move(self), nullptr, nullptr});
    // A withdrawn writer may have been all that held back the readers behind it.
    serve_queue(key, it->second, done);
    forget_if_idle(it);
  }
  complete(done);
}

void memory_domain::release(memory_lease* released) {
  std::vector<completion> done;
  {
    std::lock_guard lock(mutex_);
    if (!released->attached) return;
    released->attached = false;
    auto it = resources_.find(released->key);
    if (it == resources_.end()) return;
    resource& r = it->second;
    std::erase(r.holders, released);
    forget_record(*released);
    if (released->semaphore) {
      --r.slots;
    } else if (released->mode == lock_mode::shared) {
      --r.readers;
    } else {
      r.writer = false;
    }
    serve_queue(released->key, r, done);
    wake_after_hold(released->key, r);
    forget_if_idle(it);
  }
  complete(done);
  if (released->key.starts_with('E')) tell_watchers(released->key.substr(1));
}

void memory_domain::break_name(const std::string& name) {
  std::vector<completion> done;
  std::vector<std::stop_source> lost;
  {
    std::lock_guard lock(mutex_);
    for (const std::string& key : {"L" + name, "S" + name, "G" + name, "E" + name}) {
      auto it = resources_.find(key);
      if (it == resources_.end()) continue;
      resource& r = it->second;
      for (memory_lease* holder : r.holders) {
        holder->attached = false;
        forget_record(*holder);
        lost.push_back(holder->lost_signal());
      }
      r.holders.clear();
      r.writer = false;
      r.readers = 0;
      r.slots = 0;
      serve_queue(key, r, done);
      forget_if_idle(it);
    }
  }
  // Outside the mutex: a stop_callback on a lost_token may release its handle at once.
  for (auto& signal : lost) signal.request_stop();
  complete(done);
  tell_watchers(name);
}

bool memory_domain::leads(const std::string& election, const lease& leadership) const {
  auto it = resources_.find("E" + election);
  if (it == resources_.end()) return false;
  const auto& holders = it->second.holders;
  return std::any_of(holders.begin(), holders.end(), [&](const memory_lease* holder) {
    return static_cast<const lease*>(holder) == &leadership;
  });
}

void memory_domain::forget_record(const memory_lease& released) {
  if (!released.key.starts_with('E')) return;
  auto it = records_.find(released.key.substr(1));
  if (it != records_.end() && it->second.term == released.fencing_token()) records_.erase(it);
}

// Upgrade gates are core's machinery, shown by the write or upgradeable read behind them.
void memory_domain::describe(const resource& r, lock_inspection& into) const {
  for (const memory_lease* holder : r.holders) into.holders.push_back(holder->party);
  for (const auto& waiting : r.queue) {
    lock_party party = party_of(waiting->request);
    party.since = waiting->since;
    into.waiters.push_back(std::move(party));
  }
  if (r.max_count != 0) into.max_count = r.max_count;
}

lock_inspection memory_domain::inspect(const std::string& name) {
  lock_inspection found{.name = name};
  std::lock_guard lock(mutex_);
  for (const std::string& key : {"L" + name, "S" + name}) {
    if (auto it = resources_.find(key); it != resources_.end()) describe(it->second, found);
  }
  return found;
}

std::vector<lock_inspection> memory_domain::list(const std::string& prefix) {
  std::map<std::string, lock_inspection> found;
  std::lock_guard lock(mutex_);
  for (const auto& [key, r] : resources_) {
    // Upgrade gates and elections are not locks a user lists.
    if (key[0] == 'G' || key[0] == 'E' || !std::string_view(key).substr(1).starts_with(prefix)) {
      continue;
    }
    const std::string name = key.substr(1);
    auto& entry = found.try_emplace(name, lock_inspection{.name = name}).first->second;
    describe(r, entry);
  }
  std::vector<lock_inspection> listed;
  for (auto& [name, entry] : found) listed.push_back(std::move(entry));
  return listed;
}

memory_backend::memory_backend(const std::string& domain)
    : domain_(memory_domain::named(domain)) {}

memory_backend::~memory_backend() { io().stop(); }

std::string memory_backend::endpoint() const {
  return domain_->name().empty() ? "(default domain)" : domain_->name();
}

std::unique_ptr<lease> memory_backend::try_acquire_inline(const acquire_request& request) {
  return domain_->try_now(request);
}

std::shared_ptr<acquire_operation> memory_backend::start_acquire(acquire_request request,
                                                                 acquire_completion done) {
  auto op = std::make_shared<memory_acquire>(domain_, std::move(request), std::move(done),
                                             executor());
  if (domain_->start(op)) events().acquire_waiting();
  return op;
}

}  // namespace dlock::memory::detail
