#!/usr/bin/env bash
# Installs what building and testing dlock needs on Debian 12, from Debian's own packages.
#
#   scripts/setup-debian.sh             the dlock command with the file backend (the demo preset):
#                                       a compiler, CMake, Ninja and Boost's headers
#   scripts/setup-debian.sh --backends  also every backend's client library and Catch2: what the
#                                       default preset builds
#   scripts/setup-debian.sh --servers   also the Redis, PostgreSQL 15, ZooKeeper, MariaDB and etcd
#                                       servers, their command-line clients, and a JDK with Apache
#                                       Curator for the ZooKeeper interoperability tests, the
#                                       Python peers bench/peers.sh compares dlock with (kazoo,
#                                       redis-py), lld, the sanitizer presets' linker, and ccache
#
# The ZooKeeper C client is the single-threaded build, libzookeeper-st-dev, which conflicts with
# libzookeeper-mt-dev (the same headers): an installed -mt-dev is removed to install it
# (docs/zookeeper.md, "The C client": one program cannot link both libraries anyway).
#
# Idempotent: installed packages are left alone, and `apt-get update` runs only when something is
# missing. Never prompts (CI=true, no stdin). The servers are installed but not started: the tests
# start private instances with scripts/test-servers.sh, so nothing may listen on the default ports.
set -euo pipefail

# The dlock command and the file backend: nothing but the compiler, the build tools and Asio.
demo_packages=(g++ cmake ninja-build make libboost-dev util-linux)
# The client libraries of the networked backends are build dependencies: they are built by default.
backend_packages=(pkg-config catch2 libhiredis-dev libpqxx-dev
                  libzookeeper-st-dev
                  # dlock::mysql: MariaDB Connector/C, and libcrypto for its name hash.
                  libmariadb-dev libssl-dev
                  # etcd: gRPC and protobuf, and etcd's .proto files the client is generated from
                  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
                  golang-etcd-server-dev
                  # bench/instructions.sh counts instructions under callgrind (and callgrind.h)
                  valgrind)
server_packages=(redis-server redis-tools redis-sentinel zookeeper default-jre-headless postgresql-15
                 postgresql-client-15 netcat-openbsd
                 iproute2 procps
                 # The MariaDB test server and the plain client its interop tests run.
                 mariadb-server mariadb-client
                 # Curator, for the ZooKeeper interoperability tests and benchmark.
                 default-jdk-headless libcurator-framework-java libcurator-recipes-java
                 # The peer libraries bench/peers.sh runs beside dlock (kazoo, redis-py's Lock).
                 python3-kazoo python3-redis
                 # The sanitizer presets' linker, three times faster than ld.bfd on the tests
                 lld
                 # A compiler cache: a rebuild of what did not change costs next to nothing
                 ccache
                # etcd and etcdctl (the tests look at the server and take locks with etcdctl)
                etcd-server etcd-client
                # libfaketime: the minimum hold's clock-skew test (tests/timing/skew_test.cpp)
                faketime)

usage() {
  echo "usage: $0 [--backends | --servers]" >&2
  exit 64
}

want_backends=false
want_servers=false
for argument in "$@"; do
  case "$argument" in
    --backends) want_backends=true ;;
    --servers) want_backends=true; want_servers=true ;;
    -h|--help) usage ;;
    *) echo "setup-debian: unknown argument '$argument'" >&2; usage ;;
  esac
done

packages=("${demo_packages[@]}")
if $want_backends; then
  packages+=("${backend_packages[@]}")
fi
if $want_servers; then
  packages+=("${server_packages[@]}")
fi

is_installed() {
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" == installed ]]
}

missing=()
for package in "${packages[@]}"; do
  is_installed "$package" || missing+=("$package")
done

if ((${#missing[@]} == 0)); then
  echo "setup-debian: everything is installed already"
  exit 0
fi

if ((EUID != 0)); then
  echo "setup-debian: missing packages: ${missing[*]}; run this script as root to install them" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive

# Package maintainer scripts start redis-server and postgresql through invoke-rc.d. A policy-rc.d
# that answers 101 ("action forbidden") stops that, so the default ports stay free. An existing
# policy of the administrator is kept aside and put back.
policy=/usr/sbin/policy-rc.d
policy_backup=""
restore_policy() {
  rm -f "$policy"
  if [[ -n "$policy_backup" ]]; then
    mv "$policy_backup" "$policy"
  fi
}
if [[ -e "$policy" ]]; then
  policy_backup="$(mktemp "$policy.dlock-backup.XXXXXX")"
  mv "$policy" "$policy_backup"
fi
trap restore_policy EXIT
printf '#!/bin/sh\n# Written by dlock scripts/setup-debian.sh while it installs packages.\nexit 101\n' >"$policy"
chmod 755 "$policy"

# libzookeeper-st-dev and libzookeeper-mt-dev conflict: name the removal (a trailing '-'), so
# that apt does it without asking, and says so.
removals=()
if $want_backends && is_installed libzookeeper-mt-dev; then
  echo "setup-debian: removing libzookeeper-mt-dev: libzookeeper-st-dev replaces it"
  removals+=(libzookeeper-mt-dev-)
fi

echo "setup-debian: installing ${missing[*]}"
apt-get update -q </dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" "${removals[@]}" </dev/null
# Where earlier versions of this script put a private copy of libzookeeper_st.a: nothing reads it.
rm -rf /usr/local/lib/dlock-private
echo "setup-debian: done"
