# shellcheck shell=bash disable=SC2154 # partition_set, in_netns: set by test-servers.sh
# Group redis: a standalone Redis (redis) and three independent ones for RedLock (redlock1-3).
# Also the helpers every redis-* module builds on, so it is sourced before them.

register_group redis redis redis redlock1 redlock2 redlock3

redis_prerequisites() {
  if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    die "redis-server or redis-cli not found: apt-get install redis-server redis-tools (or scripts/setup-debian.sh --servers)"
  fi
}

redis_answers() {
  [[ "$("${in_netns[@]}" timeout 2 redis-cli -h 127.0.0.1 -p "$(server_port "$1")" PING 2>/dev/null)" == PONG ]]
}

# The address a server of a Sentinel or Cluster group announces to its peers and clients: in
# the partition set its path A address (partition-net.sh), else loopback.
announced_address() {
  if $partition_set; then path_address "$1" a; else echo 127.0.0.1; fi
}

# Redis rewrites its process title to "redis-server ADDRESS:PORT"; before that it is the command.
redis_is_process() {
  local cmdline=$2 port=$3
  [[ $cmdline == *redis-server* && ($cmdline == *":$port "* || $cmdline == *"--port $port "*) ]]
}

# launch_redis ID [LISTENER_ARGUMENTS]: a data node on its plain port, plus the words of the
# second argument (TLS, cluster or socket options).
launch_redis() {
  local id=$1 listener=${2:-} dir port
  dir=$(server_dir "$id")
  port=$(server_port "$id")
  # Protected mode refuses every address but loopback; the partition set's paths are reachable
  # only from this host's root namespace.
  local protected=yes
  $partition_set && protected=no
  # The partition set's plain servers keep every write on disk before answering, as
  # docs/redis.md asks where fencing tokens must survive a restart: its nemesis restarts them
  # under holders. The others keep nothing (a restart forgets every grant, as tests expect).
  local persistence=(--save '' --appendonly no)
  if $partition_set && [[ $id == redis || $id == redlock[1-3] ]]; then
    persistence=(--save '' --appendonly yes --appendfsync always)
  fi
  # On SIGTERM a master waits up to 10 s for lagging replicas, and a replica a partition
  # scenario cut off lags until then: these servers stop at once (what they keep on disk is
  # already written).
  # shellcheck disable=SC2046,SC2086 # one argument per address and per listener option
  setsid "${in_netns[@]}" redis-server --bind $(listen_addresses "$id") --port "$port" "${persistence[@]}" --dir "$dir" \
    --protected-mode "$protected" --shutdown-on-sigterm now --daemonize no $listener \
    </dev/null >>"$dir/server.log" 2>&1 9>&- &
  echo $! >"$dir/pid"
}

# Ends the connections of clients whose CLIENT SETNAME matches `glob`.
redis_kill_connections() {
  local id=$1 glob=$2 port=$3 ids id_list
  # CLIENT LIST runs on its own connection, which is closed before the kills.
  ids=$("${in_netns[@]}" timeout 5 redis-cli -h 127.0.0.1 -p "$port" CLIENT LIST |
    sed -n 's/^id=\([0-9]*\) .* name=\([^ ]*\) .*/\1 \2/p' | ids_with_name_matching "$glob")
  killed=0
  if [[ -n $ids ]]; then
    mapfile -t id_list <<<"$ids"
    killed=$(printf 'CLIENT KILL ID %s\n' "${id_list[@]}" | "${in_netns[@]}" timeout 5 redis-cli -h 127.0.0.1 -p "$port" |
      awk '{ total += $1 } END { print total + 0 }')
  fi
}

# Waits until the reply of redis-cli `command...` on member `id` has the line `line`, until
# `deadline` (in $SECONDS).
redis_cluster_member_reaches() {
  local id=$1 deadline=$2 line=$3
  shift 3
  until "${in_netns[@]}" timeout 2 redis-cli -p "$(server_port "$id")" "$@" 2>/dev/null | grep -q "^$line"; do
    if ((SECONDS >= deadline)); then
      say "redis-cluster: $id did not say $line within ${ready_deadline_seconds}s"
      return 1
    fi
    sleep 0.1
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

redis::prerequisites() { redis_prerequisites; }
redis::launch() { launch_redis "$1"; }
redis::answers() { redis_answers "$1"; }
redis::is_process() { redis_is_process "$@"; }
redis::kill_connections() { redis_kill_connections "$@"; }

redis::env() {
  local ports=("$(server_port redlock1)" "$(server_port redlock2)" "$(server_port redlock3)")
  printf 'export DLOCK_TEST_REDIS=redis://127.0.0.1:%s\n' "$(server_port redis)"
  printf 'export DLOCK_TEST_REDLOCK=redis://127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s\n' "${ports[@]}"
}

redis::partition_env() {
  local path=$2 upper=$3
  echo "export DLOCK_PARTITION_REDIS_$upper=redis://$(path_hosts "$path" redis)"
  echo "export DLOCK_PARTITION_REDLOCK_$upper=redis://$(path_hosts "$path" redlock1 redlock2 redlock3)"
}
