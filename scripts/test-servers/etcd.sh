# shellcheck shell=bash disable=SC2154 # in_netns: set by test-servers.sh
# Group etcd: a standalone member (etcd) and a three-member cluster (etcd1-3). Also the launch
# and readiness helpers of etcd-secure.sh, which is sourced after it.

register_group etcd etcd etcd etcd1 etcd2 etcd3

is_etcd_cluster_member() { [[ $1 == etcd[123] ]]; }

etcd_prerequisites() {
  if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
    die "etcd or etcdctl not found: apt-get install etcd-server etcd-client (or scripts/setup-debian.sh --servers)"
  fi
}

# etcdctl's flags to reach member `id`: TLS with the test CA (and its client certificate for
# etcd-mtls), root once etcd-auth has authentication on.
etcdctl_flags() {
  local id=$1 tls scheme=http
  tls=$(tls_dir)
  [[ $id == etcd-tls || $id == etcd-mtls ]] && scheme=https
  echo "--endpoints=$scheme://127.0.0.1:$(server_port "$id")"
  [[ $scheme == https ]] && echo "--cacert=$tls/ca.crt"
  [[ $id == etcd-mtls ]] && echo "--cert=$tls/client.crt --key=$tls/client.key"
  [[ $id == etcd-auth && -f "$(server_dir "$id")/auth_enabled" ]] && echo "--user=root:root"
  return 0
}

# A member that has a leader answers a linearizable read (a member of a cluster without quorum
# does not).
etcd_answers() {
  # shellcheck disable=SC2046 # one flag per word
  "${in_netns[@]}" timeout 3 etcdctl $(etcdctl_flags "$1") \
    --command-timeout=2s get --consistency=l dlock-health >/dev/null 2>&1
}

# --data-dir comes first on the command line so that this recognizes the process.
etcd_is_process() { [[ $2 == *etcd*"--data-dir $(server_dir "$1")/data"* ]]; }

# The standalone member is a cluster of one; etcd1..3 are one cluster of three.
etcd_initial_cluster() {
  local member members=() list
  if is_etcd_cluster_member "$1"; then members=(etcd1 etcd2 etcd3); else members=("$1"); fi
  for member in "${members[@]}"; do
    list+="${list:+,}$member=http://127.0.0.1:$(cat "$(server_dir "$member")/peer_port")"
  done
  echo "$list"
}

launch_etcd() {
  local id=$1 dir port peer_port token=dlock-etcd
  dir=$(server_dir "$id")
  port=$(server_port "$id")
  peer_port=$(cat "$dir/peer_port")
  is_etcd_cluster_member "$id" && token=dlock-etcd-cluster
  [[ $(group_of "$id") == etcd-secure ]] && token=dlock-$id
  # etcd-secure: TLS with the test CA's server certificate; etcd-auth: simple tokens that expire
  # after 1 s unused, so that the tests see a provider log in again.
  local tls scheme=http secure=()
  tls=$(tls_dir)
  case "$id" in
    etcd-tls) scheme=https secure=(--cert-file "$tls/server.crt" --key-file "$tls/server.key") ;;
    etcd-mtls)
      scheme=https
      secure=(--cert-file "$tls/server.crt" --key-file "$tls/server.key" --client-cert-auth
        --trusted-ca-file "$tls/ca.crt")
      ;;
    etcd-auth) secure=(--auth-token simple --auth-token-ttl 1) ;;
  esac
  # Short heartbeats and elections make a killed leader's successor quick (500 ms).
  local address client_urls=()
  for address in $(listen_addresses "$id"); do client_urls+=("$scheme://$address:$port"); done
  # 127.0.0.2 too, an address its certificate is not for (the host-name mismatch case).
  [[ $id == etcd-tls ]] && client_urls+=("https://127.0.0.2:$port")
  setsid "${in_netns[@]}" etcd --data-dir "$dir/data" --name "$id" \
    --listen-client-urls "$(IFS=,; echo "${client_urls[*]}")" \
    --advertise-client-urls "$scheme://127.0.0.1:$port" "${secure[@]}" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "$(etcd_initial_cluster "$id")" --initial-cluster-token "$token" \
    --initial-cluster-state new --heartbeat-interval 50 --election-timeout 500 \
    --unsafe-no-fsync --logger zap --log-outputs stderr \
    </dev/null >>"$dir/server.log" 2>&1 9>&- &
  echo $! >"$dir/pid"
}

etcd::prerequisites() { etcd_prerequisites; }
etcd::extra_ports() { echo peer_port; }
etcd::launch() { launch_etcd "$1"; }
etcd::answers() { etcd_answers "$1"; }
etcd::is_process() { etcd_is_process "$@"; }

etcd::env() {
  local ports=("$(server_port etcd1)" "$(server_port etcd2)" "$(server_port etcd3)")
  printf 'export DLOCK_TEST_ETCD=etcd://127.0.0.1:%s\n' "$(server_port etcd)"
  printf 'export DLOCK_TEST_ETCD_CLUSTER=etcd://127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s\n' "${ports[@]}"
}

etcd::partition_env() {
  echo "export DLOCK_PARTITION_ETCD_$3=etcd://$(path_hosts "$2" etcd)"
  echo "export DLOCK_PARTITION_ETCD_CLUSTER_$3=etcd://$(path_hosts "$2" etcd1 etcd2 etcd3)"
}
