#!/usr/bin/env bash
# Real Redis, PostgreSQL 15, ZooKeeper, MariaDB and etcd servers on 127.0.0.1 for dlock's tests, on free ports, in
# one state directory; or, with --partition-set, another set of them inside a network namespace
# whose paths a test can cut (scripts/partition-net.sh). See docs/testing.md for the workflow;
# `test-servers.sh help` for the commands.
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
readonly all_groups=(redis redis-tls redis-sentinel redis-failover redis-cluster redis-tls-sentinel redis-tls-cluster postgres zookeeper mariadb etcd etcd-secure)

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

# shellcheck source-path=SCRIPTDIR source=partition-net.sh
source "$(dirname "${BASH_SOURCE[0]}")/partition-net.sh"

# Set for the partition set: the command prefix that runs a program inside its namespace (the
# servers, and the readiness checks that reach them over the namespace's loopback).
partition_set=false
netns=""
in_netns=()

# ---------------------------------------------------------------------------------------------
# Servers, groups and their files

group_members() {
  case "$1" in
    redis) echo redis redlock1 redlock2 redlock3 ;;
    redis-tls) echo redis-tls redis-mtls redis-expired redis-unix ;;
    # Sentinel: the master, its two replicas, then the three sentinels (launched in this order).
    redis-sentinel) echo sentinel-master sentinel-replica1 sentinel-replica2 sentinel1 sentinel2 sentinel3 ;;
    redis-failover) echo failover-master failover-replica1 failover-replica2 failover-sentinel1 failover-sentinel2 failover-sentinel3 ;;
    redis-cluster) echo rcluster1 rcluster2 rcluster3 rcluster4 rcluster5 rcluster6 ;;
    redis-tls-sentinel) echo tls-sentinel-master tls-sentinel-replica tls-sentinel1 ;;
    redis-tls-cluster) echo tls-rcluster1 tls-rcluster2 tls-rcluster3 ;;
    postgres) echo postgres ;;
    zookeeper) echo zookeeper zk1 zk2 zk3 ;;
    mariadb) echo mariadb ;;
    # etcd: a standalone member and a 3-member cluster
    etcd) echo etcd etcd1 etcd2 etcd3 ;;
    # etcd over TLS (client certificates optional, then required) and with authentication on
    etcd-secure) echo etcd-tls etcd-mtls etcd-auth ;;
    *) return 1 ;;
  esac
}

group_of() {
  case "$1" in
    redis | redlock[123]) echo redis ;;
    redis-tls | redis-mtls | redis-expired | redis-unix) echo redis-tls ;;
    sentinel-master | sentinel-replica[12] | sentinel[123]) echo redis-sentinel ;;
    failover-master | failover-replica[12] | failover-sentinel[123]) echo redis-failover ;;
    rcluster[1-6]) echo redis-cluster ;;
    tls-sentinel-master | tls-sentinel-replica | tls-sentinel1) echo redis-tls-sentinel ;;
    tls-rcluster[1-3]) echo redis-tls-cluster ;;
    postgres) echo postgres ;;
    zookeeper | zk[123]) echo zookeeper ;;
    mariadb) echo mariadb ;;
    etcd | etcd[123]) echo etcd ;;
    etcd-tls | etcd-mtls | etcd-auth) echo etcd-secure ;;
    *) return 1 ;;
  esac
}

require_group() { group_members "$1" >/dev/null || die "unknown server group '$1' (${all_groups[*]})"; }
require_server_id() { group_of "$1" >/dev/null || die "unknown server id '$1' (see: $0 help)"; }

server_dir() { echo "$state_dir/$1"; }
server_log() { echo "$state_dir/$1/server.log"; }
server_port() { cat "$state_dir/$1/port" 2>/dev/null; }
recorded_pid() { cat "$state_dir/$1/pid" 2>/dev/null; }
is_ensemble_member() { [[ $1 == zk[123] ]]; }
is_etcd_cluster_member() { [[ $1 == etcd[123] ]]; }

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
  case "$(group_of "$id")" in
    redis | redis-*) [[ $cmdline == *redis-server* && ($cmdline == *":$port "* || $cmdline == *"--port $port "*) ]] ;;
    postgres) [[ $cmdline == *postgres*"$(server_dir "$id")/data"* ]] ;;
    zookeeper) [[ $cmdline == *QuorumPeerMain*"$(server_dir "$id")/zoo.cfg"* ]] ;;
    mariadb) [[ $cmdline == *mariadbd*"$(server_dir "$id")/data"* ]] ;;
    etcd | etcd-secure) [[ $cmdline == *etcd*"--data-dir $(server_dir "$id")/data"* ]] ;;
  esac
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
  local id=$1 pid
  if pid=$(running_pid "$id"); then
    signal_server CONT "$pid"
    if [[ $id == postgres ]]; then
      kill -s INT "$pid" 2>/dev/null || true # fast shutdown: SIGTERM would wait for clients
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

# Whether the server's log says, since its last launch, that it could not bind its port.
log_says_port_in_use() {
  local offset
  offset=$(cat "$(server_dir "$1")/log_offset" 2>/dev/null || echo 0)
  # grep reads to the end (no -q), so that tail never dies of SIGPIPE under pipefail.
  tail -c +"$((offset + 1))" "$(server_log "$1")" 2>/dev/null |
    grep -iE 'address already in use|could not bind|BindException' >/dev/null
}

# ---------------------------------------------------------------------------------------------
# Readiness: each check is a real request with a short timeout, since a paused server accepts
# connections but never answers.

redis_answers() {
  [[ "$("${in_netns[@]}" timeout 2 redis-cli -h 127.0.0.1 -p "$(server_port "$1")" PING 2>/dev/null)" == PONG ]]
}

postgres_answers() {
  [[ "$("${in_netns[@]}" timeout 5 "$postgres_bin/psql" -X -At -h 127.0.0.1 -p "$(server_port "$1")" -U dlock \
    -d dlock_test -c 'select 1' 2>/dev/null)" == 1 ]]
}

mariadb_answers() {
  [[ "$("${in_netns[@]}" timeout 5 mariadb --no-defaults -h 127.0.0.1 -P "$(server_port "$1")" -u dlock -pdlock \
    -N -B -e 'select 1' dlock_test 2>/dev/null)" == 1 ]]
}

