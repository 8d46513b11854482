#!/usr/bin/env bash
# The main job on the file backend, no server needed: installs only what the `dlock` command
# and the file backend need, builds only them (the `demo` preset, in build-demo/), then three
# `dlock` processes contend for one lock. The first holds it for two seconds, the second waits
# for it, the third gives up at once (-n) with the conflict exit code. The networked backends
# are one step away: scripts/setup-debian.sh --backends, then the `default` preset (README).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${DLOCK_BUILD_DIR:-$root/build-demo}

bash "$root/scripts/setup-debian.sh"
cd "$root"
cmake --preset demo -B "$build" >/dev/null
cmake --build "$build" -j2 --target dlock_cli
dlock=$build/cli/dlock

lock_dir=$(mktemp -d)
trap 'rm -rf "$lock_dir"' EXIT
url=file://$lock_dir
echo
echo "== lock directory $lock_dir; lock name nightly-report"
echo "== first: holds the lock for 2 s"
"$dlock" -v "$url" nightly-report -- \
  sh -c 'echo "   first is running (fencing token $DLOCK_FENCING_TOKEN)"; sleep 2' &
first=$!
# Wait, with a deadline, until the first really holds the lock (flock(1) sees it taken).
for _ in $(seq 100); do
  if [[ -e $lock_dir/nightly-report.lock ]] && ! flock -n "$lock_dir/nightly-report.lock" true; then
    break
  fi
  sleep 0.05
done
echo "== third: -n gives up at once while the lock is held"
set +e
"$dlock" -v -n "$url" nightly-report -- echo "never printed"
echo "   third exited with $? (the conflict code)"
set -e
echo "== second: waits up to 10 s, then runs"
"$dlock" -v -w 10 "$url" nightly-report -- \
  sh -c 'echo "   second is running (fencing token $DLOCK_FENCING_TOKEN)"'
wait "$first"
echo "== done: the second ran only after the first released, with a higher fencing token"
