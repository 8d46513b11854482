# shellcheck shell=bash disable=SC2154 # partition_set, in_netns, postgres_bin: set by test-servers.sh
# Group postgres: one PostgreSQL 15 cluster with role dlock and database dlock_test, serving TLS
# with the test CA's certificate beside plain connections.

register_group postgres postgres postgres

run_as_postgres=()
if ((EUID == 0)); then
  run_as_postgres=(setpriv --reuid=postgres --regid=postgres --init-groups --)
fi

postgres_socket_dir() { cat "$(server_dir postgres)/socket_dir"; }

superuser_psql() {
  "$postgres_bin/psql" -X -q -At -h "$(postgres_socket_dir)" -p "$(server_port postgres)" \
    -U postgres -d postgres -v ON_ERROR_STOP=1 "$@"
}

postgres::prerequisites() {
  [[ -x $postgres_bin/postgres && -x $postgres_bin/psql ]] ||
    die "PostgreSQL 15 not found in $postgres_bin: apt-get install postgresql-15 (or scripts/setup-debian.sh --servers)"
  if ((EUID == 0)); then
    id postgres >/dev/null 2>&1 || die "system user postgres not found: apt-get install postgresql-15"
  fi
}

postgres::uses_test_ca() { :; }

postgres::prepare() {
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

postgres::configure() {
  cat >"$(server_dir postgres)/data/dlock-test.conf" <<CONF
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
CONF
  install -m 600 "$(tls_dir)/server.crt" "$(tls_dir)/server.key" "$(server_dir postgres)/data/"
  if ((EUID == 0)); then
    chown postgres:postgres "$(server_dir postgres)/data/server.crt" "$(server_dir postgres)/data/server.key"
  fi
}

postgres::launch() {
  local dir
  dir=$(server_dir postgres)
  setsid "${in_netns[@]}" "${run_as_postgres[@]}" "$postgres_bin/postgres" -D "$dir/data" \
    </dev/null >>"$dir/server.log" 2>&1 9>&- &
  echo $! >"$dir/pid"
}

# Creates role dlock and database dlock_test once the fresh cluster accepts connections. Succeeds
# without doing so when the server died or hangs: wait_until_answers then says why.
postgres::before_wait() {
  local deadline=$((SECONDS + ready_deadline_seconds))
  until "$postgres_bin/pg_isready" -q -h "$(postgres_socket_dir)" -p "$(server_port postgres)"; do
    process_alive "$(recorded_pid postgres)" || return 0
    ((SECONDS < deadline)) || return 0
    sleep 0.1
  done
  superuser_psql >>"$(server_log postgres)" 2>&1 <<'SQL' && return 0
select 'create role dlock login password ''dlock'''
  where not exists (select from pg_roles where rolname = 'dlock') \gexec
select 'create database dlock_test owner dlock'
  where not exists (select from pg_database where datname = 'dlock_test') \gexec
SQL
  say "creating role dlock and database dlock_test failed"
  show_log_tail postgres
  return 1
}

postgres::answers() {
  [[ "$("${in_netns[@]}" timeout 5 "$postgres_bin/psql" -X -At -h 127.0.0.1 -p "$(server_port "$1")" -U dlock \
    -d dlock_test -c 'select 1' 2>/dev/null)" == 1 ]]
}

postgres::is_process() { [[ $2 == *postgres*"$(server_dir "$1")/data"* ]]; }

# Fast shutdown: SIGTERM would wait for the clients to leave.
postgres::stop_signal() { echo INT; }

# Ends the backends whose application_name matches the glob.
postgres::kill_connections() {
  local glob=$2 ids
  ids=$(superuser_psql -F ' ' -c \
    "select pid, application_name from pg_stat_activity where datname = 'dlock_test' and pid <> pg_backend_pid()" |
    ids_with_name_matching "$glob")
  killed=0
  if [[ -n $ids ]]; then
    # With a timeout, pg_terminate_backend waits until the backend has exited.
    killed=$(superuser_psql -c \
      "select count(*) filter (where pg_terminate_backend(pid, 5000)) from unnest('{${ids//$'\n'/,}}'::int[]) as pid")
  fi
}

postgres::remove() {
  local socket_dir
  [[ -f "$(server_dir postgres)/socket_dir" ]] || return 0
  socket_dir=$(postgres_socket_dir)
  [[ $socket_dir == "$(server_dir postgres)/socket" ]] || rm -rf "$socket_dir"
}

postgres::env() {
  printf 'export DLOCK_TEST_POSTGRES=postgres://dlock:dlock@127.0.0.1:%s/dlock_test\n' \
    "$(server_port postgres)"
  # The CA of its TLS certificate (shared with the redis-tls group).
  echo "export DLOCK_TEST_TLS_DIR=$(tls_dir)"
}

postgres::partition_env() {
  echo "export DLOCK_PARTITION_POSTGRES_$3=postgres://dlock:dlock@$(path_hosts "$2" postgres)/dlock_test"
}
