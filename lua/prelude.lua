local read_only = false
-- slidelimit prelude: what every script shares. It never runs alone: core
-- (core/src/script.rs) sends this file followed by one algorithm's file as
-- one script text, lua/prelude.lua + lua/sliding_log.lua or lua/prelude.lua +
-- lua/sliding_counter.lua or lua/prelude.lua + lua/bucketed_window.lua,
-- byte for byte (by hand: `cat lua/prelude.lua lua/sliding_log.lua`). For the peek variant core replaces the first line
-- with `local read_only = true`: the script reads the same state and writes
-- nothing. The contract is docs/protocol.md.
-- KEYS[1]  the key (one per tenant, algorithm and window).
-- ARGV     limit, window_ms, cost, now_ms ('' = read Redis TIME); the
--          bucketed window adds a fifth, buckets, which its own file checks
--          along with the exact count of arguments.
-- Reply    {allowed, remaining, retry_after_ms, reset_after_ms, now_ms}.
-- Defines, for the script that follows: read_only, argv, argc, key,
-- max_number, format, limit, window, cost, now (read from TIME when ARGV[4]
-- is empty), digits_checked, argument_error and min_margin.
--
-- No function is defined here for the common path: Redis runs the whole
-- text on every call, and each `local function` makes a new closure every
-- time (docs/benchmarks.md). ARGV is read through a local: a global lookup
-- per use cost more than the rest of the fast path's bytecode.
local argv, argc = ARGV, #ARGV
local key = KEYS[1]
-- 2^52: every product and sum the scripts form stays an exact integer in a double.
local max_number = 4503599627370496

-- Every number handed to redis.call goes through format('%d', n): never
-- tostring, which prints 1e+14, which PEXPIRE, RPUSH and HINCRBY would store
-- wrongly or reject.
local format = string.format

-- Core's rules (docs/protocol.md, "Policy and call validation"), in core's
-- order. Fast path: one pattern match over every argument joined by spaces
-- (a fifth, the bucketed window's buckets, included: a 4-argument call joins
-- a '0' in its place), then `+ 0` (one conversion; tonumber makes two) and a
-- few comparisons. When these fail, the checks that name the field run. A
-- script may have its own bound on limit (the log does) or its own fifth
-- argument (the bucketed window), checked after the rules on limit and
-- window_ms and before those on cost and now_ms: so the prelude returns at
-- once for the earlier rules and leaves the error of a later one in
-- argument_error. Every script returns argument_error when it is set (after
-- its own checks), before it touches its key. digits_checked tells the
-- bucketed window that its fifth argument is digits already.
local limit, window, cost, now, argument_error
local digits_checked = #KEYS == 1 and (argc == 4 or argc == 5)
    and string.find(argv[1] .. ' ' .. argv[2] .. ' ' .. argv[3] .. ' ' .. argv[4] .. ' ' .. (argv[5] or '0'),
      '^%d+ %d+ %d+ %d* %d+$') ~= nil
if digits_checked then
  limit, window, cost = argv[1] + 0, argv[2] + 0, argv[3] + 0
  if argv[4] ~= '' then
    now = argv[4] + 0
  end
end
if not (digits_checked and limit >= 1 and window >= 1 and limit * window <= max_number
    and cost >= 1 and cost <= limit and (now == nil or now <= max_number)) then
  if #KEYS ~= 1 or argc < 4 or argc > 5 then
    return redis.error_reply('ERR slidelimit: expected one key and four arguments (five for the bucketed window)')
  end
  local function invalid_argument(field, problem)
    return redis.error_reply('ERR slidelimit invalid_argument ' .. field .. ': ' .. problem)
  end
  local names = {'limit', 'window_ms', 'cost'}
  for i = 1, 3 do
    if not string.find(argv[i], '^%d+$') then
      return invalid_argument(names[i], 'must be a decimal integer (digits only)')
    end
  end
  if not string.find(argv[4], '^%d*$') then
    return invalid_argument('now_ms', 'must be empty or a decimal integer (digits only)')
  end
  limit, window, cost = argv[1] + 0, argv[2] + 0, argv[3] + 0
  if argv[4] ~= '' then
    now = argv[4] + 0
  end
  if limit < 1 then
    return invalid_argument('limit', 'must be at least 1')
  elseif window < 1 then
    return invalid_argument('window_ms', 'must be at least 1')
  elseif limit * window > max_number then
    return invalid_argument('limit', 'limit * window_ms exceeds 2^52; lower the limit or the window')
  elseif cost < 1 then
    argument_error = invalid_argument('cost', 'must be at least 1')
  elseif cost > limit then
    argument_error = invalid_argument('cost', 'exceeds the limit; such a request could never pass')
  elseif now and now > max_number then
    argument_error = invalid_argument('now_ms', 'must be at most 2^52')
  end
  -- Else only a fifth argument failed the joined match: the bucketed
  -- window's file names it (the others refuse five arguments).
end

-- The server's clock when the caller gave none. Read here, before a
-- script's own bound on limit: a log call over its cap with now_ms empty
-- (a call core never builds) reads TIME and is then refused.
if not (now or argument_error) then
  -- Redis 6 needs effects replication before TIME may precede a write; 7 has it always.
  if redis.replicate_commands then
    redis.replicate_commands()
  end
  local t = redis.call('TIME')
  -- Arithmetic converts each field once (tonumber would convert twice).
  now = t[1] * 1000 + math.floor(t[2] / 1000)
end

-- With caller time a key outlives its writer's clock on the server's: every
-- TTL a script sets gets max(window, this) more (docs/protocol.md, "Key expiry
-- and caller clocks"). Added where a key is written, so a denial pays nothing.
local min_margin = 60000