# Prints the `Mode:` of a ZooKeeper server from its `srvr` four-letter word; fails when it does not
# serve (a member without quorum says "not currently serving requests").
zookeeper_mode() {
  local reply
  # shellcheck disable=SC2016 # $1 belongs to the inner shell
  reply=$("${in_netns[@]}" timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf srvr >&3 && cat <&3' \
    _ "$(server_port "$1")" 2>/dev/null) || true
  [[ $reply =~ Mode:\ ([a-z]+) ]] || return 1
  echo "${BASH_REMATCH[1]}"
}

# etcdctl's flags to reach member `id`: TLS with the test CA (and its client certificate for
# etcd-mtls), root once etcd-auth has authentication on.
etcdctl_flags() {
  local id=$1 tls scheme=http
  tls=$(tls_dir)
  [[ $id == etcd-tls || $id == etcd-mtls ]] && scheme=https
  echo "--endpoints=$scheme://127.0.0.1:$(server_port "$id")"
  [[ $scheme == https ]] && echo "--cacert=$tls/ca.crt"
  [[ $id == etcd-mtls ]] && echo "--cert=$tls/client.crt --key=$tls/client.key"
  [[ $id == etcd-auth && -f "$(server_dir "$id")/auth_enabled" ]] && echo "--user=root:root"
  return 0
}

# A member that has a leader answers a linearizable read (a member of a cluster without quorum
# does not).
etcd_answers() {
  # shellcheck disable=SC2046 # one flag per word
  "${in_netns[@]}" timeout 3 etcdctl $(etcdctl_flags "$1") \
    --command-timeout=2s get --consistency=l dlock-health >/dev/null 2>&1
}

etcdctl_on_auth_member() {
  # shellcheck disable=SC2046 # one flag per word
  etcdctl $(etcdctl_flags etcd-auth) --command-timeout=5s "$@" >>"$(server_log etcd-auth)" 2>&1
}

# etcd-auth: root (password root), user dlock (password dlock) with read and write on the keys
# under auth-test/, user stranger (password stranger) with no permission there; then auth on.
setup_etcd_auth() {
  local step
  for step in "user add root:root" "user grant-role root root" "role add dlock-locks" \
    "role grant-permission dlock-locks --prefix=true readwrite auth-test/" \
    "user add dlock:dlock" "user grant-role dlock dlock-locks" "user add stranger:stranger" \
    "auth enable"; do
    # shellcheck disable=SC2086 # the step's words are etcdctl's arguments
    if ! etcdctl_on_auth_member $step; then
      say "etcd-auth: setting up users and roles failed at 'etcdctl $step'"
      show_log_tail etcd-auth
      return 1
    fi
  done
  touch "$(server_dir etcd-auth)/auth_enabled"
}

server_answers() {
  local mode
  case "$(group_of "$1")" in
    etcd | etcd-secure) etcd_answers "$1" ;;
    redis | redis-*) redis_answers "$1" ;;
    postgres) postgres_answers "$1" ;;
    mariadb) mariadb_answers "$1" ;;
    zookeeper)
      mode=$(zookeeper_mode "$1") || return 1
      if is_ensemble_member "$1"; then
        [[ $mode == leader || $mode == follower ]]
      else
        [[ $mode == standalone ]]
      fi
      ;;
  esac
}

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
# Launching. Servers get no terminal, no inherited pipe (a CTest fixture would otherwise wait for
# them to exit) and not the state lock (fd 9).

launch_redis() {
  local id=$1 dir port
  dir=$(server_dir "$id")
  port=$(server_port "$id")
  # Protected mode refuses every address but loopback; the partition set's paths are reachable
  # only from this host's root namespace.
  local protected=yes
  $partition_set && protected=no
  # shellcheck disable=SC2046 # one argument per address and per listener option
  setsid "${in_netns[@]}" redis-server --bind $(listen_addresses "$id") --port "$port" --save '' --appendonly no --dir "$dir" \
    --protected-mode "$protected" --daemonize no $(redis_listener_arguments "$id") </dev/null >>"$dir/server.log" 2>&1 9>&- &
  echo $! >"$dir/pid"
}

# The redis-tls group's servers keep their plain port (readiness checks, the tests' own probes)
# and add what they are for: a TLS port with a certificate of the test CA (redis-tls: client
# certificates optional; redis-mtls: required; redis-expired: an expired certificate), or a
# Unix socket.
redis_listener_arguments() {
  local id=$1 tls
  tls=$(tls_dir)
  case "$id" in
    redis-tls | redis-mtls | redis-expired)
      local cert=server auth=optional
      [[ $id == redis-expired ]] && cert=expired
      [[ $id == redis-mtls ]] && auth=yes
      echo "--tls-port $(cat "$(server_dir "$id")/tls_port") --tls-cert-file $tls/$cert.crt" \
        "--tls-key-file $tls/$cert.key --tls-ca-cert-file $tls/ca.crt --tls-auth-clients $auth"
      ;;
    redis-unix) echo "--unixsocket $(redis_socket_path) --unixsocketperm 700" ;;
    tls-sentinel-master | tls-sentinel-replica | tls-rcluster[1-3]) tls_only_listener_arguments "$id" ;;
    # The cluster bus on a port of its own (not port + 10000, which may be taken), and a short
    # node timeout so that a failover in a test comes quickly.
    rcluster[1-6])
      echo "--cluster-enabled yes --cluster-config-file $(server_dir "$id")/nodes.conf" \
        "--cluster-port $(cat "$(server_dir "$id")/bus_port") --cluster-node-timeout 2000"
      ;;
  esac
}

# Joins the redis-cluster group into one cluster: rcluster1-3 masters (the slots split in three),
# rcluster4-6 one replica each (redis-cli makes masters of the first three it is given). Waits
# until every member says cluster_state:ok and every replica is in sync with its master, so that
# a failover can start at once.
create_redis_cluster() {
  local id nodes=() deadline=$((SECONDS + ready_deadline_seconds))
  for id in $(group_members redis-cluster); do
    nodes+=("127.0.0.1:$(server_port "$id")")
  done
  if ! timeout "$ready_deadline_seconds" redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes \
    >>"$(server_dir rcluster1)/create.log" 2>&1; then
    say "redis-cluster: redis-cli --cluster create failed:"
    tail -n 20 "$(server_dir rcluster1)/create.log" >&2
    return 1
  fi
  for id in $(group_members redis-cluster); do
    redis_cluster_member_reaches "$id" "$deadline" 'cluster_state:ok' CLUSTER INFO || return 1
  done
  for id in rcluster4 rcluster5 rcluster6; do
    redis_cluster_member_reaches "$id" "$deadline" 'master_link_status:up' INFO replication || return 1
  done
}

