# Real servers for the tests: CTest fixtures around scripts/test-servers.sh.
#
# For each networked backend whose client library is installed, this defines a fixture
# `<server>_server` (redis_server, redis_tls_server, redis_sentinel_server, redis_failover_server, postgres_server, zookeeper_server, etcd_server,
# mariadb_server): the setup test
# `servers/start-<server>` starts the servers once per ctest run and the cleanup test
# `servers/stop-<server>` stops them after the last test that needs them. A test opts in with
# FIXTURES_REQUIRED <server>_server and LABELS <server>; it finds the endpoints through
# support::test_server_endpoint() (tests/support/test_servers.hpp), which reads
# ${DLOCK_TEST_STATE_DIR}/endpoints.env.
#
# The fixtures start servers with `--owner ctest` and stop only what ctest started, so servers a
# developer keeps up with `scripts/test-servers.sh --state-dir <dir> start` are reused and left
# running (docs/testing.md).
#
# Sets DLOCK_TEST_SERVER_<REDIS|POSTGRES|ZOOKEEPER|ETCD|MARIADB> to ON when that server's fixture
# exists (its client library is installed and its backend is built), and
# defines dlock_test_servers, the helper library linked by tests that talk to the servers.

set(DLOCK_TEST_STATE_DIR "${CMAKE_BINARY_DIR}/test-servers" CACHE PATH
    "Where the test servers keep their data, logs, PIDs and endpoints.env")
set(DLOCK_TEST_SERVERS_SCRIPT "${PROJECT_SOURCE_DIR}/scripts/test-servers.sh")

# The client library each server's tests link, so that no fixture starts a server no test can use.
find_package(PkgConfig)
if(PkgConfig_FOUND)
  pkg_check_modules(dlock_test_hiredis IMPORTED_TARGET hiredis)
  pkg_check_modules(dlock_test_pqxx IMPORTED_TARGET libpqxx)
endif()
# ZooKeeper: the single-threaded C client dlock::zookeeper links (cmake/FindZooKeeper.cmake); the
# tests drive its asynchronous API themselves (tests/servers/zookeeper_client.cpp).
if(TARGET ZooKeeper::zookeeper_st AND NOT TARGET dlock_test_zookeeper_client)
  add_library(dlock_test_zookeeper_client INTERFACE)
  target_link_libraries(dlock_test_zookeeper_client INTERFACE ZooKeeper::zookeeper_st)
endif()

# MariaDB (dlock::mysql): the fixture mariadb_server, and the client its tests use.
if(PkgConfig_FOUND)
  pkg_check_modules(dlock_test_mariadb IMPORTED_TARGET libmariadb)
endif()
# A server's fixture, its own tests and its partition group exist only in a build of its
# backend: a build without it (the tsan preset) has no test that would use them.
set(DLOCK_TEST_SERVER_MARIADB OFF)
if(dlock_test_mariadb_FOUND AND DLOCK_WITH_MYSQL)
  set(DLOCK_TEST_SERVER_MARIADB ON)
endif()
set(DLOCK_TEST_SERVER_REDIS OFF)
if(dlock_test_hiredis_FOUND AND DLOCK_WITH_REDIS)
  set(DLOCK_TEST_SERVER_REDIS ON)
endif()
set(DLOCK_TEST_SERVER_POSTGRES OFF)
if(dlock_test_pqxx_FOUND AND DLOCK_WITH_POSTGRES)
  set(DLOCK_TEST_SERVER_POSTGRES ON)
endif()
set(DLOCK_TEST_SERVER_ZOOKEEPER OFF)
if(TARGET dlock_test_zookeeper_client AND DLOCK_WITH_ZOOKEEPER)
  set(DLOCK_TEST_SERVER_ZOOKEEPER ON)
endif()
# etcd's tests look at the server with etcdctl (Debian's etcd-client); only a build with the
# etcd backend starts the server.
find_program(DLOCK_TEST_ETCDCTL etcdctl)
set(DLOCK_TEST_SERVER_ETCD OFF)
if(DLOCK_TEST_ETCDCTL AND DLOCK_WITH_ETCD)
  set(DLOCK_TEST_SERVER_ETCD ON)
endif()

# dlock_add_test_server_fixture(<server>): the setup and cleanup tests of fixture <server>_server.
# They carry the server's label, so `ctest -L <server>` selects them along with the tests.
# Like support::test_servers_state_dir(), an environment variable DLOCK_TEST_STATE_DIR at ctest
# time wins over the configured directory, so that two runs in one build tree can use two sets of
# servers.
# An optional second argument names the script's server group when it differs (redis_tls: the
# group redis-tls).
function(dlock_add_test_server_fixture server)
  set(group ${server})
  if(ARGC GREATER 1)
    set(group ${ARGV1})
  endif()
  set(script "${DLOCK_TEST_SERVERS_SCRIPT}" --default-state-dir "${DLOCK_TEST_STATE_DIR}")
  add_test(NAME servers/start-${server} COMMAND ${script} start --owner ctest ${group})
  set_tests_properties(servers/start-${server} PROPERTIES
    FIXTURES_SETUP ${server}_server LABELS "${server}" TIMEOUT 180)
  add_test(NAME servers/stop-${server} COMMAND ${script} stop --owner ctest ${group})
  set_tests_properties(servers/stop-${server} PROPERTIES
    FIXTURES_CLEANUP ${server}_server LABELS "${server}" TIMEOUT 120)
endfunction()

