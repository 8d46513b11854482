// The main of the partition tests: Catch2's, after a check that the partition set is up. Where it
// is not (no root, no iproute2: the fixture said why) the program exits 77, which CTest reports
// as a skip (SKIP_RETURN_CODE), unless CI=true, where the tests run and fail loudly.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <vector>

#include "partition_servers.hpp"

int main(int argc, char* argv[]) {
  // `--partition-backend NAME` picks the backend of the scenario program (scenario.hpp); CTest
  // discovers that program once per backend with it. Catch2 never sees it.
  std::vector<char*> arguments;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--partition-backend") == 0 && i + 1 < argc) {
      ::setenv("DLOCK_PARTITION_BACKEND", argv[++i], 1);
    } else {
      arguments.push_back(argv[i]);
    }
  }
  argc = static_cast<int>(arguments.size());
  argv = arguments.data();
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::strncmp(argv[i], "--list", 6) == 0;
  const char* ci = std::getenv("CI");
  const bool in_ci = ci != nullptr && std::strcmp(ci, "true") == 0;
  if (!listing && !in_ci) {
    if (auto reason = support::partition_servers::unavailable_reason()) {
      std::cout << "SKIPPED: " << *reason << "\n";
      return 77;
    }
  }
  return Catch::Session().run(argc, argv);
}
