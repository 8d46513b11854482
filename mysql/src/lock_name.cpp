#include "lock_name.hpp"

#include <array>
#include <stdexcept>

#include <openssl/evp.h>

#include <dlock/core/backend/naming.hpp>
#include <dlock/mysql/lock_name.hpp>

namespace dlock::mysql {

namespace detail {

namespace {

// MySQL refuses longer names (MariaDB accepts them, but a name must mean the same on both).
constexpr std::size_t max_server_name = 64;

std::string tag_of(name_space space, std::uint32_t slot) {
  switch (space) {
    case name_space::lock: return "L";
    case name_space::writer_gate: return "W";
    case name_space::reader_slot: return "R" + std::to_string(slot);
    case name_space::semaphore_slot: return "S" + std::to_string(slot);
    case name_space::upgrade_gate: return "U";
    case name_space::election: return "E";
  }
  throw std::logic_error("dlock: mysql: unknown name space");
}

bool readable(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '_' || c == '.';
}

}  // namespace

// The statements of one attempt and its release name the same lock several times, each name
// a SHA-256: each thread keeps the last name's hash, and the digest is looked up once (an
// implicit fetch per digest costs more than the hash of a short name).
std::string name_hash(std::string_view data) {
  thread_local std::string last_name, last_hash;
  if (!last_hash.empty() && last_name == data) return last_hash;
  static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  if (!sha256 ||
      EVP_Digest(data.data(), data.size(), digest.data(), &size, sha256, nullptr) != 1) {
    throw std::runtime_error("dlock: mysql: SHA-256 failed");
  }
  static constexpr char alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
  std::string out;
  unsigned buffer = 0;
  int bits = 0;
  for (std::size_t i = 0; i < 16; ++i) {
    buffer = (buffer << 8) | digest[i];
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(buffer >> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  out += alphabet[(buffer << (5 - bits)) & 31];  // the last 3 bits, padded
  last_name = data;
  last_hash = out;
  return out;
}

std::string server_name(name_space space, std::string_view name, std::uint32_t slot) {
  std::string result = "dlock:" + tag_of(space, slot) + ":" + name_hash(name) + ":";
  for (char c : name) {
    if (result.size() >= max_server_name) break;
    result += readable(c) ? c : '_';
  }
  return result;
}

}  // namespace detail

std::string server_lock_name(std::string_view name) {
  naming::validate_name(name);
  return detail::server_name(detail::name_space::lock, name);
}

}  // namespace dlock::mysql
