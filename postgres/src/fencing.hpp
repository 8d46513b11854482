// Private to dlock::postgres: fencing tokens from a sequence (options.fencing_sequence).
#pragma once

#include <string>

namespace dlock::postgres::detail {

/// Throws std::invalid_argument naming options.fencing_sequence unless `sequence` is empty or
/// a plain [schema.]name of letters, digits and '_' (it is pasted into SQL).
void validate_fencing_sequence(const std::string& sequence);

/// The same for options.owners_table.
void validate_owners_table(const std::string& table);

/// The SQL expression that gives a grant its token: nextval('<sequence>'), or 0 when
/// `sequence` is empty (no fencing).
std::string fencing_token_expression(const std::string& sequence);

/// The name of the backend's table `table` beside the sequence: in its schema, if it names one.
std::string beside_fencing_sequence(const std::string& sequence, const std::string& table);

/// The statement a new session runs first, so that the sequence exists.
std::string create_fencing_sequence_sql(const std::string& sequence);

}  // namespace dlock::postgres::detail
