#!/usr/bin/env bash
# The README's test command: installs what is missing (servers included), builds everything
# and runs every test with ctest; CTest fixtures start and stop the servers.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${DLOCK_BUILD_DIR:-$root/build}

bash "$root/scripts/setup-debian.sh" --servers
cmake -S "$root" -B "$build" -DDLOCK_BUILD_TESTS=ON
cmake --build "$build" -j2
cd "$build"
ctest --output-on-failure --timeout 600 -j2 "$@"
