# shellcheck shell=bash disable=SC2154 # state_dir, netns, command: set by test-servers.sh
# The network of test-servers.sh's partition set (sourced by it, not run): one network namespace
# per state directory, holding that set's servers, and one veth pair per server and path (A, B),
# so that a test in the root namespace can cut one path to one server while the other stays up.
#
# Addresses: 10.199.S.0/24 for the set in slot S (0-255), one /30 per veth pair: pair n (server
# index * 2 + path) is 10.199.S.4n/30, its root-side end 10.199.S.(4n+1), its namespace-side end,
# where the server listens, 10.199.S.(4n+2). Nothing else is touched: no other interface, route or
# global sysctl. See docs/testing.md ("Partitions").
#
# A cut sets the namespace-side end down. The root side keeps its route (and the kernel drops
# what it sends into a veth whose peer is down), so packets never leave by another interface: had
# the root-side end gone down, its route would go with it and the default route would carry the
# packets away. Both directions are then silent: writes succeed and nothing arrives, and a new
# connect fails with EHOSTUNREACH once ARP gives up (about 3 s).
#
# Inside the namespace an address stays local while its veth is down, so what servers send each
# other there (replication, sentinels, the cluster bus) never crosses a cut: a cut parts a server
# from the clients in the root namespace only. Sentinel and Cluster announce one address per
# server (their path A address, redis-sentinel.sh and redis-cluster.sh), which is where their
# clients connect whatever path they came by: for those, path A is the only path.

readonly partition_block=10.199
# Each server's index in the address plan and its short name in root-side interface names (15
# bytes at most: "dlk255-rl2a").
# At most 32 servers: pair n = index * 2 + path must keep 4n + 2 below 256.
readonly -A partition_index=([redis]=0 [redlock1]=1 [redlock2]=2 [redlock3]=3 [postgres]=4
  [zookeeper]=5 [zk1]=6 [zk2]=7 [zk3]=8
  [mariadb]=9 [etcd]=10 [etcd1]=11 [etcd2]=12 [etcd3]=13
  [sentinel-master]=14 [sentinel-replica1]=15 [sentinel-replica2]=16
  [sentinel1]=17 [sentinel2]=18 [sentinel3]=19
  [rcluster1]=20 [rcluster2]=21 [rcluster3]=22 [rcluster4]=23 [rcluster5]=24 [rcluster6]=25)
readonly -A partition_short=([redis]=r [redlock1]=rl1 [redlock2]=rl2 [redlock3]=rl3 [postgres]=pg
  [zookeeper]=zk [zk1]=zk1 [zk2]=zk2 [zk3]=zk3
  [mariadb]=mdb [etcd]=ec [etcd1]=ec1 [etcd2]=ec2 [etcd3]=ec3
  [sentinel-master]=sm [sentinel-replica1]=sr1 [sentinel-replica2]=sr2
  [sentinel1]=s1 [sentinel2]=s2 [sentinel3]=s3
  [rcluster1]=rc1 [rcluster2]=rc2 [rcluster3]=rc3 [rcluster4]=rc4 [rcluster5]=rc5 [rcluster6]=rc6)
readonly partition_servers=(redis redlock1 redlock2 redlock3 postgres zookeeper zk1 zk2 zk3
  mariadb etcd etcd1 etcd2 etcd3
  sentinel-master sentinel-replica1 sentinel-replica2 sentinel1 sentinel2 sentinel3
  rcluster1 rcluster2 rcluster3 rcluster4 rcluster5 rcluster6)
readonly partition_paths=(a b)
readonly partition_heal_deadline_seconds=5

# The namespace of a state directory: its name derives from the directory's path, so that two
# state directories (two parallel runs) never share one.
netns_name() {
  local digest
  digest=$(printf '%s' "$1" | sha1sum)
  echo "dlock-${digest:0:12}"
}

netns_file() { echo "$state_dir/netns"; }
netns_slot() { cat "$(netns_file)" 2>/dev/null; }
netns_exists() { [[ -e /run/netns/$netns ]]; }

# "a" or "b" from "A", "a", "b", "B"; fails on anything else.
path_name() {
  case "$1" in
    a | A) echo a ;;
    b | B) echo b ;;
    *) return 1 ;;
  esac
}

