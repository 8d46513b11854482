# shellcheck shell=bash disable=SC2154 # state_dir, partition_set, in_netns, ...: set by test-servers.sh
# What every server kind of test-servers.sh shares (sourced by it, not run): messages, the
# registry of groups and their modules, processes, ports, readiness waits, the test CA.
#
# A module (scripts/test-servers/<kind>.sh) calls `register_group GROUP KIND ID...` for each group
# it serves and defines its hooks as functions named KIND::HOOK, which the entry point and this
# file call through `group_hook GROUP HOOK ARGS...`. A group's ids are listed in launch order.
#
# Required hooks:
#   prerequisites GROUP        die, naming the Debian package, when a program is missing
#   launch ID                  start server ID in the background (setsid), write its pid file
#   answers ID                 a real request with a short timeout succeeds
#   is_process ID CMDLINE PORT whether the process with CMDLINE is server ID, not a reused pid
#   env GROUP                  print the group's `export DLOCK_TEST_...` lines
# Optional hooks (a group without one skips that step):
#   extra_ports ID             names of port files besides `port` (tls_port, peer_port, ...)
#   uses_test_ca               defined when the group needs the test CA before it starts
#   prepare GROUP              once before the launch attempts (initdb, install-db)
#   configure GROUP            before each launch attempt, once the ports are picked
#   before_wait GROUP          after launching, before the readiness wait; failure ends the attempt
#   after_ready GROUP          once every server answers (form a cluster, add users)
#   stop_signal ID             the graceful stop signal when it is not TERM
#   kill_connections ID GLOB PORT   end clients' connections; set `killed` to their number
#   remove GROUP               remove what the group keeps outside its server directories
#   partition_env GROUP PATH UPPER  the partition set's lines for one path

say() { echo "$program: $*" >&2; }

