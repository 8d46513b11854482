#!/usr/bin/env bash
# dlock beside the libraries users would otherwise pick, against the same servers in one run,
# printed as one Markdown table (docs/benchmarks.md#peers-side-by-side).
#
#   bench/peers.sh [--build DIR] [--short]
#
# Needs a build with the Redis, PostgreSQL and ZooKeeper backends and the targets
# dlock-peer-bench (which builds the Curator program too when a JDK is there), dlock-cli-bench
# and dlock, and Debian's python3-kazoo and python3-redis (the peers run on /usr/bin/python3,
# where Debian puts them). With a .NET SDK (`dotnet` on PATH) it builds bench/peers/dotnet into
# BUILD/bench/dotnet-peer and adds .NET DistributedLock's rows; without one, or when the build
# fails outside CI (no NuGet, say), it says why it leaves them out. Starts its own Redis,
# PostgreSQL and ZooKeeper test servers (scripts/test-servers.sh, a state directory of its own)
# and stops them when it ends.
#
# Every peer runs the workload of bench/peer_bench.cpp: the median uncontended acquire +
# release; the median handoff between two processes taking strict turns (release started to
# the waiter's acquire returned); P processes contending for one lock for S seconds (grants
# per second, and the fewest and most grants of one process; dlock's also as P threads of one
# process with a provider each, as Curator's P clients are threads of one JVM). For files: `dlock -n file://DIR
# job -- /bin/true` against `flock DIR/job.lock /bin/true`, per process (dlock-cli-bench), and
# P shell loops running each for S seconds. --short (CI's, to keep the script working) runs the
# .NET rows' runs once rather than three times: each .NET run starts up to ten .NET processes,
# whose start and JIT cost seconds of CPU.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$root/build
short=false
while (($#)); do
  case "$1" in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --short) short=true; shift ;;
    *) echo "usage: bench/peers.sh [--build DIR] [--short]" >&2; exit 64 ;;
  esac
done

if $short; then  # about 1 minute on the 2-core reference machine (56 s measured), for CI
  iterations=300 handoffs=30 contenders=8 seconds=1 cli_runs=50 polling_handoffs=10
else
  iterations=2000 handoffs=300 contenders=8 seconds=5 cli_runs=300 polling_handoffs=50
fi

python=/usr/bin/python3
for needed in "$build/bench/dlock-peer-bench" "$build/bench/dlock-cli-bench" "$build/cli/dlock"; do
  [[ -x $needed ]] || { echo "peers: $needed is missing; build dlock-peer-bench dlock-cli-bench" >&2; exit 1; }
done
"$python" -c 'import kazoo, redis' 2>/dev/null ||
  { echo "peers: $python lacks kazoo or redis (apt-get install python3-kazoo python3-redis)" >&2; exit 1; }
# DLOCK_JAVA and DLOCK_CURATOR_BENCH_CLASSPATH, empty without a JDK or Curator's jars; no
# file at all in a build without the ZooKeeper backend.
DLOCK_JAVA='' DLOCK_CURATOR_BENCH_CLASSPATH=''
# shellcheck source=/dev/null
[[ ! -f $build/bench/peers.env ]] || source "$build/bench/peers.env"
# The .NET peer, or why there is none.
dotnet_peer='' dotnet_missing=''
if ! command -v dotnet >/dev/null; then
  dotnet_missing="no .NET SDK (dotnet) on PATH"
else
  echo "peers: building the .NET peer ..." >&2
  # Under CI=true a failed build fails (set -e); otherwise build.sh warns and leaves no program.
  "$root/bench/peers/dotnet/build.sh" "$build/bench/dotnet-peer" >&2
  dotnet_peer=$build/bench/dotnet-peer/bin/DlockPeerBench
  [[ -x $dotnet_peer ]] || { dotnet_peer='' dotnet_missing="bench/peers/dotnet did not build"; }
fi

