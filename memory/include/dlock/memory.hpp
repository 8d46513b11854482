// dlock/memory.hpp: the in-memory backend (one process).
#pragma once

#include <dlock/core.hpp>
#include <dlock/memory/provider.hpp>
