#include "keys.hpp"

#include <stdexcept>

namespace dlock::redis::detail {

namespace {

/// A name inside a hash tag: '%', '{' and '}' are written %25, %7B and %7D, so the first '}'
/// of a key always ends its tag and distinct names never share a key.
std::string escape_for_tag(std::string_view name) {
  std::string escaped;
  escaped.reserve(name.size());
  for (char c : name) {
    if (c == '%') {
      escaped += "%25";
    } else if (c == '{') {
      escaped += "%7B";
    } else if (c == '}') {
      escaped += "%7D";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

// A SCAN/KEYS pattern matching `text` literally.
std::string glob_escaped(std::string_view text) {
  std::string escaped;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') escaped += '\\';
    escaped += c;
  }
  return escaped;
}

std::string unescape_tag(std::string_view escaped) {
  std::string name;
  for (std::size_t i = 0; i < escaped.size(); ++i) {
    const std::string_view rest = escaped.substr(i, 3);
    if (rest == "%25" || rest == "%7B" || rest == "%7D") {
      name += rest == "%25" ? '%' : rest == "%7B" ? '{' : '}';
      i += 2;
    } else {
      name += escaped[i];
    }
  }
  return name;
}

constexpr std::string_view tagged_fence_suffix = "}:fence";

}  // namespace

std::string key_scheme::counters_pattern(std::string_view name_prefix) const {
  if (plain_keys_) {
    return glob_escaped(prefix_) + glob_escaped(name_prefix) + "*" +
           glob_escaped(plain_fence_suffix);
  }
  return glob_escaped(prefix_ + "{" + escape_for_tag(name_prefix)) + "*" +
         glob_escaped(tagged_fence_suffix);
}

std::string key_scheme::name_of_counter(std::string_view key) const {
  key.remove_prefix(prefix_.size());
  if (plain_keys_) return std::string(key.substr(0, key.size() - plain_fence_suffix.size()));
  key.remove_prefix(1);  // the tag's '{'
  return unescape_tag(key.substr(0, key.size() - tagged_fence_suffix.size()));
}

std::string_view script_argument(key_kind kind) noexcept {
  switch (kind) {
    case key_kind::lock: return "lock";
    case key_kind::read: return "read";
    case key_kind::write: return "write";
    case key_kind::semaphore: return "sem";
    case key_kind::dotnet_read: return "dnread";
    case key_kind::dotnet_write: return "dnwrite";
    case key_kind::dotnet_semaphore: return "dnsem";
  }
  return "lock";
}

std::string_view withdraw_argument(key_kind kind) noexcept {
  return kind == key_kind::dotnet_write ? "dnwithdraw" : "withdraw";
}

std::string key_scheme::lock_key(std::string_view name) const {
  if (plain_keys_) return prefix_ + std::string(name);
  return prefix_ + "{" + escape_for_tag(name) + "}";
}

key_set key_scheme::keys_for(const acquire_request& request, const dlock::backend& owner) const {
  key_set keys = dotnet_ && (request.kind == resource_kind::lock ||
                             request.kind == resource_kind::reader_writer_lock ||
                             request.kind == resource_kind::semaphore)
                     ? dotnet_keys(request, owner)
                     : keys_for_name(request, owner);
  if (shard_channels_) keys.publish = "SPUBLISH";
  // Plain keys stay what other SET NX clients see; elections keep their own order.
  if ((request.kind == resource_kind::lock && !plain_keys_) ||
      request.kind == resource_kind::upgrade_gate) {
    keys.queue = keys.keys[0] + ":queue";
  }
  // In the lock key's hash tag; a plain key has none, and a name could be another's key.
  if (request.kind == resource_kind::lock && !plain_keys_) keys.hold = keys.keys[0] + ":hold";
  return keys;
}

key_set key_scheme::keys_for_name(const acquire_request& request,
                                  const dlock::backend& owner) const {
  // An election has no counterpart among other clients' locks: its keys are tagged in either
  // mode.
  // .NET's layout has its own keys for these (dotnet_keys); its upgrade gate is dlock's.
  if (plain_keys_ && !dotnet_ && request.kind != resource_kind::lock &&
      request.kind != resource_kind::election) {
    // Other clients' SET NX PX locks know no shared mode and no slots: such a lock of the
    // name would not exclude them, though the option promises it.
    throw std::invalid_argument(owner.message(
        std::string("plain_keys covers only the exclusive lock, not a ") +
            (request.kind == resource_kind::semaphore ? "semaphore" : "reader-writer lock") +
            "; use a provider without plain_keys",
        request.name));
  }
  const std::string base = prefix_ + "{" + escape_for_tag(request.name) + "}";
  switch (request.kind) {
    case resource_kind::lock:
      if (plain_keys_) {
        const std::string key = lock_key(request.name);
        // Plain keys are the name as is, so a name could be another lock's counter.
        if (key.ends_with(plain_fence_suffix)) {
          throw std::invalid_argument(owner.message(
              "with plain_keys a lock name may not end in '" + std::string(plain_fence_suffix) +
                  "' (the fencing counter of the lock without it)",
              request.name));
        }
        key_set keys{key_kind::lock, {key, key + std::string(plain_fence_suffix)},
                     key + ":dlock-released"};
        keys.foreign_holders = true;
        return keys;
      }
      return {key_kind::lock, {base, base + ":fence", base + ":owners"}, base + ":released"};
    case resource_kind::reader_writer_lock:
      return {request.mode == lock_mode::shared ? key_kind::read : key_kind::write,
              {base + ":rw:writer", base + ":fence", base + ":rw:readers", base + ":rw:waiting",
               base + ":owners"},
              base + ":rw:released"};
    case resource_kind::semaphore:
      return {key_kind::semaphore,
              {base + ":sem", base + ":fence", base + ":sem:max", base + ":owners"},
              base + ":sem:released"};
    case resource_kind::upgrade_gate:
      // An exclusive lock of its own, in the name's hash tag (also with plain keys).
      return {key_kind::lock, {base + ":gate", base + ":fence"}, base + ":gate:released"};
    case resource_kind::election:
      // An exclusive lock of its own, with owners of its own (so that the lock of the same
      // name never shows the leader as its holder) and the leader's record beside it
      // (KEYS[4]), which the scripts extend and delete with the lock (docs/election.md).
      return {key_kind::lock,
              {base + ":election", base + ":fence", base + ":election:owners", base + ":leader"},
              base + ":election:released"};
  }
  throw std::invalid_argument("dlock: redis: unknown primitive");
}

key_set key_scheme::inspection_keys(std::string_view name) const {
  const std::string base = prefix_ + "{" + escape_for_tag(name) + "}";
  const std::string lock = lock_key(name);
  return {key_kind::lock,
          {lock, base + ":rw:writer", base + ":rw:readers", base + ":rw:waiting", base + ":sem",
           base + ":sem:max", base + ":owners", base + ":gate"},
          {}};
}

std::vector<std::string> key_scheme::release_channels(std::string_view name) const {
  const std::string base = prefix_ + "{" + escape_for_tag(name) + "}";
  return {plain_keys_ ? lock_key(name) + ":dlock-released" : base + ":released",
          base + ":rw:released", base + ":sem:released", base + ":gate:released"};
}

}  // namespace dlock::redis::detail