set(dlock_test_missing_library_redis "hiredis (apt-get install libhiredis-dev)")
set(dlock_test_missing_library_postgres "libpqxx (apt-get install libpqxx-dev)")
set(dlock_test_missing_library_zookeeper
    "the ZooKeeper C client (apt-get install libzookeeper-st-dev)")
set(dlock_test_missing_library_etcd "etcdctl (apt-get install etcd-client)")
foreach(server IN ITEMS redis postgres zookeeper etcd)
  string(TOUPPER "${server}" upper)
  if(DLOCK_TEST_SERVER_${upper})
    dlock_add_test_server_fixture(${server})
  elseif(DLOCK_WITH_${upper})
    message(STATUS "dlock: ${server} server tests skipped: ${dlock_test_missing_library_${server}} not found")
  endif()
endforeach()
# Redis over TLS (servers with certificates of a test CA that the script makes with openssl) and
# over a Unix socket: fixture redis_tls_server, label redis_tls, so that the plain Redis tests
# never wait for these servers.
if(DLOCK_TEST_SERVER_REDIS)
  dlock_add_test_server_fixture(redis_tls redis-tls)
  # Redis Sentinel (label redis_sentinel): redis_sentinel_server for the contract suite, and
  # redis_failover_server, a second deployment that the failover tests fail over and kill.
  dlock_add_test_server_fixture(redis_sentinel redis-sentinel)
  dlock_add_test_server_fixture(redis_failover redis-failover)
  # A Redis Cluster of three masters: fixture redis_cluster_server, label redis_cluster.
  dlock_add_test_server_fixture(redis_cluster redis-cluster)
  # TLS through Sentinel and through a Cluster (small groups of their own), started with the
  # labels of the tests that use them.
  foreach(deployment IN ITEMS sentinel cluster)
    dlock_add_test_server_fixture(redis_tls_${deployment} redis-tls-${deployment})
    set_tests_properties(servers/start-redis_tls_${deployment} servers/stop-redis_tls_${deployment}
      PROPERTIES LABELS redis_${deployment})
  endforeach()
endif()

# etcd over TLS and with authentication on: fixture etcd_secure_server, label etcd_secure, so
# that the plain etcd tests never wait for these servers.
if(DLOCK_TEST_SERVER_ETCD)
  dlock_add_test_server_fixture(etcd_secure etcd-secure)
endif()

if(DLOCK_TEST_SERVER_MARIADB)
  dlock_add_test_server_fixture(mariadb)
elseif(DLOCK_WITH_MYSQL)
  message(STATUS "dlock: mariadb server tests skipped: MariaDB Connector/C (apt-get install libmariadb-dev) not found")
endif()

# The partition set: another Redis/RedLock, Sentinel and Cluster, PostgreSQL, ZooKeeper (standalone
# and ensemble), MariaDB and etcd inside a network namespace, each reachable over two paths that
# tests cut and heal
# (scripts/partition-net.sh, tests/support/partition_servers.hpp). Fixture `partition_servers`,
# label `partition`. Where namespaces cannot be made (not root, no iproute2) the setup test
# exits 77, a skip, and so do the tests (tests/partition/partition_main.cpp); with CI=true both
# fail instead.
set(dlock_partition_groups)
foreach(server IN ITEMS redis postgres zookeeper)
  string(TOUPPER "${server}" upper)
  if(DLOCK_TEST_SERVER_${upper})
    list(APPEND dlock_partition_groups ${server})
  endif()
endforeach()
# Sentinel and Cluster announce their path A addresses (scripts/partition-net.sh).
if(DLOCK_TEST_SERVER_REDIS)
  list(APPEND dlock_partition_groups redis-sentinel redis-cluster)
endif()
if(DLOCK_TEST_SERVER_MARIADB)
  list(APPEND dlock_partition_groups mariadb)
endif()
if(DLOCK_WITH_ETCD AND DLOCK_TEST_SERVER_ETCD)
  list(APPEND dlock_partition_groups etcd)
endif()
if(dlock_partition_groups)
  set(script "${DLOCK_TEST_SERVERS_SCRIPT}" --default-state-dir "${DLOCK_TEST_STATE_DIR}"
             --partition-set)
  add_test(NAME servers/start-partition
           COMMAND ${script} start --owner ctest ${dlock_partition_groups})
  set_tests_properties(servers/start-partition PROPERTIES
    FIXTURES_SETUP partition_servers LABELS partition TIMEOUT 180 SKIP_RETURN_CODE 77)
  add_test(NAME servers/stop-partition COMMAND ${script} stop --owner ctest)
  set_tests_properties(servers/stop-partition PROPERTIES
    FIXTURES_CLEANUP partition_servers LABELS partition TIMEOUT 120)
endif()

add_library(dlock_test_servers STATIC "${PROJECT_SOURCE_DIR}/tests/support/test_servers.cpp"
                                      "${PROJECT_SOURCE_DIR}/tests/support/partition_servers.cpp")
target_include_directories(dlock_test_servers PUBLIC "${PROJECT_SOURCE_DIR}/tests/support")
# Its two files each read the endpoints file with a helper of the same name.
set_target_properties(dlock_test_servers PROPERTIES UNITY_BUILD OFF)
target_link_libraries(dlock_test_servers PUBLIC dlock_test_support PRIVATE dlock_warnings)
target_compile_definitions(dlock_test_servers PRIVATE
  DLOCK_TEST_SERVERS_SCRIPT="${DLOCK_TEST_SERVERS_SCRIPT}"
  DLOCK_TEST_STATE_DIR="${DLOCK_TEST_STATE_DIR}")
