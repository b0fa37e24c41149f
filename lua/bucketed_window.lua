-- slidelimit bucketed window (exact, O(buckets) memory). The contract is docs/protocol.md.
-- It never runs alone: core (core/src/script.rs) prepends lua/prelude.lua and
-- sends the two as one script (`cat lua/prelude.lua lua/bucketed_window.lua`
-- is the exact text). The prelude checks ARGV[1..4] (and whether ARGV[5] is
-- digits) and defines read_only, argv, argc, key, max_number, format, limit,
-- window, cost, now (Redis TIME if not given), digits_checked,
-- argument_error and min_margin.
-- KEYS[1]  one string per tenant, window and bucket count: a 44-byte header
--          of little-endian integers (struct '<I4i8i8i8i8i8'): the tag
--          0x53420000 + N, then T the newest recorded admission (ms), S the
--          permits held, C the count of T's bucket B, F the oldest bucket
--          holding a permit and CF its count; after it a ring of N + 1 slots
--          (i8), bucket b at slot b mod (N + 1), holding the counts of the
--          buckets F + 1 .. B - 1 (B's own count stays in C until a permit
--          falls in a later bucket). A check reads the header alone, unless
--          the oldest held bucket has expired or a denial needs more than it.
-- ARGV     limit, window_ms, cost, now_ms ('' = read Redis TIME), buckets.
-- Reply    {allowed, remaining, retry_after_ms, reset_after_ms, now_ms}.
--
-- With g = window / buckets, a permit recorded at r belongs to bucket
-- b = floor(r / g) and counts until x_b = (b + 1) * g - 1 + window (held as
-- if admitted at its bucket's last millisecond): [r, r + window) is inside
-- [r, x_b), so no rolling window ever holds more than limit.

if argc ~= 5 then
  return redis.error_reply('ERR slidelimit: expected one key and five arguments')
end
-- The most buckets accepted (slidelimit_core::MAX_BUCKETS): the ring of a
-- key holds N + 1 slots of 8 bytes. Checked where core checks buckets: after
-- the prelude's rules on limit and window_ms, before those on cost and
-- now_ms (argument_error).
local max_buckets = 3600
local buckets = argv[5]
-- The prelude's joined match proved it digits, unless that match failed.
if not (digits_checked or string.find(buckets, '^%d+$')) then
  return redis.error_reply('ERR slidelimit invalid_argument buckets: must be a decimal integer (digits only)')
end
buckets = buckets + 0
if buckets < 1 then
  return redis.error_reply('ERR slidelimit invalid_argument buckets: must be at least 1')
elseif buckets > max_buckets then
  return redis.error_reply('ERR slidelimit invalid_argument buckets: exceeds ' .. format('%d', max_buckets)
    .. ', the most a bucketed window accepts')
elseif window % buckets ~= 0 then
  return redis.error_reply('ERR slidelimit invalid_argument buckets: must divide window_ms')
end
if argument_error then
  return argument_error
end
local foreign = 'WRONGTYPE slidelimit: the key holds data slidelimit did not write (a bucketed window header that is not 44 bytes starting with its tag, or counts that do not add up); delete it or use another namespace'

-- No local function on the common path: Redis runs the whole text on every
-- call, and each would be a new closure every time (docs/benchmarks.md).
-- Every number handed to redis.call goes through format('%d', n): Redis 7.0
-- and older format a Lua number argument with '%.17g', about ten times the cost of
-- string.format('%d') (docs/benchmarks.md). For integers 0 <= a < 2^53 and
-- d >= 1, `a % d` and `(a - a % d) / d` are exact in doubles.
local g = window / buckets
local ring = buckets + 1
local tag = 1396834304 + buckets -- 0x53420000 + N
local header = redis.call('GETRANGE', key, '0', '43')

if header == '' then
  -- No admission recorded: an empty key, or one that is not ours.
  if redis.call('EXISTS', key) == 1 then
    return redis.error_reply(foreign)
  end
  local b = (now - now % g) / g
  -- x_b - now, summed so that no intermediate passes 2^53 (exact in doubles).
  local ttl = (b + 1) * g - now + (window - 1)
  if not read_only then
    -- The ring is written whole once, so no later write grows the string.
    -- With caller time the key outlives its writer's clock on the server's
    -- (the prelude's min_margin); so below.
    redis.call('SET', key, struct.pack('<I4i8i8i8i8i8', tag, now, cost, cost, b, cost)
      .. string.rep('\0', 8 * ring), 'PX', format('%d', (argv[4] == '' or argv.server_now) and ttl or ttl + (window > min_margin and window or min_margin)))
  end
  return {1, limit - cost, 0, ttl, now}
end

if #header ~= 44 then
  return redis.error_reply(foreign)
end
local mark, newest, held, current, oldest, oldest_count = struct.unpack('<I4i8i8i8i8i8', header)
local newest_bucket = (newest - newest % g) / g
-- Every value read is one the script could have written.
if not (mark == tag and newest >= 0 and newest <= max_number
    and current >= 1 and held <= max_number and oldest_count >= 1
    and oldest <= newest_bucket and oldest + buckets >= newest_bucket
    and (oldest < newest_bucket and oldest_count + current <= held
      or oldest == newest_bucket and oldest_count == current and held == current)) then
  return redis.error_reply(foreign)
end

-- The time rule (docs/protocol.md, "Time"): evaluated at t = max(now, newest).
local t = now
if newest > t then
  t = newest
end
-- Buckets below first_live have expired at t (x_b <= t).
local first_live = 0
if t + 1 > window then
  first_live = (t + 1 - window - (t + 1 - window) % g) / g
end
local b = (t - t % g) / g
-- Every hint of this check is at most x_b - now (the reset of an admission
-- at t). Above 2^53 it would be no exact double, nor a JavaScript number:
-- only a caller whose clock lags the newest admission by about 2^52 ms, with
-- a window above 2^51 ms (the constant), could be owed one (docs/protocol.md,
-- "Bucketed window", rule 4). (b + 1) * g is at most t + g <= 2^53: exact.
if window > 2251799813685248 and (b + 1) * g - now > 2 * max_number - (window - 1) then
  return redis.error_reply('ERR slidelimit invalid_argument now_ms: lags the newest admission so far that the hints would pass 2^53 ms')
end
local live = held
-- The slots are read only when the oldest held bucket has expired or a
-- denial needs more than it: then `walk` steps from `oldest` to the next
-- bucket, reading slots in chunks of 8, 16, 32, ... (each bucket index is
-- crossed once over the key's life). It returns false where the slots are
-- not what the header says.
local walk, at, count
if newest_bucket < first_live then
  -- Everything has expired.
  live = 0
else
  local expiring = oldest < first_live
  if expiring or held + cost - limit > oldest_count then
    at, count = oldest, oldest_count
    local chunk, slots, slots_first = 8, '', 0
    walk = function()
      at = at + 1
      if at >= newest_bucket then
        count = current
        return at == newest_bucket
      end
      local i = at - slots_first
      if i * 8 >= #slots then
        local last = math.min(at + chunk - 1, newest_bucket - 1)
        local from, to = at % ring, last % ring
        if from <= to then
          slots = redis.call('GETRANGE', key, format('%d', 44 + 8 * from), format('%d', 51 + 8 * to))
        else
          slots = redis.call('GETRANGE', key, format('%d', 44 + 8 * from), format('%d', 43 + 8 * ring))
            .. redis.call('GETRANGE', key, '44', format('%d', 51 + 8 * to))
        end
        if #slots ~= 8 * (last - at + 1) then
          return false
        end
        slots_first, i, chunk = at, 0, chunk * 2
      end
      count = struct.unpack('<i8', slots, 8 * i + 1)
      return count >= 0 and count <= max_number
    end
  end
  if expiring then
    -- Drop the expired buckets from the count, then find the oldest live
    -- one holding a permit (the newest bucket holds at least one).
    while at < first_live do
      live = live - count
      if not walk() then
        return redis.error_reply(foreign)
      end
    end
    while count == 0 do
      if not walk() then
        return redis.error_reply(foreign)
      end
    end
    if live < current then
      return redis.error_reply(foreign)
    end
    oldest, oldest_count = at, count
  end
end

local ttl = (b + 1) * g - now + (window - 1)
if live + cost <= limit then
  if not read_only then
    if live == 0 then
      -- A fresh start: SET replaces the old header and slots.
      redis.call('SET', key, struct.pack('<I4i8i8i8i8i8', tag, t, cost, cost, b, cost)
        .. string.rep('\0', 8 * ring), 'PX', format('%d', (argv[4] == '' or argv.server_now) and ttl or ttl + (window > min_margin and window or min_margin)))
    else
      if b > newest_bucket then
        -- Close the newest bucket into its slot; the slots of the buckets
        -- skipped until b hold zero (before, buckets dropped long ago).
        local closed = struct.pack('<i8', current) .. string.rep('\0', 8 * (b - newest_bucket - 1))
        local from = newest_bucket % ring
        local room = 8 * (ring - from)
        if #closed <= room then
          redis.call('SETRANGE', key, format('%d', 44 + 8 * from), closed)
        else
          redis.call('SETRANGE', key, format('%d', 44 + 8 * from), string.sub(closed, 1, room))
          redis.call('SETRANGE', key, '44', string.sub(closed, room + 1))
        end
        current = cost
      else
        current = current + cost
      end
      if oldest == b then
        oldest_count = current
      end
      redis.call('SETRANGE', key, '0',
        struct.pack('<I4i8i8i8i8i8', tag, t, live + cost, current, oldest, oldest_count))
      -- Within one bucket the key's expiry is one instant, x_b: the
      -- bucket's first admission set it (with one clock, to the millisecond).
      if b > newest_bucket then
        redis.call('PEXPIRE', key, format('%d', (argv[4] == '' or argv.server_now) and ttl or ttl + (window > min_margin and window or min_margin)))
      end
    end
  end
  return {1, limit - live - cost, 0, ttl, now}
end

-- Denied: nothing is recorded, nothing is dropped. The retry waits for the
-- oldest live bucket at which the count from the oldest reaches need.
local need = live + cost - limit
local found = oldest
if oldest_count < need then
  local sum = oldest_count
  while sum < need do
    if not walk() then
      return redis.error_reply(foreign)
    end
    sum = sum + count
  end
  found = at
end
local remaining = limit - live
if remaining < 0 then
  remaining = 0
end
return {0, remaining, (found + 1) * g - now + (window - 1),
  (newest_bucket + 1) * g - now + (window - 1), now}
