#include "fencing.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace dlock::postgres::detail {

namespace {

bool valid_sequence_name(const std::string& name) {
  if (name.empty() || name.front() == '.' || name.back() == '.') return false;
  return std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '.';
  });
}

}  // namespace

void validate_fencing_sequence(const std::string& sequence) {
  if (!sequence.empty() && !valid_sequence_name(sequence)) {
    throw std::invalid_argument("dlock: postgres: options.fencing_sequence '" + sequence +
                                "' is not a plain [schema.]name of letters, digits and '_'");
  }
}

std::string fencing_token_expression(const std::string& sequence) {
  return sequence.empty() ? "0" : "nextval('" + sequence + "')";
}

std::string create_fencing_sequence_sql(const std::string& sequence) {
  return "CREATE SEQUENCE IF NOT EXISTS " + sequence;
}

}  // namespace dlock::postgres::detail
