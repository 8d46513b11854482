// One networked backend as a plugin of the dlock command (cli/CMakeLists.txt builds one per
// backend): the command opens it when a URL's scheme needs it and calls its one entry point,
// which registers the backend's schemes with the command's core.
#include DLOCK_PLUGIN_HEADER

extern "C" __attribute__((visibility("default"))) void dlock_register_backend() {
  dlock::DLOCK_PLUGIN_NAMESPACE::register_scheme();
}
