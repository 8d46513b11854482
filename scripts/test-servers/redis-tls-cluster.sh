# shellcheck shell=bash
# Group redis-tls-cluster: a Redis Cluster of three masters (no replicas), clients and bus over TLS.

register_group redis-tls-cluster redis-tls-cluster tls-rcluster1 tls-rcluster2 tls-rcluster3

redis-tls-cluster::launch() { launch_redis "$1" "$(tls_only_listener_arguments "$1")"; }

redis-tls-cluster::after_ready() {
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

redis-tls-cluster::extra_ports() { echo tls_port bus_port; }
redis-tls-cluster::uses_test_ca() { :; }
redis-tls-cluster::prerequisites() { redis_prerequisites; }
redis-tls-cluster::answers() { redis_answers "$1"; }
redis-tls-cluster::is_process() { redis_is_process "$@"; }
redis-tls-cluster::kill_connections() { redis_kill_connections "$@"; }

redis-tls-cluster::env() {
  local member ports=()
  echo "export DLOCK_TEST_TLS_DIR=$(tls_dir)"
  for member in $(group_members redis-tls-cluster); do ports+=("$(cat "$(server_dir "$member")/tls_port")"); done
  printf 'export DLOCK_TEST_REDIS_TLS_CLUSTER=rediss+cluster://127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s\n' "${ports[@]}"
}