root_veth() { echo "dlk$2-${partition_short[$1]}$3"; } # root_veth ID SLOT PATH
# ns_veth ID PATH: the id itself where it fits an interface name (15 bytes), else its short name.
ns_veth() {
  local name=$1
  ((${#name} <= 13)) || name=${partition_short[$1]}
  echo "$name-$2"
}
pair_number() {
  local offset=0
  [[ $2 == b ]] && offset=1
  echo $((partition_index[$1] * 2 + offset))
}
# The address server ID listens on for PATH (the namespace-side end of its pair).
path_address() { echo "$partition_block.$(netns_slot).$(($(pair_number "$1" "$2") * 4 + 2))"; }

# Why network namespaces cannot be made here; fails (prints nothing) when they can.
netns_unavailable_reason() {
  if ((EUID != 0)); then
    echo "network namespaces need root (running as uid $EUID)"
  elif ! command -v ip >/dev/null; then
    echo "ip not found: apt-get install iproute2"
  elif [[ $(cat /proc/sys/net/ipv4/conf/all/ignore_routes_with_linkdown 2>/dev/null) == 1 ]]; then
    # With it, a cut path's root-side route would be ignored and packets would take the default
    # route instead of vanishing.
    echo "net.ipv4.conf.all.ignore_routes_with_linkdown is 1; a cut would not be silent"
  else
    return 1
  fi
}

# Whether slot S is free: no interface of another set, no address of 10.199.S.0/24 anywhere.
slot_free() {
  local links addresses
  links=$(ip -o link show 2>/dev/null | awk -F': ' '{ print $2 }')
  addresses=$(ip -o -4 addr show 2>/dev/null)
  [[ $'\n'$links != *$'\n'"dlk$1-"* && $addresses != *" $partition_block.$1."* ]]
}

# Creates one veth pair: root side ROOT_VETH with .1, namespace side with .2, both up.
add_pair() {
  local id=$1 slot=$2 path=$3 root ns_side n
  root=$(root_veth "$id" "$slot" "$path")
  ns_side=$(ns_veth "$id" "$path")
  n=$(pair_number "$id" "$path")
  ip link add "$root" type veth peer name "$ns_side" netns "$netns" || return 1
  ip addr add "$partition_block.$slot.$((n * 4 + 1))/30" dev "$root"
  ip -n "$netns" addr add "$partition_block.$slot.$((n * 4 + 2))/30" dev "$ns_side"
  ip link set "$root" up
  ip -n "$netns" link set "$ns_side" up
}

# Creates the namespace with loopback up and every pair (for all servers, whichever groups run:
# the first pair claims the slot for this set). The slot search starts at a hash of the state
# directory; `ip link add` of an existing name fails, so two sets never take the same slot.
netns_create() {
  local first slot attempt id path
  ip netns add "$netns" || die "could not create network namespace $netns"
  ip -n "$netns" link set lo up
  first=$((16#$(printf '%s' "$state_dir" | sha1sum | cut -c1-4) % 256))
  for ((attempt = 0; attempt < 256; attempt++)); do
    slot=$(((first + attempt) % 256))
    slot_free "$slot" || continue
    add_pair redis "$slot" a 2>/dev/null && break
    slot=""
  done
  [[ -n ${slot:-} ]] || die "no free slot in $partition_block.0.0/16 for the partition set"
  echo "$slot" >"$(netns_file)"
  for id in "${partition_servers[@]}"; do
    for path in "${partition_paths[@]}"; do
      [[ $id == redis && $path == a ]] && continue
      add_pair "$id" "$slot" "$path" || die "could not create the veth pair of $id path $path"
    done
  done
  say "network namespace $netns up, addresses $partition_block.$slot.0/24"
}

# Removes the namespace and its veth pairs, and ends what still runs inside it (only this
# script's servers ever run there). Safe to call when none of it exists.
netns_remove() {
  local slot pid link
  slot=$(netns_slot || true)
  if netns_exists; then
    for pid in $(ip netns pids "$netns" 2>/dev/null); do
      kill -KILL "$pid" 2>/dev/null || true
    done
  fi
  # Removing one end of a pair removes both; the namespace may outlive `ip netns del` while a
  # process still holds it, so the root-side ends go explicitly.
  if [[ -n $slot ]]; then
    for link in $(ip -o link show 2>/dev/null | awk -F': ' '{ print $2 }' | sed 's/@.*//'); do
      if [[ $link == "dlk$slot-"* ]]; then ip link del "$link" 2>/dev/null || true; fi
    done
  fi
  if netns_exists; then
    ip netns del "$netns" || die "could not remove network namespace $netns"
  fi
  rm -f "$(netns_file)"
}

# Whether the namespace and all of its pairs are there. One listing of the namespace's links,
# not one `ip` per pair: a cut is made while a test's clients wait, and on a loaded machine
# each process started here costs milliseconds.
netns_complete() {
  local id path name
  local -A present=()
  netns_exists && [[ -n $(netns_slot) ]] || return 1
  while read -r name; do
    present[${name%%@*}]=1
  done < <(ip -n "$netns" -o link show 2>/dev/null | awk -F': ' '{ print $2 }')
  for id in "${partition_servers[@]}"; do
    for path in "${partition_paths[@]}"; do
      [[ -n ${present[$(ns_veth "$id" "$path")]:-} ]] || return 1
    done
  done
}

path_is_cut() {
  ! ip -n "$netns" -o link show "$(ns_veth "$1" "$2")" 2>/dev/null | grep -q '[<,]UP[,>]'
}

# partition|heal ID [ID...] A|B
require_path_args() {
  (($# >= 2)) || die "$command needs server ids and a path: $command ID [ID...] A|B"
  local id
  for id in "${@:1:$# - 1}"; do require_server_id "$id"; done
  path_name "${!#}" >/dev/null || die "unknown path '${!#}' (A or B)"
  netns_complete || die "the partition set's network ($netns) is not up in $state_dir; run: $0 --state-dir ${state_dir%/partition} --partition-set start"
}

# Every server named is cut at once (one `ip` each, nothing between them), so that a quorum is
# lost at one moment, not as the cuts trickle in.
command_partition() {
  local path id
  path=$(path_name "${!#}")
  for id in "${@:1:$# - 1}"; do ip -n "$netns" link set "$(ns_veth "$id" "$path")" down; done
  for id in "${@:1:$# - 1}"; do say "cut $id path ${path^^} ($(path_address "$id" "$path"))"; done
}

# Whether a packet crosses the path both ways now: a connect from the root namespace to a port
# nothing listens on (1) is refused by the server's side, where a cut path answers nothing.
path_answers() {
  local reply
  # shellcheck disable=SC2016 # $1 belongs to the inner shell
  reply=$(timeout 1 bash -c 'exec 3<>"/dev/tcp/$1/1"' _ "$1" 2>&1) || true
  [[ $reply == *"Connection refused"* ]]
}

# Brings the path back and waits until it carries packets both ways. The link being up is not
# enough: right after a cut in which the client kept trying, the root side's neighbour entry
# for the server may still be failed, and a connect then fails with EHOSTUNREACH at once.
heal_path() {
  local id=$1 path=$2 deadline=$((SECONDS + partition_heal_deadline_seconds)) address
  address=$(path_address "$id" "$path")
  ip -n "$netns" link set "$(ns_veth "$id" "$path")" up
  until path_answers "$address"; do
    ((SECONDS < deadline)) || die "$id path ${path^^} ($address) did not come back within ${partition_heal_deadline_seconds}s"
    sleep 0.05
  done
}

command_heal() {
  local path id
  path=$(path_name "${!#}")
  for id in "${@:1:$# - 1}"; do
    heal_path "$id" "$path"
    say "healed $id path ${path^^}"
  done
}

command_heal_all() {
  local id path healed=0
  netns_complete || die "the partition set's network ($netns) is not up in $state_dir"
  for id in "${partition_servers[@]}"; do
    for path in "${partition_paths[@]}"; do
      if path_is_cut "$id" "$path"; then
        heal_path "$id" "$path"
        healed=$((healed + 1))
      fi
    done
  done
  say "healed $healed path(s)"
}

# One line per server and path: address, state.
command_paths() {
  local id path
  netns_complete || die "the partition set's network ($netns) is not up in $state_dir"
  for id in "${partition_servers[@]}"; do
    for path in "${partition_paths[@]}"; do
      printf '%-10s %s %-15s %s\n' "$id" "${path^^}" "$(path_address "$id" "$path")" \
        "$(path_is_cut "$id" "$path" && echo cut || echo up)"
    done
  done
}
