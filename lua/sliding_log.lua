local read_only = false
-- slidelimit sliding log (exact). The contract is docs/protocol.md.
-- KEYS[1]  the log: a list of admitted permit timestamps (ms), oldest first.
-- ARGV     limit, window_ms, cost, now_ms ('' = read Redis TIME).
-- Reply    {allowed, remaining, retry_after_ms, reset_after_ms, now_ms}.
-- core replaces the first line with `local read_only = true` for the peek
-- variant, which reads the same state and writes nothing.
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
if not (limit and window and cost) then
  return redis.error_reply('ERR slidelimit: limit, window_ms and cost must be integers')
end

local function int(n)
  -- never tostring: it prints 1e+14, which PEXPIRE and RPUSH would store or reject
  return string.format('%d', n)
end

local now = tonumber(ARGV[4])
if ARGV[4] == '' then
  -- Redis 6 needs effects replication before TIME may precede a write; 7 has it always.
  if redis.replicate_commands then
    redis.replicate_commands()
  end
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
elseif not now then
  return redis.error_reply('ERR slidelimit: now_ms must be an integer or empty')
end

-- An entry at s counts for now in [s, s + W): entries <= horizon are expired.
local horizon = now - window
-- The two oldest entries arrive in one call: in steady state at most one of
-- them has expired. (Every redis.call and every string-to-number conversion
-- costs here, so the script makes as few as it can; see docs/benchmarks.md.)
local head = redis.call('LRANGE', key, '0', '1')
for i = 1, #head do
  head[i] = tonumber(head[i])
end
local len = #head
if len == 2 then
  len = redis.call('LLEN', key)
end
local function at(i) -- 0-based index into the list as it is now
  if i < #head then
    return head[i + 1]
  end
  return tonumber(redis.call('LINDEX', key, int(i)))
end

local expired = 0
while expired < #head and head[expired + 1] <= horizon do
  expired = expired + 1
end
if expired == 2 and len > 2 then
  -- A long idle gap: binary-search the first live entry instead of walking.
  local lo, hi = 2, len
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if at(mid) <= horizon then
      lo = mid + 1
    else
      hi = mid
    end
  end
  expired = lo
end

local function drop_expired()
  if expired == 1 then
    redis.call('LPOP', key)
  elseif expired > 1 then
    redis.call('LTRIM', key, int(expired), '-1')
  end
end

local count = len - expired
local newest = nil
if count > 0 then
  if len <= #head then
    newest = head[len]
  else
    newest = tonumber(redis.call('LINDEX', key, '-1'))
  end
end

if count + cost <= limit then
  -- Never place an entry before one already recorded (caller clocks may disagree).
  local r = now
  if newest and newest > r then
    r = newest
  end
  local ttl = r + window - now
  if not read_only then
    drop_expired()
    local stamp = int(r)
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
    redis.call('PEXPIRE', key, int(ttl))
  end
  return {1, limit - count - cost, 0, ttl, now}
end

-- Denied: nothing is recorded. The k-th oldest live entry is the one whose
-- expiry frees enough room for `cost`.
local k = count + cost - limit
local retry_after = at(expired + k - 1) + window - now
local reset_after = newest + window - now
if not read_only then
  drop_expired()
end
return {0, math.max(0, limit - count), retry_after, reset_after, now}
