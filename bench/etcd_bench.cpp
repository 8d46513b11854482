// dlock-etcd-bench: dlock::etcd beside the raw gRPC stubs it is built on.
//
//   dlock-etcd-bench URL [--iterations N] [--handoffs N] [--contenders P] [--seconds S]
//
// URL: the member or cluster, etcd://host:port[,host:port...]
// floor: the round trips an uncontended grant and its release need at least, on the generated
//   stubs' synchronous API under one lease: concurrency.Mutex's Txn (create the key unless it
//   exists, list the queue) and a DeleteRange.
// uncontended: dlock acquire() + release of one lock, N times, in the same run.
// handoff: two processes take turns on one lock; each sample is the time from the holder
//   starting release() to the waiter's acquire() returning.
// contended: P processes acquire and release one lock for S seconds; grants per second.
// docs/benchmarks.md records the figures and the command that produced them.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include <dlock/dlock.hpp>

#include "bench_support.hpp"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace {

using namespace dlock_bench;
namespace pb = etcdserverpb;

std::string endpoint_of(const std::string& url) {
  const auto parsed = dlock::provider_url::parse(url);
  const auto& first = parsed.hosts.at(0);
  return first.host + ":" + std::to_string(first.port.value_or(2379));
}

void check(const grpc::Status& status, const char* what) {
  if (!status.ok()) throw std::runtime_error(std::string(what) + ": " + status.error_message());
}

std::vector<double> raw_floor(const std::string& endpoint, const std::string& queue,
                              int iterations) {
  auto channel = grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  auto kv = pb::KV::NewStub(channel);
  auto leases = pb::Lease::NewStub(channel);
  pb::LeaseGrantRequest grant;
  grant.set_ttl(10);
  pb::LeaseGrantResponse granted;
  {
    grpc::ClientContext context;
    check(leases->LeaseGrant(&context, grant, &granted), "lease grant");
  }
  char hex[32];
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(granted.id()));
  const std::string key = queue + hex;
  std::string end = queue;
  ++end.back();
  pb::TxnRequest txn;
  auto& compare = *txn.add_compare();
  compare.set_key(key);
  compare.set_target(pb::Compare::CREATE);
  compare.set_result(pb::Compare::EQUAL);
  compare.set_create_revision(0);
  auto& put = *txn.add_success()->mutable_request_put();
  put.set_key(key);
  put.set_lease(granted.id());
  auto& listing = *txn.add_success()->mutable_request_range();
  listing.set_key(queue);
  listing.set_range_end(end);
  listing.set_sort_order(pb::RangeRequest::ASCEND);
  listing.set_sort_target(pb::RangeRequest::CREATE);
  txn.add_failure()->mutable_request_range()->set_key(key);
  pb::DeleteRangeRequest remove;
  remove.set_key(key);
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(iterations));
  for (int i = 0; i < iterations; ++i) {
    const auto start = clock_type::now();
    pb::TxnResponse answer;
    grpc::ClientContext txn_context;
    check(kv->Txn(&txn_context, txn, &answer), "txn");
    pb::DeleteRangeResponse deleted;
    grpc::ClientContext delete_context;
    check(kv->DeleteRange(&delete_context, remove, &deleted), "delete");
    samples.push_back(micros(clock_type::now() - start).count());
  }
  pb::LeaseRevokeRequest revoke;
  revoke.set_id(granted.id());
  pb::LeaseRevokeResponse revoked;
  grpc::ClientContext context;
  (void)leases->LeaseRevoke(&context, revoke, &revoked);
  return samples;
}

}  // namespace

int main(int argc, char** argv) try {
  const auto options = parse_run_options(argc, argv, "dlock-etcd-bench", "etcd://host:port[,...]");
  if (!options) return 64;
  const auto& [server, iterations, handoffs, contenders, seconds] = *options;
  const std::string prefix = "dlock-bench-" + std::to_string(::getpid());
  const std::string base = server.substr(0, server.find('/', std::string("etcd://").size()));
  const std::string url = base + "/" + prefix;
  std::printf("dlock-etcd-bench: %s\n", url.c_str());

  // The runs that fork come first, while this process has no gRPC threads: the contended run
  // (only children take the lock), then the handoff (this process takes turns too, after it
  // forked its peer). A process whose gRPC has run must not fork: the child's gRPC has no
  // threads and never answers. 3 ms: enough for an etcd waiter to queue its key and watch.
  const double rate = grants_per_second(url, contenders, seconds);
  const auto handoff_samples = handoff(url, handoffs, std::chrono::microseconds(3000));
  {
    auto provider = dlock::make_provider(url);
    auto lock = provider->create_lock("uncontended");
    const std::string raw_queue = prefix + "/raw/";
    uncontended(lock, iterations / 10);  // warm-up
    raw_floor(endpoint_of(server), raw_queue, iterations / 10);
    const auto floor = summarize(raw_floor(endpoint_of(server), raw_queue, iterations));
    const auto ours = summarize(uncontended(lock, iterations));
    print_row("raw Txn+DeleteRange (the floor)", floor, static_cast<std::size_t>(iterations));
    print_row("dlock acquire+release, uncontended", ours, static_cast<std::size_t>(iterations));
    std::printf("%-44s median %9.2fx\n", "ratio to the floor", ours.median_us / floor.median_us);
  }
  print_row("dlock handoff between two processes", summarize(handoff_samples),
            handoff_samples.size());
  std::printf("%-44s %9.0f grants/s (%d processes, %.0f s)\n", "dlock contended", rate,
              contenders, seconds);
  print_async_rows(url, iterations);
  print_async_waiters(url, 10000);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "dlock-etcd-bench: " << e.what() << "\n";
  return 1;
}
