#!/usr/bin/env bash
# Installs what dlock needs from Debian 12's packages (as root): the build tools, and with
# --servers the Redis, PostgreSQL and ZooKeeper servers and client libraries the tests use.
# Idempotent: packages already installed are not fetched again.
set -euo pipefail

packages=(g++ cmake make pkg-config libboost-dev catch2 util-linux)
if [[ "${1:-}" == "--servers" ]]; then
  packages+=(redis-server redis-tools zookeeper default-jre-headless postgresql-15
             postgresql-client-15 libhiredis-dev libpqxx-dev libzookeeper-mt-dev)
elif [[ $# -gt 0 ]]; then
  echo "usage: $0 [--servers]" >&2
  exit 64
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$package")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
if [[ $EUID -ne 0 ]]; then
  echo "setup-debian.sh: missing packages ${missing[*]}; run as root to install them" >&2
  exit 1
fi
echo "setup-debian.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
