// The file backend's election board: the leader record inside the election's lock file,
// after its fencing counter, read as the leader's only while that file is flock'ed and the
// counter still shows the record's term. Observers are told of writes to the file (inotify,
// file_backend::watch_leader) and still read every poll period: when a leader dies, the kernel
// reports its close before it drops the flock, so the read that event causes may still find
// the lock held, and nothing is reported after.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <dlock/core/backend/election.hpp>
#include <dlock/core/backend/naming.hpp>
#include <dlock/core/errors.hpp>

#include "backend.hpp"
#include "lease.hpp"

namespace dlock::file::detail {

namespace {

class file_election_board final : public election_board {
 public:
  explicit file_election_board(std::shared_ptr<file_backend> backend)
      : backend_(std::move(backend)) {}

  void proclaim(std::string_view election, const lease& leadership,
                std::string_view value) override {
    const file_lease& held = held_file(leadership);
    guarded(election, [&] {
      if (held.lost() || !path_names_fd(held.path(), held.fd()) ||
          !write_leader_record(held.fd(), held.fencing_token(), value)) {
        throw lock_lost_error(said("the lead of term " + std::to_string(held.fencing_token()) +
                                       " is over; proclaim refused",
                                   election));
      }
    });
  }

  void withdraw(std::string_view election, const lease& leadership) override {
    const file_lease& held = held_file(leadership);
    guarded(election, [&] {
      // A replaced file is another leader's: its record is not ours to clear.
      if (path_names_fd(held.path(), held.fd())) {
        clear_leader_record(held.fd(), held.fencing_token());
      }
    });
  }

  std::optional<leader_info> leader(std::string_view election) override {
    std::optional<leader_info> found;
    guarded(election, [&] {
      const auto path = backend_->directory() / backend_->election_file_name(election);
      unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
      if (!fd) {
        if (errno == ENOENT) return;
        throw file_failure{"open(" + path.string() + "): " + std::strerror(errno)};
      }
      struct stat file {};
      if (::fstat(fd.get(), &file) != 0) {
        throw file_failure{"fstat(" + path.string() + "): " + std::strerror(errno)};
      }
      // A record outlives a holder that crashed; only a held lock makes it the leader's.
      if (!is_flocked(flocked_files(), file)) return;
      found = read_leader_record(fd.get());
    });
    return found;
  }

  std::shared_ptr<void> watch(std::string_view election, std::function<void()> changed) override {
    return backend_->watch_leader(backend_->election_file_name(election), std::move(changed));
  }

 private:
  static const file_lease& held_file(const lease& leadership) {
    return dynamic_cast<const file_lease&>(leadership);
  }

  std::string said(const std::string& what, std::string_view election) const {
    return backend_->message(what + " for election '" + naming::quote_for_message(election) +
                             "'");
  }

  template <typename Work>
  void guarded(std::string_view election, Work work) const {
    try {
      work();
    } catch (const file_failure& failure) {
      throw connection_error(said(failure.what, election));
    }
  }

  std::shared_ptr<file_backend> backend_;
};

}  // namespace

std::shared_ptr<election_board> file_backend::elections() {
  return std::make_shared<file_election_board>(shared_from_this());
}

}  // namespace dlock::file::detail
