# What each dlock component links from the system, stated once: the build includes this file
# (CMakeLists.txt), and it is installed beside dlock-config.cmake, which includes it for a
# project that finds dlock (a static libdlock-<backend> still needs its libraries at link time).
#
# dlock_find_dependencies(<component>) finds them, or stops with a FATAL_ERROR naming the Debian
# packages that provide them. What only the build needs (protoc, etcd's .proto files) stays in
# CMakeLists.txt.
include_guard(GLOBAL)

# FindZooKeeper.cmake lives beside this file, in the source tree and in the installed package.
set(_dlock_dependencies_dir "${CMAKE_CURRENT_LIST_DIR}")

# pkg-config module(s) `modules` as the imported target PkgConfig::<prefix>.
macro(_dlock_pkg_config component prefix modules packages)
  if(NOT TARGET PkgConfig::${prefix})
    find_package(PkgConfig QUIET)
    if(PkgConfig_FOUND)
      pkg_check_modules(${prefix} QUIET IMPORTED_TARGET ${modules})
    endif()
    if(NOT TARGET PkgConfig::${prefix})
      message(FATAL_ERROR "dlock::${component} needs ${modules}: apt-get install ${packages} "
                          "pkg-config (or build dlock without ${component})")
    endif()
  endif()
endmacro()

# A CMake package whose `target` must exist afterwards; the other arguments go to find_package.
macro(_dlock_package component target packages)
  if(NOT TARGET ${target})
    find_package(${ARGN} QUIET)
    if(NOT TARGET ${target})
      message(FATAL_ERROR "dlock::${component} needs ${target}: apt-get install ${packages} "
                          "(or build dlock without ${component})")
    endif()
  endif()
endmacro()

macro(dlock_find_dependencies component)
  if("${component}" STREQUAL "core")
    _dlock_package(core Threads::Threads "libc6-dev" Threads)
    _dlock_package(core Boost::headers "libboost-dev" Boost 1.74)
  elseif("${component}" STREQUAL "redis")
    _dlock_pkg_config(redis hiredis hiredis libhiredis-dev)
    # TLS to Redis (rediss://) over Boost.Asio's ssl::stream: hiredis 0.14 has no TLS of its own.
    _dlock_package(redis OpenSSL::SSL libssl-dev OpenSSL 1.1.1)
  elseif("${component}" STREQUAL "postgres")
    _dlock_pkg_config(postgres dlock_libpqxx "libpqxx;libpq" libpqxx-dev)
  elseif("${component}" STREQUAL "mysql")
    _dlock_pkg_config(mysql dlock_libmariadb libmariadb libmariadb-dev)
    _dlock_package(mysql OpenSSL::Crypto libssl-dev OpenSSL COMPONENTS Crypto)
  elseif("${component}" STREQUAL "zookeeper")
    if(NOT TARGET ZooKeeper::zookeeper_st)
      list(APPEND CMAKE_MODULE_PATH "${_dlock_dependencies_dir}")
      find_package(ZooKeeper MODULE QUIET)
      list(POP_BACK CMAKE_MODULE_PATH)
    endif()
    if(NOT TARGET ZooKeeper::zookeeper_st)
      # The two Debian packages conflict; apt removes -mt-dev to install -st-dev.
      message(FATAL_ERROR "dlock::zookeeper needs the ZooKeeper C client's single-threaded "
                          "build: apt-get install libzookeeper-st-dev (it replaces "
                          "libzookeeper-mt-dev; one program cannot link both), set "
                          "ZooKeeper_ROOT to a tree that has it, or build dlock without "
                          "zookeeper")
    endif()
  elseif("${component}" STREQUAL "etcd")
    _dlock_package(etcd gRPC::grpc++ libgrpc++-dev gRPC CONFIG)
    _dlock_package(etcd protobuf::libprotobuf libprotobuf-dev Protobuf)
  endif()
endmacro()
