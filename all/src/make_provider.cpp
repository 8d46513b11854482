#include <dlock/dlock.hpp>

#include <mutex>

namespace dlock {

namespace {

void register_built_backends() {
#if DLOCK_HAS_FILE
  file::register_scheme();
#endif
#if DLOCK_HAS_MEMORY
  memory::register_scheme();
#endif
#if DLOCK_HAS_REDIS
  redis::register_scheme();
#endif
#if DLOCK_HAS_POSTGRES
  postgres::register_scheme();
#endif
#if DLOCK_HAS_ZOOKEEPER
  zookeeper::register_scheme();
#endif
#if DLOCK_HAS_MYSQL
  mysql::register_scheme();
#endif
#if DLOCK_HAS_ETCD
  etcd::register_scheme();
#endif
}

}  // namespace

std::shared_ptr<provider> make_provider(std::string_view url) {
  static std::once_flag registered;
  std::call_once(registered, register_built_backends);
  return create_registered_provider(url);
}

}  // namespace dlock