# Waits until the reply of redis-cli `command...` on member `id` has the line `line`, until
# `deadline` (in $SECONDS).
redis_cluster_member_reaches() {
  local id=$1 deadline=$2 line=$3
  shift 3
  until timeout 2 redis-cli -p "$(server_port "$id")" "$@" 2>/dev/null | grep -q "^$line"; do
    if ((SECONDS >= deadline)); then
      say "redis-cluster: $id did not say $line within ${ready_deadline_seconds}s"
      return 1
    fi
    sleep 0.1
  done
}

# A Unix socket path is limited to 107 bytes; a deep state directory gets a short one under
# $TMPDIR instead (recorded, so that every later command finds it).
redis_socket_path() {
  local dir record
  dir=$(server_dir redis-unix)
  record=$dir/socket_path
  if [[ ! -f $record ]]; then
    if ((${#dir} > 90)); then
      mktemp -u "${TMPDIR:-/tmp}/dlock-redis-XXXXXX.sock" >"$record"
    else
      echo "$dir/redis.sock" >"$record"
    fi
  fi
  cat "$record"
}

# The Sentinel groups: a master and two replicas of it, and three sentinels that monitor it as
# "mymaster" with a quorum of 2 and fail it over quickly (down after 1 s, short timeouts).
# Members: master, replica, replica, sentinel, sentinel, sentinel (group_members' order).
sentinel_group_master() { local members; read -r -a members <<<"$(group_members "$1")"; echo "${members[0]}"; }
sentinel_group_sentinels() { local members; read -r -a members <<<"$(group_members "$1")"; echo "${members[@]:3}"; }
is_sentinel() { [[ $1 == sentinel[123] || $1 == failover-sentinel[123] ]]; }

launch_sentinel_group_member() {
  local id=$1 dir port master_port
  dir=$(server_dir "$id")
  port=$(server_port "$id")
  master_port=$(server_port "$(sentinel_group_master "$(group_of "$id")")")
  if ! is_sentinel "$id"; then
    local replica_of=()
    [[ $id == *-replica[12] ]] && replica_of=(--replicaof 127.0.0.1 "$master_port")
    setsid redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$dir" \
      --protected-mode yes --daemonize no "${replica_of[@]}" \
      </dev/null >>"$dir/server.log" 2>&1 9>&- &
    echo $! >"$dir/pid"
    return
  fi
  # A sentinel rewrites its configuration file (what it learned of the others and of failovers).
  cat >"$dir/sentinel.conf" <<EOF
port $port
bind 127.0.0.1
dir $dir
sentinel monitor mymaster 127.0.0.1 $master_port 2
sentinel down-after-milliseconds mymaster 1000
sentinel failover-timeout mymaster 3000
sentinel parallel-syncs mymaster 2
EOF
  setsid redis-server "$dir/sentinel.conf" --sentinel </dev/null >>"$dir/server.log" 2>&1 9>&- &
  echo $! >"$dir/pid"
}

# Whether every sentinel of `group` sees the master, both replicas and the two other sentinels:
# only then can they agree on a failover.
sentinel_group_formed() {
  local id reply
  for id in $(sentinel_group_sentinels "$1"); do
    reply=$(timeout 2 redis-cli -h 127.0.0.1 -p "$(server_port "$id")" SENTINEL MASTER mymaster 2>/dev/null | tr '\n' ' ') || return 1
    [[ $reply == *"num-slaves 2 "* && $reply == *"num-other-sentinels 2 "* && $reply == *"flags master "* ]] || return 1
  done
}

wait_until_sentinel_group_formed() {
  local deadline=$((SECONDS + ready_deadline_seconds))
  until sentinel_group_formed "$1"; do
    if ((SECONDS >= deadline)); then
      say "$1: the sentinels did not see the master, both replicas and each other within ${ready_deadline_seconds}s"
      return 1
    fi
    sleep 0.2
  done
}

# The TLS Sentinel and TLS Cluster groups: every data node serves the test CA's certificate on
# its TLS port and replicates (and, in the cluster, talks on the bus) over TLS, so that what the
# sentinels and CLUSTER SLOTS tell a TLS client are TLS ports. The plain port stays for the
# readiness checks and the tests' own probes.
tls_only_listener_arguments() {
  local id=$1 tls
  tls=$(tls_dir)
  echo "--tls-port $(cat "$(server_dir "$id")/tls_port") --tls-cert-file $tls/server.crt" \
    "--tls-key-file $tls/server.key --tls-ca-cert-file $tls/ca.crt --tls-auth-clients optional" \
    "--tls-replication yes"
  case "$id" in
    tls-sentinel-replica) echo "--replicaof 127.0.0.1 $(cat "$(server_dir tls-sentinel-master)/tls_port")" ;;
    tls-rcluster[1-3])
      echo "--tls-cluster yes --cluster-enabled yes --cluster-config-file $(server_dir "$id")/nodes.conf" \
        "--cluster-port $(cat "$(server_dir "$id")/bus_port") --cluster-node-timeout 2000"
      ;;
  esac
}

# One sentinel (quorum 1) that reaches the master and its replica over TLS and serves clients
# over TLS too; the tests only lock through it, they never fail it over.
launch_tls_sentinel_member() {
  local id=$1 dir tls
  if [[ $id != tls-sentinel1 ]]; then
    launch_redis "$id"
    return
  fi
  dir=$(server_dir "$id")
  tls=$(tls_dir)
  cat >"$dir/sentinel.conf" <<EOF
port $(server_port "$id")
tls-port $(cat "$dir/tls_port")
tls-cert-file $tls/server.crt
tls-key-file $tls/server.key
tls-ca-cert-file $tls/ca.crt
tls-auth-clients optional
tls-replication yes
bind 127.0.0.1
dir $dir
sentinel monitor mymaster 127.0.0.1 $(cat "$(server_dir tls-sentinel-master)/tls_port") 1
sentinel down-after-milliseconds mymaster 1000
EOF
  setsid redis-server "$dir/sentinel.conf" --sentinel </dev/null >>"$dir/server.log" 2>&1 9>&- &
  echo $! >"$dir/pid"
}

# Up once the sentinel sees the master and its replica (both by their TLS ports).
wait_until_tls_sentinel_formed() {
  local deadline=$((SECONDS + ready_deadline_seconds)) reply
  until reply=$(timeout 2 redis-cli -p "$(server_port tls-sentinel1)" SENTINEL MASTER mymaster 2>/dev/null | tr '\n' ' ') &&
    [[ $reply == *"num-slaves 1 "* && $reply == *"flags master "* ]]; do
    if ((SECONDS >= deadline)); then
      say "redis-tls-sentinel: the sentinel did not see the master and its replica within ${ready_deadline_seconds}s"
      return 1
    fi
    sleep 0.2
  done
}

# Joins tls-rcluster1-3 into a cluster of three masters (no replicas), over TLS.
create_tls_redis_cluster() {
  local id nodes=() deadline=$((SECONDS + ready_deadline_seconds))
  for id in $(group_members redis-tls-cluster); do
    nodes+=("127.0.0.1:$(cat "$(server_dir "$id")/tls_port")")
  done
  if ! timeout "$ready_deadline_seconds" redis-cli --tls --cacert "$(tls_dir)/ca.crt" --cluster create "${nodes[@]}" \
    --cluster-replicas 0 --cluster-yes >>"$(server_dir tls-rcluster1)/create.log" 2>&1; then
    say "redis-tls-cluster: redis-cli --cluster create failed:"
    tail -n 20 "$(server_dir tls-rcluster1)/create.log" >&2
    return 1
  fi
  for id in $(group_members redis-tls-cluster); do
    redis_cluster_member_reaches "$id" "$deadline" 'cluster_state:ok' CLUSTER INFO || return 1
  done
}

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

run_as_postgres=()
if ((EUID == 0)); then
  run_as_postgres=(setpriv --reuid=postgres --regid=postgres --init-groups --)
fi

postgres_socket_dir() { cat "$(server_dir postgres)/socket_dir"; }

launch_postgres() {
  local dir
  dir=$(server_dir postgres)
  setsid "${in_netns[@]}" "${run_as_postgres[@]}" "$postgres_bin/postgres" -D "$dir/data" \
    </dev/null >>"$dir/server.log" 2>&1 9>&- &
  echo $! >"$dir/pid"
}

zookeeper_classpath() {
  local jar=/usr/share/java/zookeeper.jar
  [[ -r $jar ]] || die "$jar not found: apt-get install zookeeper (or scripts/setup-debian.sh --servers)"
  # Debian's zookeeper.jar names its dependencies in its manifest's Class-Path; slf4j-simple gives
  # the server a log on stderr (which goes to server.log) without a log4j configuration.
  local classpath=$jar
  [[ -r /usr/share/java/slf4j-simple.jar ]] && classpath+=:/usr/share/java/slf4j-simple.jar
  echo "$classpath"
}

launch_zookeeper() {
  local id=$1 dir
  dir=$(server_dir "$id")
  # A small heap, serial GC and the client compiler keep four JVMs quick to start on two cores.
  setsid "${in_netns[@]}" java -Xms16m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData \
    -Djava.net.preferIPv4Stack=true -Dzookeeper.admin.enableServer=false \
    -Dzookeeper.jmx.log4j.disable=true -Dorg.slf4j.simpleLogger.showDateTime=true \
    -cp "$(zookeeper_classpath)" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" \
    </dev/null >>"$dir/server.log" 2>&1 9>&- &
  echo $! >"$dir/pid"
}

# MariaDB: a throwaway server, so durability is traded for speed; named locks need no tables.
# It runs as the invoking user (root may run it with --user=root).
mariadb_socket() { cat "$(server_dir mariadb)/socket_path"; }

launch_mariadb() {
  local dir bind user=()
  dir=$(server_dir mariadb)
  bind=$(listen_addresses mariadb | tr ' ' ,)
  ((EUID == 0)) && user=(--user=root)
  setsid "${in_netns[@]}" /usr/sbin/mariadbd --no-defaults "${user[@]}" --datadir="$dir/data" \
    --bind-address="$bind" --port="$(server_port mariadb)" --socket="$(mariadb_socket)" \
    --pid-file="$dir/mariadbd.pid" --skip-log-bin --skip-name-resolve --performance-schema=OFF \
    --innodb-buffer-pool-size=32M --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 \
    --max-connections=1000 --plugin-load-add=metadata_lock_info \
    </dev/null >>"$dir/server.log" 2>&1 9>&- &
  echo $! >"$dir/pid"
}

# The standalone member is a cluster of one; etcd1..3 are one cluster of three.
etcd_initial_cluster() {
  local member members=() list
  if is_etcd_cluster_member "$1"; then members=(etcd1 etcd2 etcd3); else members=("$1"); fi
  for member in "${members[@]}"; do
    list+="${list:+,}$member=http://127.0.0.1:$(cat "$(server_dir "$member")/peer_port")"
  done
  echo "$list"
}

launch_etcd() {
  local id=$1 dir port peer_port token=dlock-etcd
  dir=$(server_dir "$id")
  port=$(server_port "$id")
  peer_port=$(cat "$dir/peer_port")
  is_etcd_cluster_member "$id" && token=dlock-etcd-cluster
  [[ $(group_of "$id") == etcd-secure ]] && token=dlock-$id
  # etcd-secure: TLS with the test CA's server certificate; etcd-auth: simple tokens that expire
  # after 1 s unused, so that the tests see a provider log in again.
  local tls scheme=http secure=()
  tls=$(tls_dir)
  case "$id" in
    etcd-tls) scheme=https secure=(--cert-file "$tls/server.crt" --key-file "$tls/server.key") ;;
    etcd-mtls)
      scheme=https
      secure=(--cert-file "$tls/server.crt" --key-file "$tls/server.key" --client-cert-auth
        --trusted-ca-file "$tls/ca.crt")
      ;;
    etcd-auth) secure=(--auth-token simple --auth-token-ttl 1) ;;
  esac
  # Short heartbeats and elections make a killed leader's successor quick (500 ms); --data-dir
  # comes first so that process_is_server recognizes the process.
  local address client_urls=()
  for address in $(listen_addresses "$id"); do client_urls+=("$scheme://$address:$port"); done
  # 127.0.0.2 too, an address its certificate is not for (the host-name mismatch case).
  [[ $id == etcd-tls ]] && client_urls+=("https://127.0.0.2:$port")
  setsid "${in_netns[@]}" etcd --data-dir "$dir/data" --name "$id" \
    --listen-client-urls "$(IFS=,; echo "${client_urls[*]}")" \
    --advertise-client-urls "$scheme://127.0.0.1:$port" "${secure[@]}" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "$(etcd_initial_cluster "$id")" --initial-cluster-token "$token" \
    --initial-cluster-state new --heartbeat-interval 50 --election-timeout 500 \
    --unsafe-no-fsync --logger zap --log-outputs stderr \
    </dev/null >>"$dir/server.log" 2>&1 9>&- &
  echo $! >"$dir/pid"
}

