// Private to dlock::zookeeper: the ZooKeeper C client, as this library links it.
//
// The library carries its own copy of the client's single-threaded build, every symbol
// renamed (cmake/ZooKeeperPrivateClient.cmake), so that a program may also link Debian's
// threaded client for calls of its own. The generated header maps the API's names onto the
// renamed ones; every file of the backend includes the client through this header only.
#pragma once

#include <dlock_zookeeper_st_names.h>
#include <zookeeper/zookeeper.h>
