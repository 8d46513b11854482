// Private to dlock::zookeeper: the ZooKeeper C client, as this library links it.
//
// The single-threaded build (libzookeeper_st, cmake/FindZooKeeper.cmake): without THREADED the
// header declares the asynchronous calls and zookeeper_interest()/zookeeper_process(), which
// client_pump drives; the synchronous ones belong to the threaded build, which one program
// cannot link beside this one (the same symbols). Every file of the backend includes the
// client through this header only.
#pragma once

#ifdef THREADED
#error "dlock::zookeeper is built on libzookeeper_st; THREADED declares libzookeeper_mt's API"
#endif
#include <zookeeper/zookeeper.h>
