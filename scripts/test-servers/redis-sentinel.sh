# shellcheck shell=bash disable=SC2154 # partition_set, in_netns: set by test-servers.sh
# Groups redis-sentinel and redis-failover: each a master, two replicas of it, and three sentinels
# that monitor it as "mymaster" with a quorum of 2 and fail it over quickly (down after 1 s,
# short timeouts). redis-failover is the same for the tests that fail the master over. Members:
# master, replica, replica, sentinel, sentinel, sentinel, launched in this order.

register_group redis-sentinel redis-sentinel \
  sentinel-master sentinel-replica1 sentinel-replica2 sentinel1 sentinel2 sentinel3
register_group redis-failover redis-sentinel \
  failover-master failover-replica1 failover-replica2 failover-sentinel1 failover-sentinel2 failover-sentinel3

sentinel_group_master() { local members; read -r -a members <<<"$(group_members "$1")"; echo "${members[0]}"; }
sentinel_group_sentinels() { local members; read -r -a members <<<"$(group_members "$1")"; echo "${members[@]:3}"; }
is_sentinel() { [[ $1 == sentinel[123] || $1 == failover-sentinel[123] ]]; }

# In the partition set every server listens on its paths as well and announces its path A
# address (partition-net.sh), which the others reach it by inside the namespace and which the
# sentinels give clients.
redis-sentinel::launch() {
  local id=$1 dir port master master_port protected=yes
  dir=$(server_dir "$id")
  port=$(server_port "$id")
  master=$(sentinel_group_master "$(group_of "$id")")
  master_port=$(server_port "$master")
  $partition_set && protected=no
  if ! is_sentinel "$id"; then
    local extra=()
    [[ $id == *-replica[12] ]] &&
      extra=(--replicaof "$(announced_address "$master")" "$master_port")
    $partition_set && extra+=(--replica-announce-ip "$(announced_address "$id")")
    # shellcheck disable=SC2046 # one argument per address
    setsid "${in_netns[@]}" redis-server --bind $(listen_addresses "$id") --port "$port" --save '' \
      --appendonly no --dir "$dir" --protected-mode "$protected" --daemonize no "${extra[@]}" \
      </dev/null >>"$dir/server.log" 2>&1 9>&- &
    echo $! >"$dir/pid"
    return
  fi
  # A sentinel rewrites its configuration file (what it learned of the others and of failovers).
  cat >"$dir/sentinel.conf" <<CONF
port $port
bind $(listen_addresses "$id")
protected-mode $protected
dir $dir
sentinel monitor mymaster $(announced_address "$master") $master_port 2
sentinel down-after-milliseconds mymaster 1000
sentinel failover-timeout mymaster 3000
sentinel parallel-syncs mymaster 2
CONF
  $partition_set && echo "sentinel announce-ip $(announced_address "$id")" >>"$dir/sentinel.conf"
  setsid "${in_netns[@]}" redis-server "$dir/sentinel.conf" --sentinel \
    </dev/null >>"$dir/server.log" 2>&1 9>&- &
  echo $! >"$dir/pid"
}

# Whether every sentinel of `group` sees the master, both replicas and the two other sentinels:
# only then can they agree on a failover.
sentinel_group_formed() {
  local id reply
  for id in $(sentinel_group_sentinels "$1"); do
    reply=$("${in_netns[@]}" timeout 2 redis-cli -h 127.0.0.1 -p "$(server_port "$id")" SENTINEL MASTER mymaster 2>/dev/null | tr '\n' ' ') || return 1
    [[ $reply == *"num-slaves 2 "* && $reply == *"num-other-sentinels 2 "* && $reply == *"flags master "* ]] || return 1
  done
}

redis-sentinel::after_ready() {
  local deadline=$((SECONDS + ready_deadline_seconds))
  until sentinel_group_formed "$1"; do
    if ((SECONDS >= deadline)); then
      say "$1: the sentinels did not see the master, both replicas and each other within ${ready_deadline_seconds}s"
      return 1
    fi
    sleep 0.2
  done
}

# The partition set's address plan (partition-net.sh) has the redis-sentinel group only.
redis-sentinel::prerequisites() {
  redis_prerequisites
  if $partition_set && [[ $1 != redis-sentinel ]]; then
    die "$1 is not part of the partition set (its Sentinel group is redis-sentinel)"
  fi
}
redis-sentinel::answers() { redis_answers "$1"; }
redis-sentinel::is_process() { redis_is_process "$@"; }

# The partition set's lines: the sentinels over `path`, and the data nodes as started (master
# first) over path A, the only path a client of theirs takes to them (partition-net.sh).
redis-sentinel::partition_env() {
  local group=$1 path=$2 upper=$3 members
  read -r -a members <<<"$(group_members "$group")"
  echo "export DLOCK_PARTITION_REDIS_SENTINEL_$upper=redis+sentinel://$(path_hosts "$path" "${members[@]:3}")/mymaster"
  if [[ $path == a ]]; then
    echo "export DLOCK_PARTITION_REDIS_SENTINEL_NODES_$upper=redis://$(path_hosts a "${members[@]:0:3}")"
  fi
}

# The sentinels' URL, and the data nodes as started (master first; a failover moves it).
redis-sentinel::env() {
  local group=$1 upper=${1#redis-} id hosts=() nodes=()
  upper=${upper^^}
  for id in $(sentinel_group_sentinels "$group"); do hosts+=("127.0.0.1:$(server_port "$id")"); done
  for id in $(group_members "$group"); do
    is_sentinel "$id" || nodes+=("127.0.0.1:$(server_port "$id")")
  done
  local IFS=,
  echo "export DLOCK_TEST_REDIS_${upper}=redis+sentinel://${hosts[*]}/mymaster"
  echo "export DLOCK_TEST_REDIS_${upper}_NODES=redis://${nodes[*]}"
}
