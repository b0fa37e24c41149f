-- slidelimit sliding window counter (approximate, O(1) memory). The contract is docs/protocol.md.
-- It never runs alone: core (core/src/script.rs) prepends lua/prelude.lua and
-- sends the two as one script (`cat lua/prelude.lua lua/sliding_counter.lua`
-- is the exact text). The prelude checks ARGV and defines read_only, argv,
-- argc, key, max_number, format, limit, window, cost, now (Redis TIME if not
-- given), argument_error and min_margin.
-- KEYS[1]  one hash per tenant and window; field = window start (ms), value = permits admitted in it.
-- ARGV     limit, window_ms, cost, now_ms ('' = read Redis TIME).
-- Reply    {allowed, remaining, retry_after_ms, reset_after_ms, now_ms}.

if argc ~= 4 then
  return redis.error_reply('ERR slidelimit: expected one key and four arguments')
end
-- No bound on limit beyond the prelude's: the counter's work and memory do not grow with it.
if argument_error then
  return argument_error
end
-- A key holding what this script never writes is an error before any write.
-- (One literal: Lua does not fold `..` of constants, it would concatenate on every call.)
local foreign = 'WRONGTYPE slidelimit: the key holds data slidelimit did not write (a hash field that is not a window start or a count that is not an integer); delete it or use another namespace'

-- floor(n / d) for integers 0 <= n, 0 < d below 2^53: fmod is exact, `/` may round up.
local function floor_div(n, d)
  return (n - math.fmod(n, d)) / d
end

local cur_start = now - math.fmod(now, window)
local e = now - cur_start
local cur_field = format('%d', cur_start)
local counts = redis.call('HMGET', key, cur_field, format('%d', cur_start - window))
-- Counts are integers as HINCRBY writes them (the script writes nothing
-- else); checked before any write. Digits without a leading zero: Lua
-- would read '1.0', '01', '1e0' or '0x1' as a count that HINCRBY then
-- refuses, after a policy of several limits has written its other keys.
local a, b = 0, 0
local current, previous = counts[1], counts[2]
if current then
  if not (string.find(current, '^[1-9]%d*$') or current == '0') then
    return redis.error_reply(foreign)
  end
  a = current + 0
end
if previous then
  if not (string.find(previous, '^[1-9]%d*$') or previous == '0') then
    return redis.error_reply(foreign)
  end
  b = previous + 0
end
if a > max_number or b > max_number then
  return redis.error_reply(foreign)
end

-- a*W + b*(W - e) + cost*W <= limit*W, arranged so no term exceeds limit*W <= 2^52.
local room = limit - a - cost
local allowed = room >= 0 and b * (window - e) <= room * window

local a_after = a
if allowed then
  a_after = a + cost
  -- Formatted, not ARGV[3] as given: a cost such as '01' passes the checks
  -- above, but HINCRBY would reject it.
  local incr = '1'
  if cost ~= 1 then
    incr = format('%d', cost)
  end
  if a == 0 then
    -- First permit of this window. Fields older than the previous window
    -- never count again: drop them. Nothing in the key counts past
    -- cur_start + 2W, so one PEXPIRE per window keeps it exactly as long
    -- as needed; later permits of the window need no call. The fields are
    -- read (and checked to be window starts) before anything is written;
    -- peek reads them too, so it fails where acquire would.
    local fields = redis.call('HKEYS', key)
    for _, field in ipairs(fields) do
      if not string.find(field, '^%d+$') then
        return redis.error_reply(foreign)
      end
    end
    if not read_only then
      redis.call('HINCRBY', key, cur_field, incr)
      for _, field in ipairs(fields) do
        if tonumber(field) < cur_start - window then
          redis.call('HDEL', key, field)
        end
      end
      -- With caller time the key outlives its writer's clock on the server's
      -- (the prelude's min_margin).
      local ttl = 2 * window
      redis.call('PEXPIRE', key, format('%d', (argv[4] == '' or argv.server_now) and ttl or ttl + (window > min_margin and window or min_margin)))
    end
  elseif not read_only then
    redis.call('HINCRBY', key, cur_field, incr)
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
