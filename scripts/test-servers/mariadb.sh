# shellcheck shell=bash disable=SC2154 # in_netns: set by test-servers.sh
# Group mariadb: one MariaDB server with user dlock and database dlock_test. A throwaway server,
# so durability is traded for speed; named locks need no tables. It runs as the invoking user
# (root may run it with --user=root).

register_group mariadb mariadb mariadb

mariadb_socket() { cat "$(server_dir mariadb)/socket_path"; }

root_mariadb() {
  mariadb --no-defaults -S "$(mariadb_socket)" -u root -N -B "$@"
}

mariadb::prerequisites() {
  if [[ ! -x /usr/sbin/mariadbd ]] || ! command -v mariadb-install-db >/dev/null || ! command -v mariadb >/dev/null; then
    die "mariadbd, mariadb-install-db or mariadb not found: apt-get install mariadb-server mariadb-client (or scripts/setup-debian.sh --servers)"
  fi
}

mariadb::prepare() {
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

mariadb::launch() {
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

# Creates user dlock (password dlock) and database dlock_test once the server accepts
# connections on its socket. Succeeds without doing so when the server died or hangs:
# wait_until_answers then says why.
mariadb::before_wait() {
  local deadline=$((SECONDS + ready_deadline_seconds))
  until root_mariadb -e 'select 1' >/dev/null 2>&1; do
    process_alive "$(recorded_pid mariadb)" || return 0
    ((SECONDS < deadline)) || return 0
    sleep 0.1
  done
  root_mariadb >>"$(server_log mariadb)" 2>&1 <<'SQL' && return 0
create user if not exists 'dlock'@'%' identified by 'dlock';
create database if not exists dlock_test;
grant all on dlock_test.* to 'dlock'@'%';
SQL
  say "creating user dlock and database dlock_test failed"
  show_log_tail mariadb
  return 1
}

mariadb::answers() {
  [[ "$("${in_netns[@]}" timeout 5 mariadb --no-defaults -h 127.0.0.1 -P "$(server_port "$1")" -u dlock -pdlock \
    -N -B -e 'select 1' dlock_test 2>/dev/null)" == 1 ]]
}

mariadb::is_process() { [[ $2 == *mariadbd*"$(server_dir "$1")/data"* ]]; }

# Ends the connections whose user matches the glob.
mariadb::kill_connections() {
  local glob=$2 ids id_list
  ids=$(root_mariadb -e "select id, user from information_schema.processlist where user <> 'root' and user <> 'system user' and id <> connection_id()" |
    ids_with_name_matching "$glob")
  killed=0
  if [[ -n $ids ]]; then
    mapfile -t id_list <<<"$ids"
    root_mariadb -e "$(printf 'kill connection %s; ' "${id_list[@]}")" 2>/dev/null || true
    killed=${#id_list[@]}
  fi
}

mariadb::remove() {
  local socket_dir
  [[ -f "$(server_dir mariadb)/socket_path" ]] || return 0
  socket_dir=$(dirname "$(mariadb_socket)")
  [[ $socket_dir == "$(server_dir mariadb)" ]] || rm -rf "$socket_dir"
}

mariadb::env() {
  printf 'export DLOCK_TEST_MARIADB=mysql://dlock:dlock@127.0.0.1:%s/dlock_test\n' "$(server_port mariadb)"
  printf 'export DLOCK_TEST_MARIADB_SOCKET=%s\n' "$(mariadb_socket)"
}

mariadb::partition_env() {
  echo "export DLOCK_PARTITION_MARIADB_$3=mysql://dlock:dlock@$(path_hosts "$2" mariadb)/dlock_test"
}
