// Performing a SQL wait's actions (see sql_wait_io.hpp).
#include "sql_wait_io.hpp"

#include <optional>

namespace dlock::detail {

void sql_wait_io::perform(const sql_wait_machine& wait, const sql_wait_machine::actions& actions) {
  using action = sql_wait_machine::action;
  std::optional<action> reported;
  for (const auto a : actions) {
    switch (a) {
      case action::send_wait: send_wait(); break;
      case action::send_cancel: send_cancel(); break;
      case action::arm_cancel_retry: arm_cancel_retry(wait.cancel_retry_delay()); break;
      case action::arm_answer_timeout: arm_answer_timeout(); break;
      case action::arm_patience: arm_patience(); break;
      case action::abandon_session: abandon_session(); break;
      case action::give_back: give_back(); break;
      case action::report_granted:
        book_grant();
        reported = a;
        break;
      case action::report_declined:
      case action::report_failed: reported = a; break;
      case action::keep_session: keep_session(); break;
      case action::discard_session: discard_session(); break;
    }
  }
  if (reported) report(*reported);
}

}  // namespace dlock::detail
