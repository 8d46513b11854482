# shellcheck shell=bash
# Group redis-tls-sentinel: a master, a replica and one sentinel (quorum 1), all over TLS; the
# tests only lock through it, they never fail it over.

register_group redis-tls-sentinel redis-tls-sentinel tls-sentinel-master tls-sentinel-replica tls-sentinel1

# The sentinel reaches the master and its replica over TLS and serves clients over TLS too.
redis-tls-sentinel::launch() {
  local id=$1 dir tls
  if [[ $id != tls-sentinel1 ]]; then
    launch_redis "$id" "$(tls_only_listener_arguments "$id")"
    return
  fi
  dir=$(server_dir "$id")
  tls=$(tls_dir)
  cat >"$dir/sentinel.conf" <<CONF
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
CONF
  setsid redis-server "$dir/sentinel.conf" --sentinel </dev/null >>"$dir/server.log" 2>&1 9>&- &
  echo $! >"$dir/pid"
}

# Up once the sentinel sees the master and its replica (both by their TLS ports).
redis-tls-sentinel::after_ready() {
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

redis-tls-sentinel::extra_ports() { echo tls_port; }
redis-tls-sentinel::uses_test_ca() { :; }
redis-tls-sentinel::prerequisites() { redis_prerequisites; }
redis-tls-sentinel::answers() { redis_answers "$1"; }
redis-tls-sentinel::is_process() { redis_is_process "$@"; }

redis-tls-sentinel::env() {
  echo "export DLOCK_TEST_TLS_DIR=$(tls_dir)"
  echo "export DLOCK_TEST_REDIS_TLS_SENTINEL=rediss+sentinel://127.0.0.1:$(cat "$(server_dir tls-sentinel1)/tls_port")/mymaster"
}
