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

void validate_name_option(const std::string& value, const char* field) {
  if (!value.empty() && !valid_sequence_name(value)) {
    throw std::invalid_argument(std::string("dlock: postgres: options.") + field + " '" + value +
                                "' is not a plain [schema.]name of letters, digits and '_'");
  }
}

}  // namespace

void validate_fencing_sequence(const std::string& sequence) {
  validate_name_option(sequence, "fencing_sequence");
}

void validate_owners_table(const std::string& table) {
  validate_name_option(table, "owners_table");
}

std::string fencing_token_expression(const std::string& sequence) {
  return sequence.empty() ? "0" : "nextval('" + sequence + "')";
}

std::string beside_fencing_sequence(const std::string& sequence, const std::string& table) {
  const auto dot = sequence.rfind('.');
  return (dot == std::string::npos ? "" : sequence.substr(0, dot + 1)) + table;
}

std::string create_fencing_sequence_sql(const std::string& sequence) {
  return "CREATE SEQUENCE IF NOT EXISTS " + sequence;
}

}  // namespace dlock::postgres::detail
