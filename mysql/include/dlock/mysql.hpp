// dlock/mysql.hpp: the MariaDB / MySQL backend (dlock::mysql::provider and its name mapping).
#pragma once

#include <dlock/mysql/lock_name.hpp>
#include <dlock/mysql/provider.hpp>