launch_server() {
  stat -c %s "$(server_log "$1")" >"$(server_dir "$1")/log_offset" 2>/dev/null ||
    echo 0 >"$(server_dir "$1")/log_offset"
  case "$(group_of "$1")" in
    redis | redis-tls | redis-cluster | redis-tls-cluster) launch_redis "$1" ;;
    redis-sentinel | redis-failover) launch_sentinel_group_member "$1" ;;
    redis-tls-sentinel) launch_tls_sentinel_member "$1" ;;
    postgres) launch_postgres ;;
    zookeeper) launch_zookeeper "$1" ;;
    mariadb) launch_mariadb ;;
    etcd | etcd-secure) launch_etcd "$1" ;;
  esac
}

# ---------------------------------------------------------------------------------------------
# Preparing fresh servers: directories, ports, configuration

# Picks the ports of every server of a group. The main process does this for all groups before
# they start in parallel, so that two groups never pick the same port.
assign_ports() {
  local id dir
  for id in $(group_members "$1"); do
    dir=$(server_dir "$id")
    mkdir -p "$dir"
    pick_free_port
    echo "$free_port" >"$dir/port"
    if [[ $1 == etcd || $1 == etcd-secure ]]; then
      pick_free_port
      echo "$free_port" >"$dir/peer_port"
    fi
    if [[ $id == redis-tls || $id == redis-mtls || $id == redis-expired || $id == tls-* ]]; then
      pick_free_port
      echo "$free_port" >"$dir/tls_port"
    fi
    if [[ $id == rcluster[1-6] || $id == tls-rcluster[1-3] ]]; then
      pick_free_port
      echo "$free_port" >"$dir/bus_port"
    fi
    if is_ensemble_member "$id"; then
      pick_free_port
      echo "$free_port" >"$dir/quorum_port"
      pick_free_port
      echo "$free_port" >"$dir/election_port"
    fi
  done
}

