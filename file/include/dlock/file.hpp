// dlock/file.hpp: the file (flock) backend.
#pragma once

#include <dlock/core.hpp>
#include <dlock/file/provider.hpp>