milliseconds_now() {
  local microseconds=${EPOCHREALTIME//[^0-9]/}
  echo $((10#$microseconds / 1000))
}

# "1.23": the seconds since `start` (from milliseconds_now).
seconds_since() {
  local elapsed=$(($(milliseconds_now) - $1))
  printf '%d.%02d' $((elapsed / 1000)) $((elapsed % 1000 / 10))
}

die() {
  say "$*"
  exit 1
}

# ---------------------------------------------------------------------------------------------
# The registry. Lookups are array reads, not subshells: group_of runs for every server checked.

all_groups=()
declare -A group_kind=() group_member_list=() group_of_id=()

register_group() {
  local group=$1 kind=$2 id
  shift 2
  all_groups+=("$group")
  group_kind[$group]=$kind
  group_member_list[$group]="$*"
  for id in "$@"; do group_of_id[$id]=$group; done
}

group_members() {
  [[ -n ${group_member_list[$1]:-} ]] || return 1
  echo "${group_member_list[$1]}"
}

group_of() {
  [[ -n ${group_of_id[$1]:-} ]] || return 1
  echo "${group_of_id[$1]}"
}

group_has_hook() { declare -F "${group_kind[$1]}::$2" >/dev/null; }

group_hook() {
  local group=$1 hook=$2
  shift 2
  "${group_kind[$group]}::$hook" "$@"
}

require_group() { group_members "$1" >/dev/null || die "unknown server group '$1' (${all_groups[*]})"; }
require_server_id() { group_of "$1" >/dev/null || die "unknown server id '$1' (see: $0 help)"; }

server_dir() { echo "$state_dir/$1"; }
server_log() { echo "$state_dir/$1/server.log"; }
server_port() { cat "$state_dir/$1/port" 2>/dev/null; }
recorded_pid() { cat "$state_dir/$1/pid" 2>/dev/null; }

# ---------------------------------------------------------------------------------------------
# Processes. Every server runs in its own session (setsid), so its process group id is its pid and
# a signal to the group also reaches PostgreSQL's backends.

# /proc files are read with `read`: under set -e, bash 5.2 exits from `$(<file)` when the file
# is gone (a process that just ended) even inside `|| ...`.
process_state() {
  local stat
  read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
  stat=${stat##*) }
  echo "${stat%% *}"
}

process_alive() {
  local state
  state=$(process_state "$1") || return 1
  [[ $state != Z && $state != X ]]
}

process_group_alive() {
  local stat_file stat state pgrp
  for stat_file in /proc/[0-9]*/stat; do
    read -r stat 2>/dev/null <"$stat_file" || continue
    stat=${stat##*) }
    read -r state _ pgrp _ <<<"$stat"
    [[ $pgrp == "$1" && $state != Z && $state != X ]] && return 0
  done
  return 1
}

# Whether `pid` is still the process we started for `id`, not an unrelated one that reuses the pid
# after a crash or a reboot.
process_is_server() {
  local id=$1 pid=$2 cmdline port
  process_alive "$pid" || return 1
  { cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline"); } 2>/dev/null || return 1
  port=$(server_port "$id") || return 1
  group_hook "$(group_of "$id")" is_process "$id" "$cmdline" "$port"
}

# The pid of the running server `id`, or failure when it is not running.
running_pid() {
  local pid
  pid=$(recorded_pid "$1") || return 1
  process_is_server "$1" "$pid" || return 1
  echo "$pid"
}

signal_server() {
  local signal=$1 pid=$2 child
  kill -s "$signal" -- "-$pid" 2>/dev/null || kill -s "$signal" "$pid" 2>/dev/null || true
  # PostgreSQL's backends each lead a process group of their own (setsid() in
  # InitPostmasterChild), so the group signal above misses them: signal the server's children.
  for child in $(ps -o pid= --ppid "$pid" 2>/dev/null || true); do
    kill -s "$signal" "$child" 2>/dev/null || true
  done
}

wait_process_group_gone() {
  local pid=$1 deadline=$((SECONDS + $2))
  while process_group_alive "$pid"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

# Ends server `id` if it runs: a graceful stop, SIGKILL after the deadline. Succeeds when it does
# not run.
stop_server() {
  local id=$1 pid group
  group=$(group_of "$id")
  if pid=$(running_pid "$id"); then
    signal_server CONT "$pid"
    if group_has_hook "$group" stop_signal; then
      kill -s "$(group_hook "$group" stop_signal "$id")" "$pid" 2>/dev/null || true
    else
      signal_server TERM "$pid"
    fi
    if ! wait_process_group_gone "$pid" "$stop_deadline_seconds"; then
      say "$id (pid $pid) ignored SIGTERM for ${stop_deadline_seconds}s; sending SIGKILL"
      signal_server KILL "$pid"
      wait_process_group_gone "$pid" 10 || die "$id (pid $pid) survived SIGKILL"
    fi
  fi
  rm -f "$(server_dir "$id")/pid"
}

# Stops the servers `ids` concurrently (a JVM takes a while to exit); fails if any survived.
stop_servers() {
  local id jobs=() job failed=0
  for id in "$@"; do
    stop_server "$id" &
    jobs+=($!)
  done
  for job in "${jobs[@]}"; do
    wait "$job" || failed=1
  done
  return "$failed"
}

# ---------------------------------------------------------------------------------------------
# Ports

declare -A ports_taken_here=()

# Sets `free_port` to a port nothing listens on and no server of this state directory uses.
pick_free_port() {
  local in_use attempt port
  if command -v ss >/dev/null; then
    in_use=" $(ss -Htln 2>/dev/null | awk '{ sub(/.*:/, "", $4); print $4 }' | tr '\n' ' ') "
  else
    in_use=" "
  fi
  in_use+="$(cat "$state_dir"/*/*port 2>/dev/null | tr "\n" " " || true) "
  for ((attempt = 0; attempt < 500; attempt++)); do
    port=$((port_low + (RANDOM * 32768 + RANDOM) % port_span))
    [[ $in_use == *" $port "* || -n ${ports_taken_here[$port]:-} ]] && continue
    # A connection attempt also catches listeners ss did not show (or ss being absent).
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue
    ports_taken_here[$port]=1
    free_port=$port
    return 0
  done
  die "found no free port in $port_low-$((port_low + port_span - 1))"
}

# Picks the ports of every server of a group. The main process does this for all groups before
# they start in parallel, so that two groups never pick the same port.
assign_ports() {
  local group=$1 id dir name
  for id in $(group_members "$group"); do
    dir=$(server_dir "$id")
    mkdir -p "$dir"
    pick_free_port
    echo "$free_port" >"$dir/port"
    group_has_hook "$group" extra_ports || continue
    for name in $(group_hook "$group" extra_ports "$id"); do
      pick_free_port
      echo "$free_port" >"$dir/$name"
    done
  done
}

# Whether the server's log says, since its last launch, that it could not bind its port.
log_says_port_in_use() {
  local offset
  offset=$(cat "$(server_dir "$1")/log_offset" 2>/dev/null || echo 0)
  # grep reads to the end (no -q), so that tail never dies of SIGPIPE under pipefail.
  tail -c +"$((offset + 1))" "$(server_log "$1")" 2>/dev/null |
    grep -iE 'address already in use|could not bind|BindException' >/dev/null
}

# The addresses server `id` listens on: loopback, and in the partition set also its two paths.
listen_addresses() {
  local addresses=127.0.0.1 path
  if $partition_set; then
    for path in "${partition_paths[@]}"; do
      addresses+=" $(path_address "$1" "$path")"
    done
  fi
  echo "$addresses"
}

# ---------------------------------------------------------------------------------------------
# Launching and readiness. Servers get no terminal, no inherited pipe (a CTest fixture would
# otherwise wait for them to exit) and not the state lock (fd 9): each launch hook redirects
# `</dev/null >>server.log 2>&1 9>&-`. Each readiness check is a real request with a short
# timeout, since a paused server accepts connections but never answers.

launch_server() {
  stat -c %s "$(server_log "$1")" >"$(server_dir "$1")/log_offset" 2>/dev/null ||
    echo 0 >"$(server_dir "$1")/log_offset"
  group_hook "$(group_of "$1")" launch "$1"
}

server_answers() { group_hook "$(group_of "$1")" answers "$1"; }

server_healthy() { running_pid "$1" >/dev/null && server_answers "$1"; }

show_log_tail() {
  local log
  log=$(server_log "$1")
  if [[ -s $log ]]; then
    say "last lines of $log:"
    tail -n 40 "$log" | sed "s/^/  $1| /" >&2
  else
    say "$log is empty or missing"
  fi
}

# Waits until server `id` answers. Returns 0 when it does, 2 when its port was taken (try another),
# 1 on any other failure, after printing the log tail.
wait_until_answers() {
  local id=$1 deadline=$((SECONDS + ready_deadline_seconds)) pid
  pid=$(recorded_pid "$id")
  until server_answers "$id"; do
    if ! process_alive "$pid"; then
      if log_says_port_in_use "$id"; then
        say "$id: port $(server_port "$id") is taken by another process"
        return 2
      fi
      say "$id exited before it answered"
      show_log_tail "$id"
      return 1
    fi
    if ((SECONDS >= deadline)); then
      say "$id (pid $pid, port $(server_port "$id")) did not answer within ${ready_deadline_seconds}s"
      show_log_tail "$id"
      return 1
    fi
    sleep 0.1
  done
}

# Waits for every server in `ids`, which were launched together; returns like wait_until_answers,
# the worst outcome winning.
wait_until_all_answer() {
  local id status worst=0
  for id in "$@"; do
    status=0
    wait_until_answers "$id" || status=$?
    if ((status == 1 || (status == 2 && worst == 0))); then worst=$status; fi
  done
  return "$worst"
}

# ---------------------------------------------------------------------------------------------
# The test CA, shared by the groups with a uses_test_ca hook

tls_dir() { echo "$state_dir/tls"; }

# Makes the test CA and the certificates it signs, once per state directory: server.crt for
# localhost and 127.0.0.1, client.crt for mutual TLS, expired.crt (expired yesterday), and
# other-ca.crt, an unrelated CA that signed nothing here. Keys are unencrypted.
make_test_certificates() {
  local dir
  dir=$(tls_dir)
  [[ -f $dir/complete ]] && return 0
  command -v openssl >/dev/null || die "openssl not found: apt-get install openssl"
  rm -rf "$dir"
  mkdir -p "$dir"
  (
    cd "$dir"
    make_ca() { openssl req -x509 -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.crt" -days 3650 -subj "/CN=$2"; }
    # sign NAME CN DAYS [SAN]: a key and a certificate signed by the test CA.
    sign() {
      openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "/CN=$2"
      if [[ -n ${4:-} ]]; then printf 'subjectAltName=%s\n' "$4" >"$1.ext"; else : >"$1.ext"; fi
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days "$3" \
        -extfile "$1.ext" -out "$1.crt"
    }
    make_ca ca "dlock test CA"
    make_ca other-ca "dlock unrelated test CA"
    sign server localhost 3650 "DNS:localhost,IP:127.0.0.1"
    sign client "dlock test client" 3650
    sign expired localhost -1 "DNS:localhost,IP:127.0.0.1"
    rm -f ./*.csr ./*.ext
    chmod 644 ./*.crt
    chmod 600 ./*.key
  ) >"$dir/openssl.log" 2>&1 || {
    say "making the test certificates failed:"
    tail -n 20 "$dir/openssl.log" | sed 's/^/  openssl| /' >&2
    return 1
  }
  touch "$dir/complete"
}

take_state_lock() {
  exec 9>"$state_dir/.lock"
  flock -w "$lock_deadline_seconds" 9 ||
    die "another test-servers.sh holds $state_dir/.lock for over ${lock_deadline_seconds}s"
}
