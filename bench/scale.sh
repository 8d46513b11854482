#!/usr/bin/env bash
# The figures of docs/scaling.md: memory, descriptors and CPU per held lock on every backend,
# the server's side of them, what a server limit does to dlock, and grants with many waiters
# on one name.
#
#   bench/scale.sh [--build DIR] [--held N]
#
# Needs the target dlock-scale-bench. Starts its own test servers (scripts/test-servers.sh,
# a state directory of its own: Redis, PostgreSQL, ZooKeeper, MariaDB, etcd) and stops them
# when it ends. N (default 10000) locks are held on the networked backends and 10 N on the
# memory backend and Redis, each set kept 10 s (the client's CPU meanwhile). Then: the
# descriptor limit for files, PostgreSQL's lock table full, 2, 100 and 1000 ZooKeeper
# waiters and 2, 20 and 100 Redis waiters on one name, and ZooKeeper past its connections per
# client address. Takes about 5 minutes on the 2-core reference machine.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build
held=10000
keep=10  # seconds the locks are kept, to measure what keeping them costs the client
while (($#)); do
  case "$1" in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --held) held=$2; shift 2 ;;
    *) echo "usage: bench/scale.sh [--build DIR] [--held N]" >&2; exit 64 ;;
  esac
done
scale=$build/bench/dlock-scale-bench
[[ -x $scale ]] || { echo "scale: $scale is missing; build dlock-scale-bench" >&2; exit 1; }

state=$(mktemp -d "${TMPDIR:-/tmp}/dlock-scale.XXXXXX")
chmod o+x "$state"  # PostgreSQL runs as its own user
servers=("$root/scripts/test-servers.sh" --state-dir "$state")
cleanup() {
  "${servers[@]}" stop >/dev/null 2>&1 || true
  rm -rf "$state"
}
trap cleanup EXIT
"${servers[@]}" start --owner scale redis postgres zookeeper mariadb etcd >/dev/null
# shellcheck source=/dev/null
source "$state/endpoints.env"
port_of() { local rest=${1##*:}; echo "${rest%%[/?]*}"; }
redis_port=$(port_of "$DLOCK_TEST_REDIS")
zookeeper_port=$(port_of "$DLOCK_TEST_ZOOKEEPER")
postgres_port=$(port_of "$DLOCK_TEST_POSTGRES")
superuser_sql() {
  psql -h "$state/postgres/socket" -p "$postgres_port" -U postgres -d dlock_test -Atqc "$1"
}
section() { echo; echo "== $*"; }

# Server figures before the locks are taken and while they are held. A probe prints "name
# value" lines; server_before runs it now and prints the --while-held command that runs it
# again; server_report prints "server: name before -> during (per held lock)" for each.
server_before() {
  bash -c "$1" >"$state/before"
  echo "{ $1; } > '$state/during'; sleep $keep"
}
server_report() {
  awk -v n="$1" 'NR == FNR { before[$1] = $2; next }
    ($1 in before) { printf "server: %s %s -> %s (%.1f per held lock)\n", $1, before[$1], $2,
                     ($2 - before[$1]) / n }' "$state/before" "$state/during"
}

redis_probe="redis-cli -p $redis_port info memory | tr ':' ' ' | grep '^used_memory '; echo keys \$(redis-cli -p $redis_port dbsize)"
zookeeper_probe="echo mntr | nc 127.0.0.1 $zookeeper_port | grep -E '^zk_(znode_count|watch_count|approximate_data_size|ephemerals_count)'"

section "memory://: $((held * 10)) held locks"
"$scale" held memory:// $((held * 10)) --while-held "sleep $keep"

section "file://: $held held locks (descriptor limit: ulimit -n $(ulimit -n))"
"$scale" held "file://$state/files" "$held" --while-held "sleep $keep"

section "file://: past the descriptor limit (ulimit -n 1024, 2000 locks)"
(ulimit -n 1024 && "$scale" held "file://$state/files-limited" 2000) || true

section "redis://: $((held * 10)) held locks, one server (default expiry 30 s: an extension every 10 s)"
"$scale" held "$DLOCK_TEST_REDIS?prefix=scale:" $((held * 10)) \
  --while-held "$(server_before "$redis_probe")"
server_report $((held * 10))

section "redis://: the watchdog of $held held locks with expiry 3 s (an extension every second)"
"$scale" held "$DLOCK_TEST_REDIS?prefix=scale-short:&expiry=3s" "$held" --while-held "sleep $keep"

section "postgres://: $held held locks (max_locks_per_transaction $(superuser_sql 'show max_locks_per_transaction'), max_connections $(superuser_sql 'show max_connections'))"
"$scale" held "$DLOCK_TEST_POSTGRES" "$held" --while-held \
  "psql -h '$state/postgres/socket' -p $postgres_port -U postgres -d dlock_test -Atc \"select 'server: advisory locks in pg_locks: ' || count(*) from pg_locks where locktype = 'advisory'\"; sleep $keep"

section "postgres://: the shared lock table full, at PostgreSQL's defaults (64 x 100)"
superuser_sql "alter system set max_locks_per_transaction = 64"
superuser_sql "alter system set max_connections = 100"
"${servers[@]}" restart postgres >/dev/null
"$scale" held "$DLOCK_TEST_POSTGRES" $((held * 3)) || true
superuser_sql "alter system reset all"
"${servers[@]}" restart postgres >/dev/null

section "mysql:// (MariaDB): $held held locks"
"$scale" held "$DLOCK_TEST_MARIADB" "$held" --while-held "sleep $keep"

section "zookeeper://: $held held locks"
"$scale" held "$DLOCK_TEST_ZOOKEEPER/dlock-scale" "$held" \
  --while-held "$(server_before "$zookeeper_probe")"
server_report "$held"

section "etcd://: $held held locks"
"$scale" held "$DLOCK_TEST_ETCD/dlock-scale" "$held" --while-held "sleep $keep"

section "zookeeper://: waiters on one name, one session each (a herd would send more per grant)"
for waiters in 2 100 1000; do
  "$scale" waiters "$DLOCK_TEST_ZOOKEEPER/dlock-scale-waiters" "$waiters" --grants 2000 \
    --zookeeper-stats "127.0.0.1:$zookeeper_port"
done

section "redis://: waiters on one name, one provider (connection) each: commands per grant"
for waiters in 2 20 100; do
  "$scale" waiters "$DLOCK_TEST_REDIS?prefix=scale-waiters-$waiters:" "$waiters" --grants 2000 \
    --redis-stats "127.0.0.1:$redis_port"
done

section "zookeeper://: past maxClientCnxns (at ZooKeeper's default, 60 connections per client address)"
sed -i 's/^maxClientCnxns=.*/maxClientCnxns=60/' "$state/zookeeper/zoo.cfg"
"${servers[@]}" restart zookeeper >/dev/null
started=$SECONDS
"$scale" waiters "$DLOCK_TEST_ZOOKEEPER/dlock-scale-connections" 61 --grants 100 ||
  echo "(the 61st provider failed after $((SECONDS - started)) s)"
