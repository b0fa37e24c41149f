-- slidelimit bucketed window (exact, O(buckets) memory). The contract is docs/protocol.md.
-- It never runs alone: core (core/src/script.rs) prepends lua/prelude.lua and
-- sends the two as one script (`cat lua/prelude.lua lua/bucketed_window.lua`
-- is the exact text). The prelude checks ARGV[1..4] and defines read_only,
-- key, max_number, int, limit, window, cost, now (Redis TIME if not given)
-- and argument_error.
-- KEYS[1]  one hash per tenant, window and bucket count: `t` the newest
--          recorded admission (ms), `n` the sum of the bucket counts held,
--          `o` no bucket field below it, and one field per bucket index b
--          (decimal) holding the permits admitted in that bucket.
-- ARGV     limit, window_ms, cost, now_ms ('' = read Redis TIME), buckets.
-- Reply    {allowed, remaining, retry_after_ms, reset_after_ms, now_ms}.
--
-- With g = window / buckets, a permit recorded at r belongs to bucket
-- b = floor(r / g) and counts until x_b = (b + 1) * g - 1 + window (held as
-- if admitted at its bucket's last millisecond): [r, r + window) is inside
-- [r, x_b), so no rolling window ever holds more than limit.

if #ARGV ~= 5 then
  return redis.error_reply('ERR slidelimit: expected one key and five arguments')
end
-- The most buckets accepted (slidelimit_core::MAX_BUCKETS): a check after an
-- idle gap reads and deletes up to this many fields. Checked where core
-- checks buckets: after the prelude's rules on limit and window_ms, before
-- those on cost and now_ms (argument_error).
local max_buckets = 3600
local buckets = ARGV[5]
if not string.find(buckets, '^%d+$') then
  return redis.error_reply('ERR slidelimit invalid_argument buckets: must be a decimal integer (digits only)')
end
buckets = buckets + 0
if buckets < 1 then
  return redis.error_reply('ERR slidelimit invalid_argument buckets: must be at least 1')
elseif buckets > max_buckets then
  return redis.error_reply('ERR slidelimit invalid_argument buckets: exceeds ' .. int(max_buckets)
    .. ', the most a bucketed window accepts')
elseif math.fmod(window, buckets) ~= 0 then
  return redis.error_reply('ERR slidelimit invalid_argument buckets: must divide window_ms')
end
if argument_error then
  return argument_error
end
local foreign = 'WRONGTYPE slidelimit: the key holds data slidelimit did not write (a bucketed window field that is missing or not an integer); delete it or use another namespace'

-- No local function here: Redis runs the whole text on every call, and each
-- would be a new closure every time (docs/benchmarks.md). Numbers go to
-- redis.call as they are, not through int(): Redis formats an integral Lua
-- number as its integer digits (`%.17g` up to 7.0, its integer printer from
-- 7.2; checked exact up to 2^53 on every server of docs/compatibility.md),
-- and skipping string.format is most of this script's hot path. Floor division of
-- integers 0 <= n, 0 < d below 2^53 is (n - math.fmod(n, d)) / d: fmod is
-- exact, `/` alone may round up.
local g = window / buckets
-- One read answers the common checks: t, n, o and, for t = now, the oldest
-- live bucket (a denial's retry, usually). A small hash is a listpack, where
-- each field is found by a scan from its head: t, n and o were written first
-- and stay there, the oldest buckets follow, and the newest (where an
-- admission adds) or a field that is not there costs a whole scan. So the
-- read asks for nothing near the tail; an admission reads its bucket's count
-- on its own.
local own = (now - math.fmod(now, g)) / g
local oldest_guess = 0
if now + 1 > window then
  oldest_guess = (now + 1 - window - math.fmod(now + 1 - window, g)) / g
end
local meta = redis.call('HMGET', key, 't', 'n', 'o', oldest_guess)

if not meta[1] then
  -- No admission recorded: an empty key, or one that is not ours.
  if meta[2] or meta[3] or meta[4] or redis.call('EXISTS', key) == 1 then
    return redis.error_reply(foreign)
  end
  -- x_b - now, summed so that no intermediate passes 2^53 (exact in doubles).
  local ttl = (own + 1) * g - now + (window - 1)
  if not read_only then
    redis.call('HSET', key, own, cost, 't', now, 'n', cost, 'o', own)
    redis.call('PEXPIRE', key, ttl)
  end
  return {1, limit - cost, 0, ttl, now}
end

-- Every value read is checked to be an integer the script could have written.
for i = 1, 4 do
  local v = meta[i]
  if v then
    v = tonumber(v)
    if not (v and v >= 0 and v <= max_number and v % 1 == 0) then
      return redis.error_reply(foreign)
    end
    meta[i] = v
  elseif i <= 3 then
    return redis.error_reply(foreign)
  end
end
local newest, held, o = meta[1], meta[2], meta[3]

-- The time rule (docs/protocol.md, "Time"): evaluated at t = max(now, newest).
local t = now
if newest > t then
  t = newest
end
-- Buckets below first_live have expired at t (x_b <= t).
local first_live = oldest_guess
if t ~= now and t + 1 > window then
  first_live = (t + 1 - window - math.fmod(t + 1 - window, g)) / g
end
local newest_bucket = (newest - math.fmod(newest, g)) / g
local live, expired_fields = held, nil
if newest_bucket < first_live then
  -- Everything has expired: an acquire starts the key afresh.
  live = 0
elseif o < first_live then
  -- Each bucket index is crossed once over the key's life; o is at least
  -- the first live bucket of the last admission, so this is at most
  -- buckets + 1 fields (more means o was not written by this script).
  if first_live - o > buckets + 1 then
    return redis.error_reply(foreign)
  end
  expired_fields = {}
  local fields = {}
  for b = o, first_live - 1 do
    fields[#fields + 1] = b
  end
  local counts = redis.call('HMGET', key, unpack(fields))
  for i = 1, #fields do
    local c = counts[i]
    if c then
      c = tonumber(c)
      if not (c and c >= 0 and c <= max_number and c % 1 == 0) then
        return redis.error_reply(foreign)
      end
      live = live - c
      expired_fields[#expired_fields + 1] = fields[i]
    end
  end
  if live < 0 then
    return redis.error_reply(foreign)
  end
end

if live + cost <= limit then
  local b = (t - math.fmod(t, g)) / g
  local ttl = (b + 1) * g - now + (window - 1)
  local fresh = live == 0 and newest_bucket < first_live
  local count = 0
  if not fresh then
    -- Read by peek too: a peek fails where an acquire would.
    count = tonumber(redis.call('HGET', key, b) or '0')
    if not (count and count >= 0 and count <= max_number and count % 1 == 0) then
      return redis.error_reply(foreign)
    end
  end
  if not read_only then
    if fresh then
      redis.call('DEL', key)
      redis.call('HSET', key, b, cost, 't', t, 'n', cost, 'o', b)
    else
      if expired_fields and #expired_fields > 0 then
        redis.call('HDEL', key, unpack(expired_fields))
      end
      if o < first_live then
        redis.call('HSET', key, b, count + cost, 't', t, 'n', live + cost, 'o', first_live)
      else
        redis.call('HSET', key, b, count + cost, 't', t, 'n', live + cost)
      end
    end
    redis.call('PEXPIRE', key, ttl)
  end
  return {1, limit - live - cost, 0, ttl, now}
end

-- Denied: nothing is recorded, nothing is dropped. The retry waits for the
-- oldest live bucket at which the count from the oldest reaches need.
local need = live + cost - limit
local b = first_live
if o > b then
  b = o
end
local found = nil
local sum = 0
if b == oldest_guess then
  -- The oldest live bucket came with the first read.
  sum = meta[4] or 0
  if sum >= need then
    found = b
  end
  b = b + 1
end
local chunk = 4
while not found do
  if b > newest_bucket then
    -- The buckets hold fewer permits than n says.
    return redis.error_reply(foreign)
  end
  local last = math.min(b + chunk - 1, newest_bucket)
  local fields = {}
  for i = b, last do
    fields[#fields + 1] = i
  end
  local counts = redis.call('HMGET', key, unpack(fields))
  for i = 1, #fields do
    local c = counts[i]
    if c then
      c = tonumber(c)
      if not (c and c >= 0 and c <= max_number and c % 1 == 0) then
        return redis.error_reply(foreign)
      end
      sum = sum + c
      if sum >= need then
        found = b + i - 1
        break
      end
    end
  end
  b = last + 1
  chunk = chunk * 2
end
return {0, math.max(0, limit - live), (found + 1) * g - now + (window - 1),
  (newest_bucket + 1) * g - now + (window - 1), now}