write_postgres_settings() {
  cat >"$(server_dir postgres)/data/dlock-test.conf" <<EOF
# Written by scripts/test-servers.sh: a throwaway cluster, so durability is traded for speed.
listen_addresses = '$(listen_addresses postgres | tr ' ' ,)'
port = $(server_port postgres)
unix_socket_directories = '$(postgres_socket_dir)'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
max_locks_per_transaction = 256
shared_buffers = 32MB
# TLS with the test CA's server certificate, copied beside the data (the server wants its key
# to belong to it); plain connections stay accepted (pg_hba's host lines match both).
ssl = on
ssl_cert_file = 'server.crt'
ssl_key_file = 'server.key'
EOF
  install -m 600 "$(tls_dir)/server.crt" "$(tls_dir)/server.key" "$(server_dir postgres)/data/"
  if ((EUID == 0)); then
    chown postgres:postgres "$(server_dir postgres)/data/server.crt" "$(server_dir postgres)/data/server.key"
  fi
}

init_postgres_cluster() {
  local dir socket_dir
  dir=$(server_dir postgres)
  # A Unix socket path is limited to 107 bytes; a deep state directory gets a short socket
  # directory under $TMPDIR instead.
  socket_dir=$dir/socket
  if ((${#socket_dir} > 80)); then
    socket_dir=$(mktemp -d "${TMPDIR:-/tmp}/dlock-pg.XXXXXX")
  fi
  mkdir -p "$socket_dir"
  echo "$socket_dir" >"$dir/socket_dir"
  if ((EUID == 0)); then
    chown postgres:postgres "$dir" "$socket_dir"
    if ! "${run_as_postgres[@]}" test -w "$dir"; then
      say "user postgres cannot write $dir: every parent directory of the state directory must be searchable by others (chmod o+x)"
      return 1
    fi
  fi
  if ! "${run_as_postgres[@]}" "$postgres_bin/initdb" -D "$dir/data" -A trust -U postgres \
    -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1; then
    say "initdb failed"
    tail -n 20 "$dir/initdb.log" | sed 's/^/  initdb| /' >&2
    return 1
  fi
  echo "include 'dlock-test.conf'" >>"$dir/data/postgresql.conf"
  if $partition_set; then
    # initdb trusts loopback only; the partition set's clients come over the paths.
    echo "host all all $partition_block.$(netns_slot).0/24 trust" >>"$dir/data/pg_hba.conf"
  fi
}

superuser_psql() {
  "$postgres_bin/psql" -X -q -At -h "$(postgres_socket_dir)" -p "$(server_port postgres)" \
    -U postgres -d postgres -v ON_ERROR_STOP=1 "$@"
}

# Creates role dlock and database dlock_test once the fresh cluster accepts connections. Succeeds
# without doing so when the server died or hangs: wait_until_answers then says why.
create_postgres_test_database() {
  local deadline=$((SECONDS + ready_deadline_seconds))
  until "$postgres_bin/pg_isready" -q -h "$(postgres_socket_dir)" -p "$(server_port postgres)"; do
    process_alive "$(recorded_pid postgres)" || return 0
    ((SECONDS < deadline)) || return 0
    sleep 0.1
  done
  superuser_psql >>"$(server_log postgres)" 2>&1 <<'EOF' && return 0
select 'create role dlock login password ''dlock'''
  where not exists (select from pg_roles where rolname = 'dlock') \gexec
select 'create database dlock_test owner dlock'
  where not exists (select from pg_database where datname = 'dlock_test') \gexec
EOF
  say "creating role dlock and database dlock_test failed"
  show_log_tail postgres
  return 1
}

init_mariadb_datadir() {
  local dir socket_path
  dir=$(server_dir mariadb)
  # A Unix socket path is limited to 107 bytes; a deep state directory gets one under $TMPDIR.
  socket_path=$dir/mariadbd.sock
  if ((${#socket_path} > 100)); then
    socket_path=$(mktemp -d "${TMPDIR:-/tmp}/dlock-mariadb.XXXXXX")/mariadbd.sock
  fi
  echo "$socket_path" >"$dir/socket_path"
  local user=()
  ((EUID == 0)) && user=(--user=root)
  # Once again after a failure, in a fresh directory: a CI run once saw it fail while other
  # servers started beside it, and its log's tail is only its advice, so the errors are shown.
  local attempt
  for attempt in 1 2; do
    if mariadb-install-db --no-defaults "${user[@]}" --datadir="$dir/data" --skip-test-db \
      --auth-root-authentication-method=normal >"$dir/install-db.log" 2>&1; then
      return 0
    fi
    say "mariadb-install-db failed (attempt $attempt of 2)"
    { grep -i -E 'error|fail|abort|signal|cannot|can.t' "$dir/install-db.log" | head -n 20
      tail -n 5 "$dir/install-db.log"; } | sed 's/^/  install-db| /' >&2
    rm -rf "$dir/data"
  done
  return 1
}

root_mariadb() {
  mariadb --no-defaults -S "$(mariadb_socket)" -u root -N -B "$@"
}

# Creates user dlock (password dlock) and database dlock_test once the server accepts
# connections on its socket. Succeeds without doing so when the server died or hangs:
# wait_until_answers then says why.
create_mariadb_test_database() {
  local deadline=$((SECONDS + ready_deadline_seconds))
  until root_mariadb -e 'select 1' >/dev/null 2>&1; do
    process_alive "$(recorded_pid mariadb)" || return 0
    ((SECONDS < deadline)) || return 0
    sleep 0.1
  done
  root_mariadb >>"$(server_log mariadb)" 2>&1 <<'EOF' && return 0
create user if not exists 'dlock'@'%' identified by 'dlock';
create database if not exists dlock_test;
grant all on dlock_test.* to 'dlock'@'%';
EOF
  say "creating user dlock and database dlock_test failed"
  show_log_tail mariadb
  return 1
}

write_zookeeper_config() {
  local id=$1 dir member
  dir=$(server_dir "$id")
  mkdir -p "$dir/data"
  {
    echo "# Written by scripts/test-servers.sh."
    echo "dataDir=$dir/data"
    echo "clientPort=$(server_port "$id")"
    # In the partition set every address of the namespace is one of this set's paths.
    if $partition_set; then echo "clientPortAddress=0.0.0.0"; else echo "clientPortAddress=127.0.0.1"; fi
    # Short ticks make elections and session expiry quick; the session bounds stay usable.
    echo "tickTime=500"
    echo "initLimit=20"
    echo "syncLimit=10"
    echo "minSessionTimeout=1000"
    echo "maxSessionTimeout=60000"
    echo "maxClientCnxns=0"
    echo "forceSync=no"
    echo "preAllocSize=4096"
    echo "admin.enableServer=false"
    echo "4lw.commands.whitelist=*"
    if is_ensemble_member "$id"; then
      echo "quorumListenOnAllIPs=false"
      for member in zk1 zk2 zk3; do
        echo "server.${member#zk}=127.0.0.1:$(cat "$(server_dir "$member")/quorum_port"):$(cat "$(server_dir "$member")/election_port")"
      done
    fi
  } >"$dir/zoo.cfg"
  if is_ensemble_member "$id"; then
    echo "${id#zk}" >"$dir/data/myid"
  fi
}

# ---------------------------------------------------------------------------------------------
# Groups

group_env_file() { echo "$state_dir/$1.env"; }
group_owner_file() { echo "$state_dir/$1.owner"; }

# "ADDRESS:PORT,...": the servers IDS over PATH (path_hosts PATH IDS...).
path_hosts() {
  local path=$1 id list=()
  shift
  for id in "$@"; do list+=("$(path_address "$id" "$path"):$(server_port "$id")"); done
  local IFS=,
  echo "${list[*]}"
}

# The partition set's lines: per path, URLs over that path's addresses.
write_partition_group_env() {
  local group=$1 path upper
  for path in "${partition_paths[@]}"; do
    upper=${path^^}
    case "$group" in
      redis)
        echo "export DLOCK_PARTITION_REDIS_$upper=redis://$(path_hosts "$path" redis)"
        echo "export DLOCK_PARTITION_REDLOCK_$upper=redis://$(path_hosts "$path" redlock1 redlock2 redlock3)"
        ;;
      postgres)
        echo "export DLOCK_PARTITION_POSTGRES_$upper=postgres://dlock:dlock@$(path_hosts "$path" postgres)/dlock_test"
        ;;
      zookeeper)
        echo "export DLOCK_PARTITION_ZOOKEEPER_$upper=zookeeper://$(path_hosts "$path" zookeeper)"
        echo "export DLOCK_PARTITION_ZOOKEEPER_ENSEMBLE_$upper=zookeeper://$(path_hosts "$path" zk1 zk2 zk3)"
        ;;
      mariadb)
        echo "export DLOCK_PARTITION_MARIADB_$upper=mysql://dlock:dlock@$(path_hosts "$path" mariadb)/dlock_test"
        ;;
      etcd)
        echo "export DLOCK_PARTITION_ETCD_$upper=etcd://$(path_hosts "$path" etcd)"
        echo "export DLOCK_PARTITION_ETCD_CLUSTER_$upper=etcd://$(path_hosts "$path" etcd1 etcd2 etcd3)"
        ;;
    esac
  done
}

write_group_env() {
  local group=$1 ports=()
  if $partition_set; then
    write_partition_group_env "$group" >"$(group_env_file "$group").tmp"
    mv "$(group_env_file "$group").tmp" "$(group_env_file "$group")"
    return
  fi
  case "$group" in
    redis)
      ports=("$(server_port redlock1)" "$(server_port redlock2)" "$(server_port redlock3)")
      printf 'export DLOCK_TEST_REDIS=redis://127.0.0.1:%s\n' "$(server_port redis)"
      printf 'export DLOCK_TEST_REDLOCK=redis://127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s\n' "${ports[@]}"
      ;;
    redis-tls)
      # Without options (the tests add tls_ca=$DLOCK_TEST_TLS_DIR/ca.crt and the like), and each
      # server's plain port too (*_PLAIN), for the tests' own look at the server.
      echo "export DLOCK_TEST_TLS_DIR=$(tls_dir)"
      echo "export DLOCK_TEST_REDIS_TLS=rediss://127.0.0.1:$(cat "$(server_dir redis-tls)/tls_port")"
      echo "export DLOCK_TEST_REDIS_TLS_PLAIN=redis://127.0.0.1:$(server_port redis-tls)"
      echo "export DLOCK_TEST_REDIS_MTLS=rediss://127.0.0.1:$(cat "$(server_dir redis-mtls)/tls_port")"
      echo "export DLOCK_TEST_REDIS_TLS_EXPIRED=rediss://127.0.0.1:$(cat "$(server_dir redis-expired)/tls_port")"
      echo "export DLOCK_TEST_REDIS_UNIX=redis+unix://$(redis_socket_path)"
      echo "export DLOCK_TEST_REDIS_UNIX_PLAIN=redis://127.0.0.1:$(server_port redis-unix)"
      ;;
    redis-tls-sentinel)
      echo "export DLOCK_TEST_TLS_DIR=$(tls_dir)"
      echo "export DLOCK_TEST_REDIS_TLS_SENTINEL=rediss+sentinel://127.0.0.1:$(cat "$(server_dir tls-sentinel1)/tls_port")/mymaster"
      ;;
    redis-tls-cluster)
      local member
      echo "export DLOCK_TEST_TLS_DIR=$(tls_dir)"
      for member in $(group_members redis-tls-cluster); do ports+=("$(cat "$(server_dir "$member")/tls_port")"); done
      printf 'export DLOCK_TEST_REDIS_TLS_CLUSTER=rediss+cluster://127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s\n' "${ports[@]}"
      ;;
    redis-sentinel | redis-failover)
      # The sentinels' URL, and the data nodes as started (master first; a failover moves it).
      local upper=${group#redis-} id hosts=() nodes=()
      upper=${upper^^}
      for id in $(sentinel_group_sentinels "$group"); do hosts+=("127.0.0.1:$(server_port "$id")"); done
      for id in $(group_members "$group"); do
        is_sentinel "$id" || nodes+=("127.0.0.1:$(server_port "$id")")
      done
      local IFS=,
      echo "export DLOCK_TEST_REDIS_${upper}=redis+sentinel://${hosts[*]}/mymaster"
      echo "export DLOCK_TEST_REDIS_${upper}_NODES=redis://${nodes[*]}"
      ;;
    redis-cluster)
      ports=("$(server_port rcluster1)" "$(server_port rcluster2)" "$(server_port rcluster3)")
      printf 'export DLOCK_TEST_REDIS_CLUSTER=redis+cluster://127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s\n' "${ports[@]}"
      printf 'export DLOCK_TEST_REDIS_CLUSTER_PLAIN=redis://127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s\n' "${ports[@]}"
      ports=("$(server_port rcluster4)" "$(server_port rcluster5)" "$(server_port rcluster6)")
      printf 'export DLOCK_TEST_REDIS_CLUSTER_REPLICAS=redis://127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s\n' "${ports[@]}"
      ;;
    postgres)
      printf 'export DLOCK_TEST_POSTGRES=postgres://dlock:dlock@127.0.0.1:%s/dlock_test\n' \
        "$(server_port postgres)"
      # The CA of its TLS certificate (shared with the redis-tls group).
      echo "export DLOCK_TEST_TLS_DIR=$(tls_dir)"
      ;;
    zookeeper)
      ports=("$(server_port zk1)" "$(server_port zk2)" "$(server_port zk3)")
      printf 'export DLOCK_TEST_ZOOKEEPER=zookeeper://127.0.0.1:%s\n' "$(server_port zookeeper)"
      printf 'export DLOCK_TEST_ZOOKEEPER_ENSEMBLE=zookeeper://127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s\n' "${ports[@]}"
      ;;
    mariadb)
      printf 'export DLOCK_TEST_MARIADB=mysql://dlock:dlock@127.0.0.1:%s/dlock_test\n' "$(server_port mariadb)"
      printf 'export DLOCK_TEST_MARIADB_SOCKET=%s\n' "$(mariadb_socket)"
      ;;
    etcd)
      ports=("$(server_port etcd1)" "$(server_port etcd2)" "$(server_port etcd3)")
      printf 'export DLOCK_TEST_ETCD=etcd://127.0.0.1:%s\n' "$(server_port etcd)"
      printf 'export DLOCK_TEST_ETCD_CLUSTER=etcd://127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s\n' "${ports[@]}"
      ;;
    etcd-secure)
      # Without options or credentials: the tests add them (the CA is DLOCK_TEST_TLS_DIR's).
      echo "export DLOCK_TEST_TLS_DIR=$(tls_dir)"
      echo "export DLOCK_TEST_ETCD_TLS=etcd://127.0.0.1:$(server_port etcd-tls)"
      echo "export DLOCK_TEST_ETCD_MTLS=etcd://127.0.0.1:$(server_port etcd-mtls)"
      echo "export DLOCK_TEST_ETCD_AUTH=etcd://127.0.0.1:$(server_port etcd-auth)"
      ;;
  esac >"$(group_env_file "$group").tmp"
  mv "$(group_env_file "$group").tmp" "$(group_env_file "$group")"
}

