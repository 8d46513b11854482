# shellcheck shell=bash disable=SC2154 # partition_set, in_netns: set by test-servers.sh
# Group redis-cluster: a Redis Cluster, masters rcluster1-3 (the slots split in three) and
# rcluster4-6, one replica each.

register_group redis-cluster redis-cluster rcluster1 rcluster2 rcluster3 rcluster4 rcluster5 rcluster6

# The cluster bus on a port of its own (not port + 10000, which may be taken), and a short node
# timeout so that a failover in a test comes quickly.
# In the partition set each node announces its path A address (partition-net.sh).
redis-cluster::launch() {
  local announce=""
  $partition_set && announce="--cluster-announce-ip $(announced_address "$1")"
  launch_redis "$1" "--cluster-enabled yes --cluster-config-file $(server_dir "$1")/nodes.conf \
--cluster-port $(cat "$(server_dir "$1")/bus_port") --cluster-node-timeout 2000 $announce"
}

# redis-cli makes masters of the first three nodes it is given. Waits until every member says
# cluster_state:ok and every replica is in sync with its master, so that a failover can start
# at once.
redis-cluster::after_ready() {
  local id nodes=() deadline=$((SECONDS + ready_deadline_seconds))
  for id in $(group_members redis-cluster); do
    nodes+=("$(announced_address "$id"):$(server_port "$id")")
  done
  if ! "${in_netns[@]}" timeout "$ready_deadline_seconds" redis-cli --cluster create "${nodes[@]}" \
    --cluster-replicas 1 --cluster-yes \
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

redis-cluster::extra_ports() { echo bus_port; }
redis-cluster::prerequisites() { redis_prerequisites; }
redis-cluster::answers() { redis_answers "$1"; }
redis-cluster::is_process() { redis_is_process "$@"; }
redis-cluster::kill_connections() { redis_kill_connections "$@"; }

# The partition set's lines, over path A only: the nodes announce their path A addresses, which
# is where CLUSTER SLOTS sends every client (partition-net.sh). The masters as seeds, and all
# six nodes in the order rcluster1-6.
redis-cluster::partition_env() {
  local path=$2 upper=$3
  [[ $path == a ]] || return 0
  local members
  read -r -a members <<<"$(group_members redis-cluster)"
  echo "export DLOCK_PARTITION_REDIS_CLUSTER_$upper=redis+cluster://$(path_hosts a "${members[@]:0:3}")"
  echo "export DLOCK_PARTITION_REDIS_CLUSTER_NODES_$upper=redis://$(path_hosts a "${members[@]}")"
}

redis-cluster::env() {
  local ports=("$(server_port rcluster1)" "$(server_port rcluster2)" "$(server_port rcluster3)")
  printf 'export DLOCK_TEST_REDIS_CLUSTER=redis+cluster://127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s\n' "${ports[@]}"
  printf 'export DLOCK_TEST_REDIS_CLUSTER_PLAIN=redis://127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s\n' "${ports[@]}"
  ports=("$(server_port rcluster4)" "$(server_port rcluster5)" "$(server_port rcluster6)")
  printf 'export DLOCK_TEST_REDIS_CLUSTER_REPLICAS=redis://127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s\n' "${ports[@]}"
}
