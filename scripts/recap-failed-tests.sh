#!/usr/bin/env bash
# Prints, after a ctest run, the start of each failed test's own output (where Catch2 names the
# failed assertion and its messages), so that the end of a long log says why, not only which.
# CTest prints that output where the test ended, thousands of lines earlier, and a CI reader
# often sees only the tail. Usage: recap-failed-tests.sh BUILD_DIR [LINES_PER_TEST]
set -euo pipefail
build=${1:?usage: recap-failed-tests.sh BUILD_DIR [LINES_PER_TEST]}
lines=${2:-30}
failed=$build/Testing/Temporary/LastTestsFailed.log
log=$build/Testing/Temporary/LastTest.log
[[ -s $failed && -f $log ]] || exit 0

echo
echo "=== the failed tests' output (first $lines lines each; all of it: $log)"
shown=0
while IFS= read -r entry; do
  name=${entry#*:}  # "1383:zookeeper/a stop ..." -> the test's name
  ((shown < 4)) || { echo "... and more: see $failed"; break; }
  shown=$((shown + 1))
  echo "--- $name"
  # The test's block: from its "Output:" line to "<end of output>"; Catch2's banner skipped.
  awk -v name="$name" -v lines="$lines" '
    $0 ~ /^[0-9]+\/[0-9]+ Test: / { sub(/^[0-9]+\/[0-9]+ Test: /, ""); current = $0; next }
    current == name && /^Output:/ { inside = 1; next }
    inside && /^<end of output>/ { inside = 0; current = ""; next }
    inside && (/^[-~.=]+$/ || /is a Catch v[0-9.]+ host application/ || /^Filters: / || /^Run with -\? for options/ || /^$/) { next }
    inside && printed < lines { print "  " $0; printed++ }
  ' "$log"
done < "$failed"
