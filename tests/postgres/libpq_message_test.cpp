// libpq's connection errors, each reason said once (libpq 15's texts, as it writes them).
#include <catch2/catch.hpp>

#include "libpq_message.hpp"

using dlock::postgres::detail::libpq_message;

TEST_CASE("a reason libpq gives for each address or each TLS try is said once", "[postgres]") {
  // localhost: ::1, then 127.0.0.1.
  CHECK(libpq_message(
            "connection to server at \"localhost\" (::1), port 1 failed: Connection refused\n"
            "\tIs the server running on that host and accepting TCP/IP connections?\n"
            "connection to server at \"localhost\" (127.0.0.1), port 1 failed: Connection "
            "refused\n"
            "\tIs the server running on that host and accepting TCP/IP connections?\n") ==
        "Connection refused. Is the server running on that host and accepting TCP/IP "
        "connections?");
  // sslmode=prefer: the TLS try, then the plain one.
  CHECK(libpq_message("connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  "
                      "password authentication failed for user \"nobody\"\n"
                      "connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  "
                      "password authentication failed for user \"nobody\"\n") ==
        "FATAL: password authentication failed for user \"nobody\"");
}

TEST_CASE("different reasons are each kept, saying where they came from", "[postgres]") {
  CHECK(libpq_message("connection to server at \"a\" (10.0.0.1), port 5432 failed: timeout "
                      "expired\n"
                      "connection to server at \"b\" (10.0.0.2), port 5432 failed: FATAL:  "
                      "the database system is starting up\n") ==
        "timeout expired (at \"a\" (10.0.0.1), port 5432); FATAL: the database system is "
        "starting up (at \"b\" (10.0.0.2), port 5432)");
}

TEST_CASE("libpq text of another shape is kept on one line", "[postgres]") {
  CHECK(libpq_message("server closed the connection unexpectedly\n\tThis probably means the "
                      "server terminated abnormally\n\tbefore or while processing the "
                      "request.\n") ==
        "server closed the connection unexpectedly. This probably means the server terminated "
        "abnormally before or while processing the request.");
  CHECK(libpq_message("") == "");
  CHECK(libpq_message(nullptr) == "");
}
