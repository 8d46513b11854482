// Exit codes of the dlock command (docs/cli.md), from sysexits.h where one fits.
#pragma once

namespace dlock::cli {

inline constexpr int exit_usage = 64;        ///< EX_USAGE: bad option, URL or name
inline constexpr int exit_unavailable = 69;  ///< EX_UNAVAILABLE: backend unreachable or failing
inline constexpr int exit_internal = 70;     ///< EX_SOFTWARE: a bug in dlock
inline constexpr int exit_os_error = 71;     ///< EX_OSERR: fork, pipe or signal setup failed
inline constexpr int exit_lock_lost = 75;    ///< EX_TEMPFAIL: the lock was lost under the command
inline constexpr int exit_not_executable = 126;
inline constexpr int exit_not_found = 127;
inline constexpr int exit_signal_base = 128;  ///< 128 + N: killed by (or interrupted by) signal N

}  // namespace dlock::cli
