#include "reply.hpp"

#include <hiredis/hiredis.h>

namespace dlock::redis::detail {

reply copy_reply(const redisReply& from) {
  reply to;
  switch (from.type) {
    case REDIS_REPLY_STRING: to.type = reply::kind::string; break;
    case REDIS_REPLY_ARRAY: to.type = reply::kind::array; break;
    case REDIS_REPLY_INTEGER: to.type = reply::kind::integer; break;
    case REDIS_REPLY_STATUS: to.type = reply::kind::status; break;
    case REDIS_REPLY_ERROR: to.type = reply::kind::error; break;
    default: to.type = reply::kind::nil; break;
  }
  to.integer = from.integer;
  if (from.str != nullptr) to.text.assign(from.str, from.len);
  for (std::size_t i = 0; i < from.elements; ++i) to.elements.push_back(copy_reply(*from.element[i]));
  return to;
}

}  // namespace dlock::redis::detail
