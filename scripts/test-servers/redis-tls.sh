# shellcheck shell=bash
# Group redis-tls: TLS servers with certificates of the test CA (redis-tls: client certificates
# optional; redis-mtls: required; redis-expired: an expired certificate) and one on a Unix socket
# (redis-unix). Each keeps its plain port for the readiness checks and the tests' own probes.

register_group redis-tls redis-tls redis-tls redis-mtls redis-expired redis-unix

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

redis-tls::listener_arguments() {
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
  esac
}

redis-tls::extra_ports() { [[ $1 == redis-unix ]] || echo tls_port; }
redis-tls::uses_test_ca() { :; }
redis-tls::prerequisites() { redis_prerequisites; }
redis-tls::launch() { launch_redis "$1" "$(redis-tls::listener_arguments "$1")"; }
redis-tls::answers() { redis_answers "$1"; }
redis-tls::is_process() { redis_is_process "$@"; }
redis-tls::kill_connections() { redis_kill_connections "$@"; }

redis-tls::remove() {
  if [[ -f "$(server_dir redis-unix)/socket_path" ]]; then
    rm -f "$(redis_socket_path)"
  fi
}

# Without options (the tests add tls_ca=$DLOCK_TEST_TLS_DIR/ca.crt and the like), and each
# server's plain port too (*_PLAIN), for the tests' own look at the server.
redis-tls::env() {
  echo "export DLOCK_TEST_TLS_DIR=$(tls_dir)"
  echo "export DLOCK_TEST_REDIS_TLS=rediss://127.0.0.1:$(cat "$(server_dir redis-tls)/tls_port")"
  echo "export DLOCK_TEST_REDIS_TLS_PLAIN=redis://127.0.0.1:$(server_port redis-tls)"
  echo "export DLOCK_TEST_REDIS_MTLS=rediss://127.0.0.1:$(cat "$(server_dir redis-mtls)/tls_port")"
  echo "export DLOCK_TEST_REDIS_TLS_EXPIRED=rediss://127.0.0.1:$(cat "$(server_dir redis-expired)/tls_port")"
  echo "export DLOCK_TEST_REDIS_UNIX=redis+unix://$(redis_socket_path)"
  echo "export DLOCK_TEST_REDIS_UNIX_PLAIN=redis://127.0.0.1:$(server_port redis-unix)"
}
