// dlock-cli-bench: the dlock command per process beside flock(1), measured in one run.
//
//   dlock-cli-bench [--dlock PATH] [--runs N] [--directory DIR] [--url URL]...
//
// Runs `dlock -n file://DIR job -- /bin/true` and `flock DIR/job.lock /bin/true` in turn (one of
// each, alternating, so that both see the same load) and prints the median wall time and CPU
// time (user + system) of every process a run makes, and their ratios to flock(1)'s. The bench
// is a child subreaper, so that dlock's watchdog, which dlock leaves to exit on its own, comes
// back to it and is counted with the run that started it (its share also printed alone, as
// "left"). Each --url adds
// `dlock -n URL bench-cli -- /bin/true` to the rotation, and the shared libraries the dlock
// process had mapped while it ran its command (what a URL's scheme makes it load).
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace {

using clock_type = std::chrono::steady_clock;

struct sample {
  double wall_us;
  double cpu_us;
  double left_cpu_us;  // of cpu_us, the processes the run left behind (dlock's watchdog)
};

struct contender {
  std::string label;
  std::vector<std::string> argv;
  std::vector<sample> samples;
};

double micros(const timeval& t) { return t.tv_sec * 1e6 + t.tv_usec; }

/// Runs `argv` to its end; its wall time and the CPU time of it and its waited-for children.
sample run_once(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const auto started = clock_type::now();
  pid_t pid = 0;
  if (const int err = ::posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ)) {
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(err));
  }
  int status = 0;
  rusage usage{};
  while (::wait4(pid, &status, 0, &usage) < 0) {
    if (errno != EINTR) throw std::runtime_error("wait4 failed");
  }
  const auto ended = clock_type::now();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error(argv[0] + " ... failed with status " + std::to_string(status));
  }
  double cpu_us = micros(usage.ru_utime) + micros(usage.ru_stime);
  double left_cpu_us = 0;
  // The processes it left (dlock's watchdog), reparented to this subreaper: theirs too.
  for (;;) {
    rusage left{};
    if (::wait4(-1, &status, 0, &left) < 0) {
      if (errno == EINTR) continue;
      if (errno == ECHILD) break;
      throw std::runtime_error("wait4 failed");
    }
    left_cpu_us += micros(left.ru_utime) + micros(left.ru_stime);
  }
  return {std::chrono::duration<double, std::micro>(ended - started).count(),
          cpu_us + left_cpu_us, left_cpu_us};
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

/// The shared libraries dlock has mapped while it runs a command under `url`: the command
/// reads its parent's (dlock's) memory map.
std::set<std::string> libraries_of(const std::string& dlock, const std::string& url,
                                   const std::filesystem::path& scratch) {
  const auto out = scratch / "maps";
  run_once({dlock, "-n", url, "bench-cli", "--", "/bin/sh", "-c",
            "cat /proc/$PPID/maps > '" + out.string() + "'"});
  std::ifstream maps(out);
  std::set<std::string> libraries;
  for (std::string line; std::getline(maps, line);) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    if (path.find(".so") != std::string::npos) {
      libraries.insert(std::filesystem::path(path).filename().string());
    }
  }
  return libraries;
}

int usage() {
  std::cerr << "usage: dlock-cli-bench [--dlock PATH] [--runs N] [--directory DIR] [--url URL]...\n";
  return 64;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dlock =
      (std::filesystem::canonical("/proc/self/exe").parent_path() / "../cli/dlock").lexically_normal();
  int runs = 500;
  std::filesystem::path directory;
  std::vector<std::string> urls;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return usage();
    if (arg == "--dlock") {
      dlock = argv[++i];
    } else if (arg == "--runs") {
      runs = std::atoi(argv[++i]);
    } else if (arg == "--directory") {
      directory = argv[++i];
    } else if (arg == "--url") {
      urls.push_back(argv[++i]);
    } else {
      return usage();
    }
  }
  if (runs <= 0) return usage();
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    std::perror("prctl(PR_SET_CHILD_SUBREAPER)");
    return 1;
  }
  char scratch_template[] = "/tmp/dlock-cli-bench.XXXXXX";
  if (!::mkdtemp(scratch_template)) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::filesystem::path scratch = scratch_template;
  if (directory.empty()) directory = scratch / "locks";
  std::filesystem::create_directories(directory);
  const std::string file_url = "file://" + std::filesystem::absolute(directory).string();
  const std::string flock = "/usr/bin/flock";

  std::vector<contender> contenders = {
      {"flock DIR/job.lock /bin/true", {flock, (directory / "job.lock").string(), "/bin/true"}, {}},
      {"dlock -n file://DIR job -- /bin/true", {dlock, "-n", file_url, "job", "--", "/bin/true"}, {}},
  };
  for (const auto& url : urls) {
    contenders.push_back({"dlock -n " + url + " bench-cli -- /bin/true",
                          {dlock, "-n", url, "bench-cli", "--", "/bin/true"}, {}});
  }
  try {
    for (auto& c : contenders) run_once(c.argv);  // warm the page cache
    for (int i = 0; i < runs; ++i) {
      for (auto& c : contenders) c.samples.push_back(run_once(c.argv));
    }
    std::printf("%d runs of each, alternating (%s)\n", runs, dlock.c_str());
    std::printf("%-60s %12s %12s %10s %10s %16s\n", "per process (CPU: every process of a run)",
                "wall median", "CPU median", "wall/flock", "CPU/flock", "left: CPU median");
    std::vector<double> flock_wall, flock_cpu;
    for (const auto& s : contenders[0].samples) {
      flock_wall.push_back(s.wall_us);
      flock_cpu.push_back(s.cpu_us);
    }
    const double wall_floor = median(flock_wall);
    const double cpu_floor = median(flock_cpu);
    for (const auto& c : contenders) {
      std::vector<double> wall, cpu, left_cpu;
      for (const auto& s : c.samples) {
        wall.push_back(s.wall_us);
        cpu.push_back(s.cpu_us);
        left_cpu.push_back(s.left_cpu_us);
      }
      std::printf("%-60s %9.0f us %9.0f us %9.3fx %9.3fx %13.0f us\n", c.label.c_str(),
                  median(wall), median(cpu), median(wall) / wall_floor, median(cpu) / cpu_floor,
                  median(left_cpu));
    }
  } catch (const std::exception& e) {
    std::cerr << "dlock-cli-bench: " << e.what() << "\n";
    return 1;
  }
  std::vector<std::string> mapped_urls = {file_url};
  mapped_urls.insert(mapped_urls.end(), urls.begin(), urls.end());
  for (const auto& url : mapped_urls) {
    try {
      const auto libraries = libraries_of(dlock, url, scratch);
      std::ostringstream names;
      for (const auto& name : libraries) names << " " << name;
      std::printf("shared libraries mapped by dlock under %s: %zu:%s\n", url.c_str(),
                  libraries.size(), names.str().c_str());
    } catch (const std::exception& e) {
      std::cerr << "dlock-cli-bench: " << e.what() << "\n";
      return 1;
    }
  }
  std::filesystem::remove_all(scratch);
  return 0;
}
