# FindZooKeeper: the ZooKeeper C client, single-threaded build (Debian: libzookeeper-st-dev).
#
# dlock::zookeeper drives that build from its provider's own thread
# (docs/design/zookeeper-single-threaded-client.md). Debian ships neither a pkg-config file nor a
# CMake package for it, so this module finds the header and the library and provides the
# imported target ZooKeeper::zookeeper_st. It does not define THREADED: the header then declares
# only the asynchronous API (zoo_acreate, zoo_amulti, ...) and zookeeper_interest/
# zookeeper_process, which the caller drives; the synchronous calls (zoo_create, zoo_multi) are
# the multi-threaded build's alone.
#
# One program cannot link both builds: libzookeeper_st and libzookeeper_mt define the same
# symbols, so one would serve the other's calls. A program that links dlock::zookeeper makes its
# own ZooKeeper calls through this library too (docs/zookeeper.md, "The C client"). Debian's
# libzookeeper-st-dev and libzookeeper-mt-dev conflict (the same headers), so installing one
# removes the other.
#
# Sets ZooKeeper_FOUND, ZooKeeper_INCLUDE_DIR, ZooKeeper_LIBRARY and ZooKeeper_VERSION. Point it
# at a tree of its own with ZooKeeper_ROOT or CMAKE_PREFIX_PATH.
find_path(ZooKeeper_INCLUDE_DIR zookeeper/zookeeper.h)
# A build directory configured by an older dlock cached the multi-threaded library here.
if(ZooKeeper_LIBRARY AND NOT ZooKeeper_LIBRARY MATCHES "zookeeper_st")
  unset(ZooKeeper_LIBRARY CACHE)
endif()
find_library(ZooKeeper_LIBRARY zookeeper_st)

if(ZooKeeper_INCLUDE_DIR AND EXISTS "${ZooKeeper_INCLUDE_DIR}/zookeeper/zookeeper_version.h")
  file(STRINGS "${ZooKeeper_INCLUDE_DIR}/zookeeper/zookeeper_version.h" _zookeeper_version_line
       REGEX "^#define ZOO_VERSION \"[^\"]*\"")
  string(REGEX REPLACE "^#define ZOO_VERSION \"([^\"]*)\".*" "\\1" ZooKeeper_VERSION
         "${_zookeeper_version_line}")
  unset(_zookeeper_version_line)
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(ZooKeeper
  REQUIRED_VARS ZooKeeper_LIBRARY ZooKeeper_INCLUDE_DIR
  VERSION_VAR ZooKeeper_VERSION)

if(ZooKeeper_FOUND AND NOT TARGET ZooKeeper::zookeeper_st)
  add_library(ZooKeeper::zookeeper_st UNKNOWN IMPORTED)
  set_target_properties(ZooKeeper::zookeeper_st PROPERTIES
    IMPORTED_LOCATION "${ZooKeeper_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${ZooKeeper_INCLUDE_DIR}")
endif()
mark_as_advanced(ZooKeeper_INCLUDE_DIR ZooKeeper_LIBRARY)
