-- slidelimit sliding log (exact). The contract is docs/protocol.md.
-- It never runs alone: core (core/src/script.rs) prepends lua/prelude.lua and
-- sends the two as one script (`cat lua/prelude.lua lua/sliding_log.lua` is
-- the exact text). The prelude checks ARGV and defines read_only, argv,
-- argc, key, max_number, format, limit, window, cost, now (Redis TIME if not
-- given), argument_error and min_margin.
-- KEYS[1]  the log: a list of admitted permit timestamps (ms), oldest first.
-- ARGV     limit, window_ms, cost, now_ms ('' = read Redis TIME).
-- Reply    {allowed, remaining, retry_after_ms, reset_after_ms, now_ms}.

if argc ~= 4 then
  return redis.error_reply('ERR slidelimit: expected one key and four arguments')
end
-- The largest limit the log accepts (slidelimit_core::MAX_LOG_LIMIT): one
-- entry per permit, so a check's work grows with its cost and with the
-- expired entries it trims; this bound keeps every check short. Checked
-- where core checks it: after the prelude's rules on limit and window_ms,
-- before those on cost and now_ms (argument_error).
local max_limit = 10000
if limit > max_limit then
  return redis.error_reply('ERR slidelimit invalid_argument limit: exceeds ' .. format('%d', max_limit)
    .. ', the most the sliding log accepts (one entry per permit); use sliding_counter for higher limits')
end
if argument_error then
  return argument_error
end
-- A key holding what this script never writes is an error before any write.
-- (One literal: Lua does not fold `..` of constants, it would concatenate on every call.)
local foreign = 'WRONGTYPE slidelimit: the key holds data slidelimit did not write (a log entry that is not an integer timestamp); delete it or use another namespace'

-- The time rule (docs/protocol.md, "Time"): callers' clocks may disagree, so
-- a check is evaluated at t = max(now, newest recorded entry), an admission is
-- recorded at t, and nothing is dropped unless it has expired at the newest
-- recorded time. An entry at s counts at t iff t < s + W: entries <= horizon
-- are expired.
-- The two oldest entries arrive in one call: in steady state at most one of
-- them has expired. (Every redis.call and every string-to-number conversion
-- costs here, so the script makes as few as it can; see docs/benchmarks.md.)
-- Every entry read is checked to be an integer timestamp (the script writes
-- nothing else) before anything is written.
local head = redis.call('LRANGE', key, '0', '1')
for i = 1, #head do
  local s = tonumber(head[i])
  if not (s and s >= 0 and s <= max_number and s % 1 == 0) then
    return redis.error_reply(foreign)
  end
  head[i] = s
end
local len = #head
if len == 2 then
  len = redis.call('LLEN', key)
end
local function at(i) -- 0-based index into the list as it is now
  if i < #head then
    return head[i + 1]
  end
  local s = tonumber(redis.call('LINDEX', key, format('%d', i)))
  if s and s >= 0 and s <= max_number and s % 1 == 0 then
    return s
  end
end

local newest = nil
if len > 0 then
  if len <= #head then
    newest = head[len]
  else
    newest = tonumber(redis.call('LINDEX', key, '-1'))
    if not (newest and newest >= 0 and newest <= max_number and newest % 1 == 0) then
      return redis.error_reply(foreign)
    end
  end
end
local t = now
if newest and newest > t then
  t = newest
end
local horizon = t - window

local expired = 0
while expired < #head and head[expired + 1] <= horizon do
  expired = expired + 1
end
if expired == 2 and len > 2 then
  if newest <= horizon then
    expired = len
  else
    -- A long idle gap: binary-search the first live entry instead of walking
    -- (the newest, at len - 1, is live).
    local lo, hi = 2, len - 1
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      local s = at(mid)
      if not s then
        return redis.error_reply(foreign)
      end
      if s <= horizon then
        lo = mid + 1
      else
        hi = mid
      end
    end
    expired = lo
  end
end

local count = len - expired
if count + cost <= limit then
  -- Recorded at t: after it t is the newest recorded time, so every entry
  -- expired at t may go.
  local ttl = t + window - now
  if not read_only then
    if expired == 1 then
      redis.call('LPOP', key)
    elseif expired > 1 then
      redis.call('LTRIM', key, format('%d', expired), '-1')
    end
    local stamp = format('%d', t)
    if cost == 1 then
      redis.call('RPUSH', key, stamp)
    else
      -- Batches keep unpack() within Lua's stack limit for large costs.
      local batch = {}
      for i = 1, math.min(cost, 512) do
        batch[i] = stamp
      end
      local left = cost
      while left > 0 do
        local n = math.min(left, 512)
        redis.call('RPUSH', key, unpack(batch, 1, n))
        left = left - n
      end
    end
    -- With caller time the key outlives its writer's clock on the server's
    -- (the prelude's min_margin).
    redis.call('PEXPIRE', key, format('%d', (argv[4] == '' or argv.server_now) and ttl or ttl + (window > min_margin and window or min_margin)))
  end
  return {1, limit - count - cost, 0, ttl, now}
end

-- Denied: nothing is recorded. The k-th oldest live entry is the one whose
-- expiry frees enough room for `cost`.
local k = count + cost - limit
local kth = at(expired + k - 1)
if not kth then
  return redis.error_reply(foreign)
end
local retry_after = kth + window - now
local reset_after = newest + window - now
-- A denial drops nothing. Only what has expired at the newest recorded time
-- may ever go, and the admission that recorded the newest entry already
-- dropped all of that; what a leading caller sees expired (s <= now - W, as
-- 1,000,000 in issue 12) still counts at newest, where a lagging caller is
-- evaluated.
return {0, math.max(0, limit - count), retry_after, reset_after, now}
