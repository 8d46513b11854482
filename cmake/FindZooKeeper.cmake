# FindZooKeeper: the ZooKeeper C client, multi-threaded flavour (Debian: libzookeeper-mt-dev).
#
# Debian ships neither a pkg-config file nor a CMake package for it, so this module finds the
# header and the library and provides the imported target ZooKeeper::zookeeper_mt (with
# THREADED defined, which the header needs to declare the synchronous API).
#
# Sets ZooKeeper_FOUND, ZooKeeper_INCLUDE_DIR, ZooKeeper_LIBRARY and ZooKeeper_VERSION.
find_path(ZooKeeper_INCLUDE_DIR zookeeper/zookeeper.h)
find_library(ZooKeeper_LIBRARY zookeeper_mt)

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

if(ZooKeeper_FOUND AND NOT TARGET ZooKeeper::zookeeper_mt)
  add_library(ZooKeeper::zookeeper_mt UNKNOWN IMPORTED)
  set_target_properties(ZooKeeper::zookeeper_mt PROPERTIES
    IMPORTED_LOCATION "${ZooKeeper_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${ZooKeeper_INCLUDE_DIR}"
    INTERFACE_COMPILE_DEFINITIONS THREADED)
endif()
mark_as_advanced(ZooKeeper_INCLUDE_DIR ZooKeeper_LIBRARY)
