local read_only = false
-- slidelimit sliding window counter (approximate, O(1) memory). The contract is docs/protocol.md.
-- KEYS[1]  one hash per tenant and window; field = window start (ms), value = permits admitted in it.
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
  -- never tostring: it prints 1e+14, which HINCRBY and PEXPIRE would reject
  return string.format('%d', n)
end

-- floor(n / d) for integers 0 <= n, 0 < d below 2^53: fmod is exact, `/` may round up.
local function floor_div(n, d)
  return (n - math.fmod(n, d)) / d
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

local cur_start = now - math.fmod(now, window)
local e = now - cur_start
local cur_field = int(cur_start)
local counts = redis.call('HMGET', key, cur_field, int(cur_start - window))
local a = tonumber(counts[1]) or 0
local b = tonumber(counts[2]) or 0

-- a*W + b*(W - e) + cost*W <= limit*W, arranged so no term exceeds limit*W <= 2^52.
local room = limit - a - cost
local allowed = room >= 0 and b * (window - e) <= room * window

local a_after = a
if allowed then
  a_after = a + cost
  if not read_only then
    redis.call('HINCRBY', key, cur_field, ARGV[3])
    if a == 0 then
      -- First permit of this window. Fields older than the previous window
      -- never count again: drop them. Nothing in the key counts past
      -- cur_start + 2W, so one PEXPIRE per window keeps it exactly as long
      -- as needed; later permits of the window need no call.
      local fields = redis.call('HKEYS', key)
      for _, field in ipairs(fields) do
        if tonumber(field) < cur_start - window then
          redis.call('HDEL', key, field)
        end
      end
      redis.call('PEXPIRE', key, int(2 * window))
    end
  end
end

local headroom = (limit - a_after) * window - b * (window - e)
local remaining = 0
if headroom > 0 then
  remaining = floor_div(headroom, window)
end

local reset_after = 0
if a_after > 0 then
  reset_after = 2 * window - e
elseif b > 0 then
  reset_after = window - e
end

if allowed then
  return {1, remaining, 0, reset_after, now}
end

-- Denied: the earliest instant an acquire of `cost` passes, assuming no other traffic.
local retry_after = nil
if a + cost <= limit and b > 0 then
  local x = window - floor_div((limit - cost - a) * window, b)
  if x < window then
    retry_after = math.max(x, e) - e
  end
end
if not retry_after then
  local x_next = 0
  if a > 0 then
    x_next = math.max(0, window - floor_div((limit - cost) * window, a))
  end
  retry_after = (window - e) + x_next
end
return {0, remaining, retry_after, reset_after, now}
