// dlock/zookeeper.hpp: the ZooKeeper backend.
#pragma once

#include <dlock/core.hpp>
#include <dlock/zookeeper/provider.hpp>
