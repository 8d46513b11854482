#!/usr/bin/env bash
# Real Redis, PostgreSQL 15, ZooKeeper, MariaDB and etcd servers on 127.0.0.1 for dlock's tests, on free ports, in
# one state directory; or, with --partition-set, another set of them inside a network namespace
# whose paths a test can cut (scripts/partition-net.sh). See docs/testing.md for the workflow;
# `test-servers.sh help` for the commands.
#
# Each server kind is a module in scripts/test-servers/ (hooks described in common.sh); this file
# holds the command line and what every group goes through (start, stop, endpoints, faults).
set -Eeuo pipefail
# set -e ends the script at the first unexpected failure; say which one, rather than exit silently.
trap 'echo "test-servers: unexpected failure of \"$BASH_COMMAND\" (line $LINENO, status $?)" >&2' ERR

readonly program=test-servers
readonly ready_deadline_seconds=${DLOCK_TEST_SERVERS_TIMEOUT:-60}
readonly stop_deadline_seconds=15
readonly lock_deadline_seconds=300
# Random ports come from below Linux's ephemeral range (32768-60999) so that they never collide
# with the local end of an outgoing connection.
readonly port_low=15000
readonly port_span=17000
readonly port_attempts=3
readonly postgres_bin=${DLOCK_POSTGRES_BIN:-/usr/lib/postgresql/15/bin}
readonly module_dir=$(dirname "${BASH_SOURCE[0]}")/test-servers

usage() {
  cat <<'EOF'
usage: test-servers.sh [--state-dir DIR | --default-state-dir DIR] [--partition-set] COMMAND [ARGS]

  start [--owner NAME] [GROUP ...]                      start (default: all); reuse healthy ones
  stop [--owner NAME] [GROUP ...]                       stop (default: all; with --owner only
                                                         the groups that NAME started)
  status                                                one line per server; exit 3 if any is down
  env                                                   print the endpoints file
  pause ID | resume ID                                  SIGSTOP / SIGCONT the server's processes
  restart ID                                            stop, start on the same port and data
  shutdown ID                                           stop gracefully, no restart
  kill ID                                               SIGKILL, no restart
  kill-connections ID [NAME_GLOB]                       end clients' connections (Redis client
                                                         name / Postgres application_name /
                                                         MariaDB user)

  GROUPs: redis postgres zookeeper redis-tls redis-sentinel redis-failover redis-cluster
          redis-tls-sentinel redis-tls-cluster mariadb etcd etcd-secure
  IDs: redis redlock1 redlock2 redlock3 postgres zookeeper zk1 zk2 zk3 mariadb etcd etcd1 etcd2 etcd3
       redis-tls redis-mtls redis-expired redis-unix (group redis-tls: TLS servers with certificates
       from a test CA in <state directory>/tls, which PostgreSQL also serves TLS with, and a Unix socket)
       sentinel-master sentinel-replica1 sentinel-replica2 sentinel1 sentinel2 sentinel3 (group
       redis-sentinel: a master, two replicas and three sentinels monitoring it as "mymaster";
       group redis-failover: the same with ids failover-master ... failover-sentinel3, for tests
       that fail the master over)
       rcluster1..rcluster6 (group redis-cluster: a Redis Cluster, masters 1-3, their replicas 4-6)
       tls-sentinel-master tls-sentinel-replica tls-sentinel1 (group redis-tls-sentinel: a master,
       a replica and one sentinel, all over TLS); tls-rcluster1..tls-rcluster3 (group
       redis-tls-cluster: a Redis Cluster of three masters over TLS, its bus too)
       etcd-tls etcd-mtls etcd-auth (group etcd-secure: etcd over TLS with the test CA's
       certificate, the same requiring client certificates, and etcd with authentication on)
  The state directory is --state-dir, else $DLOCK_TEST_STATE_DIR, else --default-state-dir,
  else ${TMPDIR:-/tmp}/dlock-test-servers-$UID. Endpoints: <state directory>/endpoints.env.

  --partition-set: the same commands act on the partition set, servers in a network namespace
  of their own (state in <state directory>/partition; needs root and iproute2), plus:
  partition ID... A|B | heal ID... A|B
                                     cut / restore one path to each server named (silent, both
                                     ways; the cuts at once)
  heal-all                           restore every cut path
  paths                              one line per server and path: address, up or cut
EOF
}

# shellcheck source-path=SCRIPTDIR source=partition-net.sh
source "$(dirname "${BASH_SOURCE[0]}")/partition-net.sh"
# shellcheck source=test-servers/common.sh
source "$module_dir/common.sh"
# shellcheck source=test-servers/groups.sh
source "$module_dir/groups.sh"

# Set for the partition set: the command prefix that runs a program inside its namespace (the
# servers, and the readiness checks that reach them over the namespace's loopback).
partition_set=false
netns=""
in_netns=()

