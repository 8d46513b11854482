// dlock/etcd.hpp: the etcd backend.
#pragma once

#include <dlock/core.hpp>
#include <dlock/etcd/provider.hpp>
