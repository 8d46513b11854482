#include "redis_floor.hpp"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <new>
#include <stdexcept>
#include <thread>

#include "bench_support.hpp"

namespace dlock_bench {

namespace {

constexpr int max_rounds = 100000;

const char* const release_source =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) "
    "redis.call('PUBLISH', ARGV[2], ARGV[1]) return 1 end return 0";

// Shared between the two processes of the raw handoff.
struct turns_board {
  std::atomic<std::int64_t> release_sent_ns{0};
  std::atomic<int> last_holder{-1};
  std::atomic<int> waiting[2] = {0, 0};
  std::atomic<int> finished[2] = {0, 0};
  std::atomic<int> sample_count{0};
  double samples_us[max_rounds];
};

void send_without_reading(redisContext* c, const std::vector<std::string>& arguments) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const auto& a : arguments) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  if (redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lengths.data()) !=
      REDIS_OK) {
    throw std::runtime_error(std::string("redis: ") + c->errstr);
  }
  for (int done = 0; !done;) {
    if (redisBufferWrite(c, &done) != REDIS_OK) {
      throw std::runtime_error(std::string("redis: ") + c->errstr);
    }
  }
}

reply_ptr read_reply(redisContext* c) {
  void* r = nullptr;
  if (redisGetReply(c, &r) != REDIS_OK || !r) {
    throw std::runtime_error(std::string("redis: ") + c->errstr);
  }
  return reply_ptr(static_cast<redisReply*>(r));
}

// One process's side of the raw handoff: the holder's release names it in its message, so
// that a process never wakes for its own release.
void raw_turns(turns_board& board, int me, const redis_endpoint& server, int rounds,
               int settle_us) {
  const int peer = 1 - me;
  const std::string key = "dlock-bench:raw-handoff", channel = key + ":released";
  const std::string token = "raw-holder-" + std::to_string(me);
  const std::string peer_token = "raw-holder-" + std::to_string(peer);
  auto commands = connect(server);
  auto subscriber = connect(server);
  run(subscriber.get(), {"SUBSCRIBE", channel});
  const std::string sha = run(commands.get(), {"SCRIPT", "LOAD", release_source})->str;
  for (int i = 0; i < rounds; ++i) {
    while (i > 0 && board.last_holder.load() == me && !board.finished[peer]) {
      std::this_thread::yield();
    }
    board.waiting[me] = 1;
    while (run(commands.get(), {"SET", key, token, "NX", "PX", "30000"})->type !=
           REDIS_REPLY_STATUS) {
      // Blocked on the subscriber's socket until the peer's release message arrives.
      while (true) {
        const auto message = read_reply(subscriber.get());
        if (message->elements == 3 && message->element[2]->str == peer_token) break;
      }
    }
    const std::int64_t acquired = now_ns();
    board.waiting[me] = 0;
    if (board.last_holder.load() == peer) {
      const int slot = board.sample_count.fetch_add(1);
      if (slot < max_rounds) {
        board.samples_us[slot] = (acquired - board.release_sent_ns.load()) / 1000.0;
      }
    }
    board.last_holder = me;
    while (!board.waiting[peer] && !board.finished[peer]) std::this_thread::yield();
    const std::int64_t settle_until = now_ns() + std::int64_t{settle_us} * 1000;
    while (now_ns() < settle_until) {
    }
    board.release_sent_ns = now_ns();
    run(commands.get(), {"EVALSHA", sha, "1", key, token, channel});
  }
  board.finished[me] = 1;
}

}  // namespace

context_ptr connect(const redis_endpoint& server) {
  context_ptr c(redisConnect(server.first.c_str(), server.second));
  if (!c || c->err) {
    throw std::runtime_error("cannot connect to " + server.first + ":" +
                             std::to_string(server.second));
  }
  return c;
}

reply_ptr run(redisContext* c, const std::vector<std::string>& arguments) {
  send_without_reading(c, arguments);
  reply_ptr r = read_reply(c);
  if (r->type == REDIS_REPLY_ERROR) throw std::runtime_error(std::string("redis: ") + r->str);
  return r;
}

std::vector<double> raw_handoff(const redis_endpoint& server, int rounds, int settle_us) {
  rounds = std::min(rounds, max_rounds);
  void* memory = ::mmap(nullptr, sizeof(turns_board), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) throw std::runtime_error("mmap failed");
  auto* board = new (memory) turns_board;
  const pid_t child = ::fork();
  if (child == 0) {
    try {
      raw_turns(*board, 1, server, rounds, settle_us);
      ::_exit(0);
    } catch (const std::exception& e) {
      std::cerr << "raw handoff child: " << e.what() << "\n";
      board->finished[1] = 1;
      ::_exit(1);
    }
  }
  raw_turns(*board, 0, server, rounds, settle_us);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("raw handoff child failed");
  }
  const int n = std::min(board->sample_count.load(), max_rounds);
  std::vector<double> samples(board->samples_us, board->samples_us + n);
  ::munmap(memory, sizeof(turns_board));
  return samples;
}

std::vector<double> raw_parallel_floor(const std::vector<redis_endpoint>& servers,
                                       int iterations) {
  std::vector<context_ptr> connections;
  for (const auto& server : servers) connections.push_back(connect(server));
  const std::string key = "dlock-bench:parallel-floor", fence = key + ":fence";
  const std::string token = "0123456789abcdef0123456789abcdef";
  const std::string release =
      "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end "
      "return 0";
  std::string sha;
  for (auto& c : connections) sha = run(c.get(), {"SCRIPT", "LOAD", release})->str;
  const auto everywhere = [&](const std::vector<std::string>& arguments) {
    for (auto& c : connections) send_without_reading(c.get(), arguments);
    for (auto& c : connections) read_reply(c.get());
  };
  std::vector<double> samples;
  samples.reserve(iterations);
  for (int i = 0; i < iterations; ++i) {
    const auto start = clock_type::now();
    everywhere({"GET", fence});
    everywhere({"SET", key, token, "NX", "PX", "30000"});
    everywhere({"EVALSHA", sha, "1", key, token});
    samples.push_back(micros(clock_type::now() - start).count());
  }
  return samples;
}

std::vector<redis_endpoint> endpoints_of(const std::string& url) {
  std::string rest = url.substr(url.find("//") + 2);
  rest = rest.substr(0, rest.find_first_of("/?"));
  std::vector<redis_endpoint> servers;
  while (!rest.empty()) {
    const std::string one = rest.substr(0, rest.find(','));
    rest.erase(0, std::min(rest.size(), one.size() + 1));
    const auto colon = one.rfind(':');
    servers.emplace_back(one.substr(0, colon), std::stoi(one.substr(colon + 1)));
  }
  return servers;
}

}  // namespace dlock_bench