state=$(mktemp -d "${TMPDIR:-/tmp}/dlock-peers.XXXXXX")
servers=("$root/scripts/test-servers.sh" --state-dir "$state")
cleanup() {
  "${servers[@]}" stop >/dev/null 2>&1 || true
  rm -rf "$state"
}
trap cleanup EXIT
# PostgreSQL's rows are the .NET peer's alone.
"${servers[@]}" start --owner peers redis zookeeper ${dotnet_peer:+postgres} >/dev/null
# shellcheck source=/dev/null
source "$state/endpoints.env"
zookeeper=${DLOCK_TEST_ZOOKEEPER#zookeeper://}
redis=${DLOCK_TEST_REDIS#redis://}
# Npgsql's form of the test server's URL, pooling on (its default, as a .NET user has it).
npgsql=''
if [[ -n $dotnet_peer ]]; then
  [[ $DLOCK_TEST_POSTGRES =~ ^postgres(ql)?://([^:@/]+):([^@/]*)@([^:/]+):([0-9]+)/([^?]+) ]] ||
    { echo "peers: unexpected DLOCK_TEST_POSTGRES $DLOCK_TEST_POSTGRES" >&2; exit 1; }
  npgsql="Host=${BASH_REMATCH[4]};Port=${BASH_REMATCH[5]};Username=${BASH_REMATCH[2]}"
  npgsql+=";Password=${BASH_REMATCH[3]};Database=${BASH_REMATCH[6]}"
fi
run_id=peers-$$

# results["<system>/<key>"]: the "key value" lines of one system's run; uncontended_us
# collects one median per run ("<system>/uncontended_runs"), and each contention its figures
# per run, kept together ("<system>/contended_runs", "<system>/contended_threads_runs": "rate
# fewest most switches wakeups;" a run), so that the run with the median rate gives its spread.
declare -A results
collect() {
  local system=$1 output key value group
  shift
  echo "peers: $system $* ..." >&2
  output=$("$@") || { echo "peers: $system failed" >&2; exit 1; }
  local -A got=()
  while read -r key value; do
    results["$system/$key"]=$value
    got[$key]=$value
  done <<<"$output"
  [[ -z ${got[uncontended_us]:-} ]] || results["$system/uncontended_runs"]+=" ${got[uncontended_us]}"
  for group in contended contended_threads; do
    [[ -n ${got[${group}_per_s]:-} ]] || continue
    results["$system/${group}_runs"]+="${got[${group}_per_s]} ${got[${group}_fewest]}"
    results["$system/${group}_runs"]+=" ${got[${group}_most]} ${got[${group}_switches_per_grant]:--}"
    results["$system/${group}_runs"]+=" ${got[${group}_wakeups_per_grant]:--};"
  done
}

# How each system is run; the arguments that follow are the workload's.
dlock_zookeeper() { "$build/bench/dlock-peer-bench" "$DLOCK_TEST_ZOOKEEPER/dlock-$run_id" "$@"; }
kazoo() { "$python" "$root/bench/peers/py_lock_bench.py" kazoo "$zookeeper" "/kazoo-$run_id" "$@"; }
curator() {
  "$DLOCK_JAVA" -cp "$DLOCK_CURATOR_BENCH_CLASSPATH" CuratorBench "$zookeeper" "/curator-$run_id" "$@"
}
dlock_redis() { "$build/bench/dlock-peer-bench" "$DLOCK_TEST_REDIS?prefix=dlock-$run_id:" "$@"; }
redis_py() { "$python" "$root/bench/peers/py_lock_bench.py" redis "$redis" "redis-py-$run_id:" "$@"; }
dotnet_redis() { "$dotnet_peer" redis "$redis" "dotnet-$run_id:" "$@"; }
# PostgreSQL's advisory keys have no prefix: dlock-peer-bench's names are its own ("handoff",
# ...), .NET's all start "dotnet-peers-", and the server is this run's alone.
dlock_postgres() { "$build/bench/dlock-peer-bench" "$DLOCK_TEST_POSTGRES" "$@"; }
dotnet_postgres() { "$dotnet_peer" postgres "$npgsql" "dotnet-$run_id:" "$@"; }
# The runs of the .NET rows alone (DistributedLock's, and dlock-postgres's, whose only peer it
# is): none without the .NET peer, and with --short none in the repeats.
dotnet_collect() {
  [[ -n $dotnet_peer ]] || return 0
  [[ $1 == first ]] || ! $short || return 0
  shift
  collect "$@"
}

shared=(--iterations "$iterations" --handoffs "$handoffs" --contenders "$contenders" --seconds "$seconds")
# The settle times of the backends' own benchmarks: long enough for a waiter to queue.
collect dlock-zookeeper dlock_zookeeper "${shared[@]}" --settle-us 3000
collect kazoo kazoo "${shared[@]}" --settle-us 3000
if [[ -n $DLOCK_CURATOR_BENCH_CLASSPATH ]]; then
  collect curator curator "$iterations" "$handoffs" "$contenders" "$seconds" keys
fi
collect dlock-redis dlock_redis "${shared[@]}" --settle-us 2000
# redis-py's waiter polls every 100 ms: fewer handoffs, or they alone take minutes.
collect redis-py redis_py --iterations "$iterations" --handoffs "$polling_handoffs" \
  --contenders "$contenders" --seconds "$seconds" --settle-us 2000
# .NET's Redis waiter polls too, every 10 to 800 ms (at random).
dotnet_collect first dotnet-redis dotnet_redis --iterations "$iterations" --handoffs "$polling_handoffs" \
  --contenders "$contenders" --seconds "$seconds" --settle-us 2000
# dlock-bench's settle for PostgreSQL.
dotnet_collect first dlock-postgres dlock_postgres "${shared[@]}" --settle-us 5000
dotnet_collect first dotnet-postgres dotnet_postgres "${shared[@]}" --settle-us 5000
# The uncontended and contended figures twice more, dlock and its peers in turn, so that a
# burst of load on a shared machine (a slow spell of a VM lasts seconds) does not decide a
# ratio: the table gives the median of the three.
contention=(--contenders "$contenders" --seconds "$seconds")
for _ in 1 2; do
  collect dlock-zookeeper dlock_zookeeper --iterations "$iterations" --uncontended-only
  collect kazoo kazoo --iterations "$iterations" --uncontended-only
  if [[ -n $DLOCK_CURATOR_BENCH_CLASSPATH ]]; then
    collect curator curator "$iterations" 0 0 0 uncontended
  fi
  collect dlock-redis dlock_redis --iterations "$iterations" --uncontended-only
  collect redis-py redis_py --iterations "$iterations" --uncontended-only
  dotnet_collect repeat dotnet-redis dotnet_redis --iterations "$iterations" --uncontended-only
  dotnet_collect repeat dlock-postgres dlock_postgres --iterations "$iterations" --uncontended-only
  dotnet_collect repeat dotnet-postgres dotnet_postgres --iterations "$iterations" --uncontended-only
  collect dlock-zookeeper dlock_zookeeper "${contention[@]}" --contended-only
  collect kazoo kazoo "${contention[@]}" --contended-only
  if [[ -n $DLOCK_CURATOR_BENCH_CLASSPATH ]]; then
    collect curator curator 0 0 "$contenders" "$seconds" contended
  fi
  collect dlock-redis dlock_redis "${contention[@]}" --contended-only
  collect redis-py redis_py "${contention[@]}" --contended-only
  dotnet_collect repeat dotnet-redis dotnet_redis "${contention[@]}" --contended-only
  dotnet_collect repeat dlock-postgres dlock_postgres "${contention[@]}" --contended-only
  dotnet_collect repeat dotnet-postgres dotnet_postgres "${contention[@]}" --contended-only
done
# The middle one of lines sorted by their first number.
median_line() { sed '/^$/d' | sort -g -k1,1 | awk '{ v[NR] = $0 } END { print v[int((NR + 1) / 2)] }'; }
for system in dlock-zookeeper kazoo curator dlock-redis redis-py dotnet-redis dlock-postgres dotnet-postgres; do
  runs=${results[$system/uncontended_runs]:-}
  [[ -z $runs ]] || results[$system/uncontended_us]=$(tr ' ' '\n' <<<"$runs" | median_line)
  for group in contended contended_threads; do
    runs=${results[$system/${group}_runs]:-}
    [[ -n $runs ]] || continue
    read -r rate fewest most switches wakeups < <(tr ';' '\n' <<<"$runs" | median_line)
    results[$system/${group}_per_s]=$rate
    results[$system/${group}_fewest]=$fewest
    results[$system/${group}_most]=$most
    [[ $switches == - ]] || results[$system/${group}_switches_per_grant]=$switches
    [[ $wakeups == - ]] || results[$system/${group}_wakeups_per_grant]=$wakeups
  done
done

# Files: per process, from dlock-cli-bench (alternating runs), and P loops of each command.
echo "peers: dlock and flock(1) per process ..." >&2
locks=$state/file-locks
mkdir -p "$locks"
cli_output=$("$build/bench/dlock-cli-bench" --dlock "$build/cli/dlock" --runs "$cli_runs" --directory "$locks")
# Its rows end: wall "us" CPU "us" wall-ratio CPU-ratio left-CPU "us".
results[flock/uncontended_us]=$(awk '/^flock /{print $(NF-7)}' <<<"$cli_output")
results[dlock-cli/uncontended_us]=$(awk '/^dlock -n file:/{print $(NF-7)}' <<<"$cli_output")

# P shell loops running one command until a common deadline; sets <system>/contended_*.
command_contention() {
  local system=$1
  shift
  echo "peers: $system, $contenders processes contending ..." >&2
  local start=$((${EPOCHREALTIME/./} + 500000)) count
  local end=$((start + ${seconds%.*} * 1000000))
  for ((p = 0; p < contenders; ++p)); do
    (
      while ((${EPOCHREALTIME/./} < start)); do sleep 0.01; done
      n=0
      while ((${EPOCHREALTIME/./} < end)); do "$@" && n=$((n + 1)); done
      echo "$n" >"$state/$system.$p"
    ) &
  done
  wait
  local total=0 fewest='' most=0
  for ((p = 0; p < contenders; ++p)); do
    count=$(<"$state/$system.$p")
    total=$((total + count))
    if [[ -z $fewest ]] || ((count < fewest)); then fewest=$count; fi
    if ((count > most)); then most=$count; fi
  done
  results[$system/contended_per_s]=$((total / ${seconds%.*}))
  results[$system/contended_fewest]=$fewest
  results[$system/contended_most]=$most
}
command_contention flock /usr/bin/flock "$locks/contended.lock" /bin/true
command_contention dlock-cli "$build/cli/dlock" "file://$locks" contended -- /bin/true

package_version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo '?'; }

# One row: server, what, dlock's system, the peer's system and name, the key, whether more is
# better (rates, whose spread is in <key without _per_s>_fewest and _most) or less (times),
# and the peer's key when it differs from dlock's.
row() {
  local server=$1 what=$2 ours=$3 peer=$4 peer_name=$5 key=$6 more_is_better=$7
  local peer_key=${8:-$6}
  local mine=${results[$ours/$key]:-} theirs=${results[$peer/$peer_key]:-}
  [[ -n $mine && -n $theirs ]] || return 0
  local unit=' us' spread_mine='' spread_theirs='' ratio
  if $more_is_better; then
    unit='/s'
    spread_mine=" (${results[$ours/${key%_per_s}_fewest]} to ${results[$ours/${key%_per_s}_most]})"
    spread_theirs=" (${results[$peer/${peer_key%_per_s}_fewest]} to ${results[$peer/${peer_key%_per_s}_most]})"
    ratio=$(awk -v a="$mine" -v b="$theirs" 'BEGIN { printf "%.2fx", a / b }')
  else
    ratio=$(awk -v a="$mine" -v b="$theirs" 'BEGIN { printf "%.2fx", b / a }')
  fi
  printf '| %s | %s | %.0f%s%s | %s | %.0f%s%s | **%s** |\n' "$server" "$what" "$mine" "$unit" \
    "$spread_mine" "$peer_name" "$theirs" "$unit" "$spread_theirs" "$ratio"
}

echo
echo "bench/peers.sh$($short && echo ' --short'): $iterations uncontended, $handoffs handoffs" \
  "($polling_handoffs for redis-py and DistributedLock.Redis), $contenders contenders for $seconds s," \
  "$cli_runs CLI runs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "versions: dlock $("$build/cli/dlock" --version | awk '{print $NF}')," \
  "ZooKeeper $(package_version zookeeper), Redis $(package_version redis-server)," \
  "Curator $(package_version libcurator-framework-java), kazoo ${results[kazoo/version]:-?}," \
  "redis-py ${results[redis-py/version]:-?}, PostgreSQL $(package_version postgresql-15)," \
  "DistributedLock.Redis ${results[dotnet-redis/version]:-?} and .Postgres ${results[dotnet-postgres/version]:-?}" \
  "(.NET ${results[dotnet-postgres/runtime]:-?}), flock(1) util-linux $(package_version util-linux)"
[[ -z $dotnet_missing ]] || echo "DistributedLock's rows left out: $dotnet_missing"
echo
echo "| server | workload | dlock | peer | peer's figure | dlock ahead by (>1: dlock better) |"
echo "| --- | --- | --- | --- | --- | --- |"
uncontended="uncontended acquire + release, median (median of 3 runs)"
handoff="handoff between two processes, median"
contended="$contenders processes contending: grants/s (fewest to most of one process; median of 3 runs)"
contended_threads="$contenders threads of one process (a session each) contending: grants/s (fewest to most of one thread; median of 3 runs)"
for peer in curator:Curator kazoo:kazoo; do
  row ZooKeeper "$uncontended" dlock-zookeeper "${peer%%:*}" "${peer#*:}" uncontended_us false
  row ZooKeeper "$handoff" dlock-zookeeper "${peer%%:*}" "${peer#*:}" handoff_us false
  row ZooKeeper "$contended" dlock-zookeeper "${peer%%:*}" "${peer#*:}" contended_per_s true
  # Like for like with Curator, whose contenders are threads of one JVM with a session each
  # (kazoo's are processes, as dlock's in the row above).
  [[ $peer != curator:* ]] || row ZooKeeper "$contended_threads" dlock-zookeeper curator Curator \
    contended_threads_per_s true contended_per_s
done
row Redis "$uncontended" dlock-redis redis-py "redis-py Lock" uncontended_us false
row Redis "$handoff" dlock-redis redis-py "redis-py Lock" handoff_us false
row Redis "$contended" dlock-redis redis-py "redis-py Lock" contended_per_s true
row Redis "$uncontended" dlock-redis dotnet-redis DistributedLock.Redis uncontended_us false
row Redis "$handoff" dlock-redis dotnet-redis DistributedLock.Redis handoff_us false
row Redis "$contended" dlock-redis dotnet-redis DistributedLock.Redis contended_per_s true
row PostgreSQL "$uncontended" dlock-postgres dotnet-postgres DistributedLock.Postgres uncontended_us false
row PostgreSQL "$handoff" dlock-postgres dotnet-postgres DistributedLock.Postgres handoff_us false
row PostgreSQL "$contended" dlock-postgres dotnet-postgres DistributedLock.Postgres contended_per_s true
row files "per process: \`dlock -n file://DIR job -- true\`, wall median" dlock-cli flock 'flock(1)' \
  uncontended_us false
row files "$contenders shell loops contending: grants/s (fewest to most of one loop), one process per grant" \
  dlock-cli flock 'flock(1)' contended_per_s true
echo
echo "dlock-zookeeper's context switches per grant, contenders' threads summed (not the server's):" \
  "${results[dlock-zookeeper/contended_switches_per_grant]:-?} as processes," \
  "${results[dlock-zookeeper/contended_threads_switches_per_grant]:-?} as threads of one process;" \
  "voluntary alone (wake-ups): ${results[dlock-zookeeper/contended_wakeups_per_grant]:-?} and" \
  "${results[dlock-zookeeper/contended_threads_wakeups_per_grant]:-?}"
