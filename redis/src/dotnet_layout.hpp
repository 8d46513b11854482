// Private to dlock::redis: the .NET DistributedLock library's key layout (options::layout =
// dotnet): the Lua that reads and writes .NET's keys by .NET's rules, spliced into the acquire,
// release and extend scripts (scripts.cpp), and the words of a clash between two primitives
// of one name.
#pragma once

#include <string>

namespace dlock::redis::detail {

/// Lua defining dotnet_acquire, dotnet_release and dotnet_extend; each returns nil for a kind
/// that is not one of the layout's ("dnread", "dnwrite", "dnsem"). Needs now_ms and lengthen
/// (scripts.cpp) before it.
const char* dotnet_functions() noexcept;

/// The waiting mark .NET's writers leave in the writer key (RedisWriterWaitingPrimitive).
inline constexpr const char* dotnet_writer_waiting_suffix = "_WRITERWAITING";

/// What a WRONGTYPE reply means in the .NET layout: a lock (a string) and a semaphore (a sorted
/// set) of one name share the key `<prefix><name>`, so one of them cannot use it.
std::string dotnet_key_clash(const std::string& key);

}  // namespace dlock::redis::detail
