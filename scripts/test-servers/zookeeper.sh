# shellcheck shell=bash disable=SC2154 # partition_set, in_netns: set by test-servers.sh
# Group zookeeper: a standalone ZooKeeper (zookeeper) and a three-member ensemble (zk1-3).

register_group zookeeper zookeeper zookeeper zk1 zk2 zk3

is_ensemble_member() { [[ $1 == zk[123] ]]; }

zookeeper_classpath() {
  local jar=/usr/share/java/zookeeper.jar
  [[ -r $jar ]] || die "$jar not found: apt-get install zookeeper (or scripts/setup-debian.sh --servers)"
  # Debian's zookeeper.jar names its dependencies in its manifest's Class-Path; slf4j-simple gives
  # the server a log on stderr (which goes to server.log) without a log4j configuration.
  local classpath=$jar
  [[ -r /usr/share/java/slf4j-simple.jar ]] && classpath+=:/usr/share/java/slf4j-simple.jar
  echo "$classpath"
}

# Prints the `Mode:` of a ZooKeeper server from its `srvr` four-letter word; fails when it does not
# serve (a member without quorum says "not currently serving requests").
zookeeper_mode() {
  local reply
  # shellcheck disable=SC2016 # $1 belongs to the inner shell
  reply=$("${in_netns[@]}" timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf srvr >&3 && cat <&3' \
    _ "$(server_port "$1")" 2>/dev/null) || true
  [[ $reply =~ Mode:\ ([a-z]+) ]] || return 1
  echo "${BASH_REMATCH[1]}"
}

zookeeper::prerequisites() {
  command -v java >/dev/null || die "java not found: apt-get install default-jre-headless"
  zookeeper_classpath >/dev/null
}

zookeeper::extra_ports() { is_ensemble_member "$1" && echo quorum_port election_port; return 0; }

write_zookeeper_config() {
  local id=$1 dir member
  dir=$(server_dir "$id")
  mkdir -p "$dir/data"
  {
    echo "# Written by scripts/test-servers.sh."
    echo "dataDir=$dir/data"
    echo "clientPort=$(server_port "$id")"
    # In the partition set every address of the namespace is one of this set's paths.
    if $partition_set; then echo "clientPortAddress=0.0.0.0"; else echo "clientPortAddress=127.0.0.1"; fi
    # Short ticks make elections and session expiry quick; the session bounds stay usable.
    echo "tickTime=500"
    echo "initLimit=20"
    echo "syncLimit=10"
    echo "minSessionTimeout=1000"
    echo "maxSessionTimeout=60000"
    echo "maxClientCnxns=0"
    echo "forceSync=no"
    echo "preAllocSize=4096"
    echo "admin.enableServer=false"
    echo "4lw.commands.whitelist=*"
    if is_ensemble_member "$id"; then
      echo "quorumListenOnAllIPs=false"
      for member in zk1 zk2 zk3; do
        echo "server.${member#zk}=127.0.0.1:$(cat "$(server_dir "$member")/quorum_port"):$(cat "$(server_dir "$member")/election_port")"
      done
    fi
  } >"$dir/zoo.cfg"
  if is_ensemble_member "$id"; then
    echo "${id#zk}" >"$dir/data/myid"
  fi
}

zookeeper::configure() {
  local id
  for id in $(group_members zookeeper); do write_zookeeper_config "$id"; done
}

zookeeper::launch() {
  local id=$1 dir
  dir=$(server_dir "$id")
  # A small heap, serial GC and the client compiler keep four JVMs quick to start on two cores.
  # TTL nodes (extendedTypesEnabled) keep dlock's minimum holds (docs/zookeeper.md); the container
  # manager looks for expired ones (and empty containers) every 200 ms instead of every minute,
  # so that a hold ends within 200 ms of its time.
  setsid "${in_netns[@]}" java -Xms16m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData \
    -Djava.net.preferIPv4Stack=true -Dzookeeper.admin.enableServer=false \
    -Dzookeeper.extendedTypesEnabled=true -Dznode.container.checkIntervalMs=200 \
    -Dzookeeper.jmx.log4j.disable=true -Dorg.slf4j.simpleLogger.showDateTime=true \
    -cp "$(zookeeper_classpath)" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" \
    </dev/null >>"$dir/server.log" 2>&1 9>&- &
  echo $! >"$dir/pid"
}

zookeeper::answers() {
  local mode
  mode=$(zookeeper_mode "$1") || return 1
  if is_ensemble_member "$1"; then
    [[ $mode == leader || $mode == follower ]]
  else
    [[ $mode == standalone ]]
  fi
}

zookeeper::is_process() { [[ $2 == *QuorumPeerMain*"$(server_dir "$1")/zoo.cfg"* ]]; }

zookeeper::kill_connections() { die "kill-connections is not available for ZooKeeper; use pause, restart or kill"; }

zookeeper::env() {
  local ports=("$(server_port zk1)" "$(server_port zk2)" "$(server_port zk3)")
  printf 'export DLOCK_TEST_ZOOKEEPER=zookeeper://127.0.0.1:%s\n' "$(server_port zookeeper)"
  printf 'export DLOCK_TEST_ZOOKEEPER_ENSEMBLE=zookeeper://127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s\n' "${ports[@]}"
}

zookeeper::partition_env() {
  echo "export DLOCK_PARTITION_ZOOKEEPER_$3=zookeeper://$(path_hosts "$2" zookeeper)"
  echo "export DLOCK_PARTITION_ZOOKEEPER_ENSEMBLE_$3=zookeeper://$(path_hosts "$2" zk1 zk2 zk3)"
}
