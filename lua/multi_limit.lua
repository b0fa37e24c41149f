-- slidelimit multi-limit policy: up to 8 limits of one tenant checked in one
-- call, recorded in all of them or in none. The contract is docs/protocol.md
-- ("Several limits"). It never runs alone: core (core/src/script.rs) sends
-- the mode line, then each algorithm's script (lua/prelude.lua without its
-- first line, then lua/<algorithm>.lua) wrapped as a local function of
-- (KEYS, ARGV, read_only) named after the algorithm, then this file: the
-- algorithms exist once, in their own files.
-- KEYS     one key per limit, in the policy's order (one hash tag: one slot).
-- ARGV     cost, now_ms ('' = read Redis TIME), then per limit: algorithm
--          (sliding_log, sliding_counter or bucketed_window), limit,
--          window_ms, buckets ('' unless bucketed_window).
-- Reply    {allowed, remaining, retry_after_ms, reset_after_ms, now_ms,
--          denied_by}: allowed iff every limit allows the cost; remaining
--          the smallest, reset_after the largest; a denial's retry the
--          largest among the limits that deny (exact: nothing is recorded,
--          so no count grows meanwhile) and denied_by the 1-based position
--          of the limit that gave it (the first of equals), 0 when allowed.

-- The most limits a policy holds (slidelimit_core::MAX_LIMITS).
local max_limits = 8
local checks = {
  sliding_log = sliding_log,
  sliding_counter = sliding_counter,
  bucketed_window = bucketed_window,
}
local n = #KEYS
if n < 1 or n > max_limits or #ARGV ~= 2 + 4 * n then
  return redis.error_reply('ERR slidelimit: expected 1 to 8 keys and 2 + 4 per key arguments')
end
local function invalid_argument(field, problem)
  return redis.error_reply('ERR slidelimit invalid_argument ' .. field .. ': ' .. problem)
end
local cost, now = ARGV[1], ARGV[2]
if not string.find(cost, '^%d+$') then
  return invalid_argument('cost', 'must be a decimal integer (digits only)')
end
if not string.find(now, '^%d*$') then
  return invalid_argument('now_ms', 'must be empty or a decimal integer (digits only)')
end
local seen = {}
for i = 1, n do
  -- Two limits on one key would count twice in it.
  if seen[KEYS[i]] then
    return redis.error_reply('ERR slidelimit: two limits name one key')
  end
  seen[KEYS[i]] = true
  local algorithm = ARGV[4 * i - 1]
  if not checks[algorithm] then
    return invalid_argument('algorithm', 'must be sliding_log, sliding_counter or bucketed_window')
  end
  if algorithm ~= 'bucketed_window' and ARGV[4 * i + 2] ~= '' then
    return invalid_argument('buckets', 'only the bucketed_window algorithm has buckets')
  end
end
-- One clock for every limit: the server's, read once. Each limit's script
-- then sees a caller time; server_now tells it the time is the server's, so
-- its key gets no caller-clock margin (docs/protocol.md, "Key expiry and
-- caller clocks").
local server_now = now == ''
if server_now then
  if redis.replicate_commands then
    redis.replicate_commands()
  end
  local t = redis.call('TIME')
  now = string.format('%d', t[1] * 1000 + math.floor(t[2] / 1000))
end

-- A key of the wrong type or with foreign data is named with its limit's
-- position, key and algorithm ('WRONGTYPE slidelimit limits[0] key K
-- (sliding_log): ...', 0-based like core's field names): without it the
-- caller could only guess which key to delete. Any other error is raised
-- again as it would have been uncaught (level 0: no position added).
local function run(i, writing)
  local algorithm = ARGV[4 * i - 1]
  local args = {ARGV[4 * i], ARGV[4 * i + 1], cost, now, server_now = server_now}
  if algorithm == 'bucketed_window' then
    args[5] = ARGV[4 * i + 2]
  end
  local ok, r = pcall(checks[algorithm], {KEYS[i]}, args, not writing)
  -- The common path: a reply, or an error reply other than the foreign-data one.
  local text = r
  if ok then
    text = r.err
    if not text then
      return r
    end
  elseif type(r) == 'table' then
    text = r.err
  end
  if type(text) == 'string' and string.find(text, 'WRONGTYPE', 1, true) then
    return redis.error_reply(string.format('WRONGTYPE slidelimit limits[%d] key %s (%s): %s',
      i - 1, KEYS[i], algorithm, text))
  end
  if not ok then
    -- Redis 7's pcall hands a failed command's error back as its text
    -- ('READONLY You can't write ...'): raised as a table again, it keeps its
    -- code (a string would become 'ERR READONLY ...'). Redis 6 raises strings
    -- only, and a Lua error is a string that starts with its position.
    if redis.REDIS_VERSION_NUM and type(r) == 'string' and string.find(r, '^%u+ ') then
      error({err = r}, 0)
    end
    error(r, 0)
  end
  return r
end

-- First every limit reads and decides, writing nothing; then, only if all
-- allow and this is an acquire, each records (deciding again, on the same
-- state, the same way).
local allowed, remaining, retry, reset, at, denied_by = 1, nil, 0, 0, 0, 0
for i = 1, n do
  local r = run(i, false)
  if r.err then
    return r
  end
  if r[1] == 0 then
    allowed = 0
    if r[3] > retry then
      retry, denied_by = r[3], i
    end
  end
  if remaining == nil or r[2] < remaining then
    remaining = r[2]
  end
  if r[4] > reset then
    reset = r[4]
  end
  at = r[5]
end
if allowed == 1 and not read_only then
  for i = 1, n do
    local r = run(i, true)
    if r.err then
      return r
    end
  end
end
return {allowed, remaining, retry, reset, at, denied_by}
