#!/bin/sh
# Instructions per uncontended acquire + release on the file and memory backends (and the
# memory backend's async_acquire with a callback and with use_awaitable), counted by
# callgrind (Debian's valgrind): unlike a time, the machine's load cannot move it, so a change
# in dlock's own code shows. User-space instructions only (a system call counts as the
# instructions that make it, not the kernel's work). docs/benchmarks.md records the figures.
#
#   bench/instructions.sh [BUILD_DIR] [ITERATIONS]      # build dlock-instructions first
set -eu
build=${1:-build}
iterations=${2:-10000}
program="$build/bench/dlock-instructions"
if ! command -v valgrind >/dev/null; then
  echo "instructions.sh: valgrind not found (apt-get install valgrind)" >&2
  exit 69
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for what in flock-floor file memory memory-callback memory-awaitable; do
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
    "$program" "$what" "$iterations" >/dev/null 2>&1
  total=$(awk '$1 == "totals:" { print $2; exit }' "$out")
  printf '%-17s %8d instructions per acquire + release (%d iterations, %s Ir)\n' \
    "$what" $((total / iterations)) "$iterations" "$total"
done
