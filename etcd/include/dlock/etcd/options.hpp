// dlock/etcd/options.hpp: dlock::etcd::options, what an etcd provider is built from.
//
// provider.hpp includes this; docs/etcd.md describes each option and its URL form.
#pragma once

#include <chrono>
#include <string>

#include <dlock/core/durations.hpp>
#include <dlock/core/errors.hpp>

namespace dlock::etcd {

/// TLS to the members (etcd's --cert-file/--key-file, and --client-cert-auth for a client
/// certificate). Files are PEM; empty paths mean "none".
struct tls_options {
  bool enabled = false;
  /// The CA bundle that signed the members' certificates; empty: the system's roots.
  std::string ca_file;
  /// A client certificate and its key, for members that check client certificates.
  std::string cert_file;
  std::string key_file;
};

/// Options of an etcd provider; validated by the provider's constructor.
struct options {
  /// The cluster's client endpoints, "host:port[,host:port...]". Required. The client fails
  /// over between them.
  std::string endpoints;
  /// Prepended to every key: the lock `job` queues under `<prefix>job/`. Empty for none, else
  /// it ends in '/'. etcdctl lock `<prefix>job` takes the same lock.
  std::string prefix = "dlock/";
  /// The TTL of the provider's etcd lease. A holder that cannot reach a quorum for this long
  /// loses its locks; etcd takes whole seconds, at least 2 (so 2s to 2^31 - 1 s).
  std::chrono::nanoseconds lease_ttl = std::chrono::seconds(10);
  /// How long the constructor waits for the first lease before it throws. Positive.
  std::chrono::nanoseconds connect_timeout = std::chrono::seconds(10);
  /// How long a blocking call on the provider's thread (a release, current_count()) waits for
  /// the cluster before it throws connection_error. Positive.
  std::chrono::nanoseconds release_timeout = dlock::default_release_timeout;
  /// etcd authentication (Auth.Authenticate); empty user for none.
  std::string user;
  std::string password;
  tls_options tls;
  /// Receives errors of background work and of releases in destructors.
  error_handler on_error;
};

}  // namespace dlock::etcd