endpoints_file() { echo "$state_dir/endpoints.env"; }

# endpoints.env holds the lines of every group that runs, so that groups started by separate
# commands (one CTest fixture per backend) share one file.
write_endpoints_file() {
  local group files=()
  for group in "${all_groups[@]}"; do
    [[ -f "$(group_env_file "$group")" ]] && files+=("$(group_env_file "$group")")
  done
  if ((${#files[@]} == 0)); then
    rm -f "$(endpoints_file)"
    return
  fi
  {
    echo "# dlock test servers in $state_dir (scripts/test-servers.sh); source this file."
    if $partition_set; then
      echo "export DLOCK_PARTITION_NETNS=$netns"
    fi
    cat "${files[@]}"
  } >"$(endpoints_file).tmp"
  mv "$(endpoints_file).tmp" "$(endpoints_file)"
}

group_healthy() {
  local id
  [[ -f "$(group_env_file "$1")" ]] || return 1
  for id in $(group_members "$1"); do
    server_healthy "$id" || return 1
  done
}

group_recorded() {
  local id
  for id in $(group_members "$1"); do
    [[ -d "$(server_dir "$id")" ]] && return 0
  done
  [[ -f "$(group_env_file "$1")" ]]
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

remove_group() {
  local group=$1 id socket_dir
  # shellcheck disable=SC2046 # the member list is meant to split
  stop_servers $(group_members "$group") || die "$group: could not stop every server"
  if [[ $group == redis-tls && -f "$(server_dir redis-unix)/socket_path" ]]; then
    rm -f "$(redis_socket_path)"
  fi
  if [[ $group == postgres && -f "$(server_dir postgres)/socket_dir" ]]; then
    socket_dir=$(postgres_socket_dir)
    [[ $socket_dir == "$(server_dir postgres)/socket" ]] || rm -rf "$socket_dir"
  fi
  if [[ $group == mariadb && -f "$(server_dir mariadb)/socket_path" ]]; then
    socket_dir=$(dirname "$(mariadb_socket)")
    [[ $socket_dir == "$(server_dir mariadb)" ]] || rm -rf "$socket_dir"
  fi
  for id in $(group_members "$group"); do
    rm -rf "$(server_dir "$id")"
  done
  rm -f "$(group_env_file "$group")" "$(group_owner_file "$group")"
}

# Starts every server of `group` from scratch on the ports assign_ports picked; when a port was
# taken between the pick and the bind, starts them again on new ports.
start_group_fresh() {
  local group=$1 attempt status id ids
  read -r -a ids <<<"$(group_members "$group")"
  if [[ $group == postgres ]]; then
    init_postgres_cluster || return 1
  fi
  if [[ $group == mariadb ]]; then
    init_mariadb_datadir || return 1
  fi
  for ((attempt = 1; attempt <= port_attempts; attempt++)); do
    if ((attempt > 1)); then
      assign_ports "$group"
    fi
    if [[ $group == postgres ]]; then
      write_postgres_settings
    fi
    for id in "${ids[@]}"; do
      if [[ $group == zookeeper ]]; then
        write_zookeeper_config "$id"
      fi
      launch_server "$id"
    done
    status=0
    if [[ $group == postgres ]]; then
      create_postgres_test_database || status=1
    fi
    if [[ $group == mariadb ]]; then
      create_mariadb_test_database || status=1
    fi
    if ((status == 0)); then
      wait_until_all_answer "${ids[@]}" || status=$?
    fi
    if ((status == 0)) && [[ $group == redis-sentinel || $group == redis-failover ]]; then
      wait_until_sentinel_group_formed "$group" || status=1
    fi
    if ((status == 0)) && [[ $group == redis-cluster ]]; then
      create_redis_cluster || status=1
    fi
    if ((status == 0)) && [[ $group == redis-tls-sentinel ]]; then
      wait_until_tls_sentinel_formed || status=1
    fi
    if ((status == 0)) && [[ $group == redis-tls-cluster ]]; then
      create_tls_redis_cluster || status=1
    fi
    if ((status == 0)) && [[ $group == etcd-secure ]]; then
      setup_etcd_auth || status=1
    fi
    if ((status == 0)); then
      return 0
    fi
    stop_servers "${ids[@]}" || return 1
    ((status == 2)) || return 1
    say "$group: trying other ports"
  done
  say "$group: gave up after $port_attempts attempts to find free ports"
  return 1
}

# Runs as a background job per group.
start_group() {
  local group=$1 owner=$2 started
  started=$(milliseconds_now)
  if ! start_group_fresh "$group"; then
    say "$group: failed to start; see above"
    remove_group "$group"
    return 1
  fi
  echo "$owner" >"$(group_owner_file "$group")"
  write_group_env "$group"
  say "$group: up in $(seconds_since "$started")s"
}

check_group_prerequisites() {
  case "$1" in
    redis | redis-*)
      if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
        die "redis-server or redis-cli not found: apt-get install redis-server redis-tools (or scripts/setup-debian.sh --servers)"
      fi
      ;;
    postgres)
      [[ -x $postgres_bin/postgres && -x $postgres_bin/psql ]] ||
        die "PostgreSQL 15 not found in $postgres_bin: apt-get install postgresql-15 (or scripts/setup-debian.sh --servers)"
      if ((EUID == 0)); then
        id postgres >/dev/null 2>&1 || die "system user postgres not found: apt-get install postgresql-15"
      fi
      ;;
    zookeeper)
      command -v java >/dev/null || die "java not found: apt-get install default-jre-headless"
      zookeeper_classpath >/dev/null
      ;;
    mariadb)
      if [[ ! -x /usr/sbin/mariadbd ]] || ! command -v mariadb-install-db >/dev/null || ! command -v mariadb >/dev/null; then
        die "mariadbd, mariadb-install-db or mariadb not found: apt-get install mariadb-server mariadb-client (or scripts/setup-debian.sh --servers)"
      fi
      ;;
    etcd | etcd-secure)
      if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
        die "etcd or etcdctl not found: apt-get install etcd-server etcd-client (or scripts/setup-debian.sh --servers)"
      fi
      ;;
  esac
}

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
    check_group_prerequisites "$group"
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
  if [[ " ${to_start[*]} " == *" redis-tls"* || " ${to_start[*]} " == *" postgres "* ||
    " ${to_start[*]} " == *" etcd-secure "* ]]; then
    make_test_certificates || die "cannot make the test certificates in $(tls_dir)"
  fi
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
  local id=$1 glob=${2:-*} port ids id_list killed
  require_running "$id" >/dev/null
  port=$(server_port "$id")
  case "$(group_of "$id")" in
    redis | redis-tls | redis-cluster | redis-tls-cluster)
      # CLIENT LIST runs on its own connection, which is closed before the kills.
      ids=$("${in_netns[@]}" timeout 5 redis-cli -h 127.0.0.1 -p "$port" CLIENT LIST |
        sed -n 's/^id=\([0-9]*\) .* name=\([^ ]*\) .*/\1 \2/p' | ids_with_name_matching "$glob")
      killed=0
      if [[ -n $ids ]]; then
        mapfile -t id_list <<<"$ids"
        killed=$(printf 'CLIENT KILL ID %s\n' "${id_list[@]}" | "${in_netns[@]}" timeout 5 redis-cli -h 127.0.0.1 -p "$port" |
          awk '{ total += $1 } END { print total + 0 }')
      fi
      ;;
    postgres)
      ids=$(superuser_psql -F ' ' -c \
        "select pid, application_name from pg_stat_activity where datname = 'dlock_test' and pid <> pg_backend_pid()" |
        ids_with_name_matching "$glob")
      killed=0
      if [[ -n $ids ]]; then
        # With a timeout, pg_terminate_backend waits until the backend has exited.
        killed=$(superuser_psql -c \
          "select count(*) filter (where pg_terminate_backend(pid, 5000)) from unnest('{${ids//$'\n'/,}}'::int[]) as pid")
      fi
      ;;
    mariadb)
      ids=$(root_mariadb -e "select id, user from information_schema.processlist where user <> 'root' and user <> 'system user' and id <> connection_id()" |
        ids_with_name_matching "$glob")
      killed=0
      if [[ -n $ids ]]; then
        mapfile -t id_list <<<"$ids"
        root_mariadb -e "$(printf 'kill connection %s; ' "${id_list[@]}")" 2>/dev/null || true
        killed=${#id_list[@]}
      fi
      ;;
    zookeeper) die "kill-connections is not available for ZooKeeper; use pause, restart or kill" ;;
  esac
  say "ended $killed connection(s) to $id matching '$glob'"
}

take_state_lock() {
  exec 9>"$state_dir/.lock"
  flock -w "$lock_deadline_seconds" 9 ||
    die "another test-servers.sh holds $state_dir/.lock for over ${lock_deadline_seconds}s"
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
