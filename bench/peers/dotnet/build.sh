#!/usr/bin/env bash
# Builds DlockPeerBench (bench/peers.sh's .NET peer) into OUT_DIR/bin, restoring DistributedLock
# from NuGet. Outside CI a failed build (no network, say) is a warning and leaves no program, so
# that peers.sh leaves the .NET rows out, saying so. Under CI=true it fails.
set -uo pipefail
out=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
# Built from a copy, so that obj/ and bin/ stay out of the source tree.
mkdir -p "$out/src"
cp "$here/DlockPeerBench.csproj" "$here"/*.cs "$out/src/"
if dotnet build "$out/src" -c Release -o "$out/bin" --nologo -v quiet -clp:NoSummary; then
  exit 0
fi
rm -f "$out/bin/DlockPeerBench"
if [[ ${CI:-} == true ]]; then
  echo "build.sh: the .NET peer did not build" >&2
  exit 1
fi
echo "build.sh: warning: the .NET peer did not build; bench/peers.sh leaves its rows out" >&2
exit 0
