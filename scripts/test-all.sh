#!/usr/bin/env bash
# The README's test command: installs what is missing (servers included), builds everything
# with AddressSanitizer and UndefinedBehaviorSanitizer (the `asan` preset, as CI does) and runs
# every test with ctest; CTest fixtures start and stop the servers. A failed test fails the run:
# nothing is retried. `--plain` uses the `default` preset (RelWithDebInfo, no sanitizer)
# instead; other arguments go to ctest.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
preset=asan
if [[ ${1:-} == --plain ]]; then
  preset=default
  shift
fi

bash "$root/scripts/setup-debian.sh" --servers
cd "$root"
cmake --preset "$preset"
cmake --build --preset "$preset"
build_dir=build
[[ $preset == asan ]] && build_dir=build-asan
if ctest --preset "$preset" "$@"; then
  exit 0
fi
bash "$root/scripts/recap-failed-tests.sh" "$build_dir"
exit 1