# The server kinds, one module each. Their order is the order of the groups everywhere (the
# endpoints file, status, `start` without groups); redis.sh and etcd.sh come before the modules
# that build on them.
for module in redis redis-tls redis-sentinel redis-cluster redis-tls-sentinel redis-tls-cluster \
  postgres zookeeper mariadb etcd etcd-secure; do
  # shellcheck source=/dev/null
  source "$module_dir/$module.sh"
done
readonly all_groups

# ---------------------------------------------------------------------------------------------
# Commands

parse_owner_and_groups() {
  owner=""
  groups=()
  while (($#)); do
    case "$1" in
      --owner)
        (($# >= 2)) || die "--owner needs a name"
        owner=$2
        shift 2
        ;;
      --owner=*)
        owner=${1#--owner=}
        shift
        ;;
      *)
        require_group "$1"
        groups+=("$1")
        shift
        ;;
    esac
  done
  ((${#groups[@]})) || groups=("${all_groups[@]}")
}

command_start() {
  local owner groups group to_start=() jobs=() failed=() index
  parse_owner_and_groups "$@"
  owner=${owner:-manual}
  for group in "${groups[@]}"; do
    group_hook "$group" prerequisites "$group"
  done
  take_state_lock
  if $partition_set; then
    prepare_partition_network "${groups[@]}"
  fi
  # A healthy group is reused, so that CTest's fixtures and servers a developer keeps up share
  # them; whatever is left of a broken one (a crashed run, a killed server) is replaced.
  for group in "${groups[@]}"; do
    if group_healthy "$group"; then
      say "$group: already running, reusing it (owner: $(cat "$(group_owner_file "$group")" 2>/dev/null || echo unknown))"
      continue
    fi
    if group_recorded "$group"; then
      say "$group: removing what is left of an earlier run"
      remove_group "$group"
    fi
    assign_ports "$group"
    to_start+=("$group")
  done
  # Before the groups start in parallel: the TLS servers and PostgreSQL share the test CA.
  for group in "${to_start[@]}"; do
    group_has_hook "$group" uses_test_ca || continue
    make_test_certificates || die "cannot make the test certificates in $(tls_dir)"
    break
  done
  for group in "${to_start[@]}"; do
    start_group "$group" "$owner" &
    jobs+=($!)
  done
  for index in "${!jobs[@]}"; do
    wait "${jobs[$index]}" || failed+=("${to_start[$index]}")
  done
  write_endpoints_file
  if ((${#failed[@]})); then
    die "failed to start: ${failed[*]} (state directory $state_dir)"
  fi
  cat "$(endpoints_file)"
}

command_stop() {
  local owner groups group recorded_owner
  parse_owner_and_groups "$@"
  take_state_lock
  for group in "${groups[@]}"; do
    group_recorded "$group" || continue
    recorded_owner=$(cat "$(group_owner_file "$group")" 2>/dev/null || true)
    if [[ -n $owner && -n $recorded_owner && $recorded_owner != "$owner" ]]; then
      say "$group: left running, it was started by '$recorded_owner', not '$owner'"
      continue
    fi
    remove_group "$group"
    say "$group: stopped"
  done
  write_endpoints_file
  if $partition_set && ! any_group_recorded; then
    netns_remove
    say "network namespace $netns removed"
  fi
}

any_group_recorded() {
  local group
  for group in "${all_groups[@]}"; do
    group_recorded "$group" && return 0
  done
  return 1
}

# Before the partition set's groups start: fails with exit 77 (a skip, for CTest) when network
# namespaces cannot be made here, or 1 when CI=true, where a skip would hide the tests. Keeps
# the network of groups that still run healthy and heals its cut paths (a test that crashed
# may have left one); otherwise removes what an earlier run left (servers, namespace, pairs) and
# makes the network afresh.
prepare_partition_network() {
  local reason group keep=false
  if reason=$(netns_unavailable_reason); then
    if [[ ${CI:-} == true ]]; then
      die "partition set: $reason (CI=true, so this is a failure, not a skip)"
    fi
    say "partition set: $reason; the partition tests are skipped"
    exit 77
  fi
  if netns_complete; then
    for group in "${all_groups[@]}"; do
      group_healthy "$group" && keep=true
    done
  fi
  if $keep; then
    command_heal_all
    return
  fi
  for group in "${all_groups[@]}"; do
    if group_recorded "$group"; then
      say "$group: removing what is left of an earlier run"
      remove_group "$group"
    fi
  done
  netns_remove
  netns_create
}

command_status() {
  local group id pid state all_up=true any=false
  for group in "${all_groups[@]}"; do
    group_recorded "$group" || continue
    any=true
    for id in $(group_members "$group"); do
      if pid=$(running_pid "$id"); then
        if [[ $(process_state "$pid") == T ]]; then
          state=paused
        elif server_answers "$id"; then
          state=up
        else
          state="running, not answering"
          all_up=false
        fi
      else
        pid=-
        state=down
        all_up=false
      fi
      printf '%-10s port %-6s pid %-8s %-24s owner %s\n' "$id" "$(server_port "$id" || echo -)" \
        "$pid" "$state" "$(cat "$(group_owner_file "$group")" 2>/dev/null || echo -)"
    done
  done
  if ! $any; then
    say "no servers recorded in $state_dir"
    return 3
  fi
  if $partition_set && netns_complete; then
    echo "network namespace $netns, addresses $partition_block.$(netns_slot).0/24:"
    command_paths | sed 's/^/  /'
  fi
  $all_up || return 3
}

command_env() {
  [[ -f "$(endpoints_file)" ]] || die "no servers running in $state_dir; run: $0 --state-dir $state_dir start"
  cat "$(endpoints_file)"
}

require_running() {
  running_pid "$1" || die "$1 is not running in $state_dir (status: $0 --state-dir $state_dir status)"
}

command_pause() {
  local pid
  pid=$(require_running "$1")
  signal_server STOP "$pid"
  say "paused $1 (pid $pid)"
}

command_resume() {
  local pid
  pid=$(require_running "$1")
  signal_server CONT "$pid"
  say "resumed $1 (pid $pid)"
}

command_kill() {
  local pid
  pid=$(require_running "$1")
  signal_server KILL "$pid"
  wait_process_group_gone "$pid" 10 || die "$1 (pid $pid) survived SIGKILL"
  rm -f "$(server_dir "$1")/pid"
  say "killed $1 (pid $pid)"
}

command_shutdown() {
  local pid
  pid=$(require_running "$1")
  stop_server "$1"
  say "shut down $1 (was pid $pid)"
}

command_restart() {
  local id=$1
  [[ -f "$(server_dir "$id")/port" ]] || die "$id was never started in $state_dir"
  stop_server "$id"
  launch_server "$id"
  local status=0
  wait_until_answers "$id" || status=$?
  if ((status == 2)); then
    die "$id: another process took port $(server_port "$id") while $id was down; it cannot come back on the same port"
  elif ((status != 0)); then
    die "$id did not come back after restart"
  fi
  say "restarted $id (pid $(recorded_pid "$id"), port $(server_port "$id"))"
}

# Prints the ids (first word) of the lines "ID NAME" on stdin whose NAME matches the glob.
ids_with_name_matching() {
  local glob=$1 client_id name
  while read -r client_id name; do
    # shellcheck disable=SC2053 # the glob is meant to match
    if [[ $name == $glob ]]; then
      echo "$client_id"
    fi
  done
}

command_kill_connections() {
  local id=$1 glob=${2:-*} port group killed
  require_running "$id" >/dev/null
  port=$(server_port "$id")
  group=$(group_of "$id")
  group_has_hook "$group" kill_connections ||
    die "kill-connections is not available for $id (group $group); use pause, restart or kill"
  group_hook "$group" kill_connections "$id" "$glob" "$port"
  say "ended $killed connection(s) to $id matching '$glob'"
}

# ---------------------------------------------------------------------------------------------

state_dir=""
default_state_dir=${TMPDIR:-/tmp}/dlock-test-servers-$UID
while (($#)); do
  case "$1" in
    --state-dir | --default-state-dir)
      (($# >= 2)) || die "$1 needs a directory"
      if [[ $1 == --state-dir ]]; then state_dir=$2; else default_state_dir=$2; fi
      shift 2
      ;;
    --partition-set)
      partition_set=true
      shift
      ;;
    -h | --help | help)
      usage
      exit 0
      ;;
    *) break ;;
  esac
done
(($#)) || {
  usage >&2
  exit 64
}
command=$1
shift

# An explicit directory wins over the environment, which wins over a caller's default (CTest's).
state_dir=${state_dir:-${DLOCK_TEST_STATE_DIR:-$default_state_dir}}
mkdir -p "$state_dir"
state_dir=$(cd "$state_dir" && pwd)
# PostgreSQL runs as user postgres and needs to reach its directory inside.
chmod 755 "$state_dir"
if $partition_set; then
  state_dir+=/partition
  mkdir -p "$state_dir"
  chmod 755 "$state_dir"
  netns=$(netns_name "$state_dir")
  in_netns=(ip netns exec "$netns")
fi

case "$command" in
  start) command_start "$@" ;;
  stop) command_stop "$@" ;;
  status)
    status=0
    command_status || status=$?
    exit "$status"
    ;;
  env) command_env ;;
  pause | resume | restart | shutdown | kill | kill-connections)
    (($# >= 1)) || die "$command needs a server id (see: $0 help)"
    require_server_id "$1"
    take_state_lock
    "command_${command//-/_}" "$@"
    ;;
  partition | heal | heal-all | paths)
    $partition_set || die "$command acts on the partition set: $0 --partition-set $command ..."
    take_state_lock
    if [[ $command == partition || $command == heal ]]; then
      require_path_args "$@"
    fi
    "command_${command//-/_}" "$@"
    ;;
  *)
    say "unknown command '$command'"
    usage >&2
    exit 64
    ;;
esac
