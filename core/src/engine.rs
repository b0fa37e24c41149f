//! An in-memory engine with the scripts' exact semantics and integer
//! arithmetic: the embedded default (one process, no Redis) and the test
//! oracle for Redis.
//!
//! It runs the same [`ScriptCall`] a binding sends to Redis, so a call built by
//! core is interpreted exactly once, the same way, in both places. The caller
//! supplies the clock; the engine never reads one.
//!
//! Two times meet in every call, as in Redis. The call's `now_ms` (the
//! caller's, or the clock when the call carries none) is the script's notion
//! of time: it decides which permits still count. The engine's clock
//! (`clock_ms`, the stand-in for the Redis server's clock) alone drives key
//! expiry: where a script sets a TTL (`PEXPIRE ttl`, relative to the call's
//! `now_ms`), the engine sets `expires_at = clock_ms + ttl`, and a key is gone
//! once `clock_ms > expires_at`, exactly when Redis would drop it. Caller time
//! never expires a key, so a peek or another tenant's call at a far-off
//! caller time cannot make the engine forget state Redis still holds.

use crate::decision::{Decision, MAX_LIMITS};
use crate::error::{Error, ErrorCode, Result};
use crate::number::MAX_EXACT;
use crate::policy::{Algorithm, Policy, MAX_NOW_MS};
use crate::script::{Mode, Script, ScriptCall, ScriptKind};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;

/// The least a caller-time write adds to its key's TTL: a minute, the
/// scripts' `min_margin` (lua/prelude.lua).
const CALLER_TIME_EXPIRY_MARGIN_MS: u64 = 60_000;

/// Sweep expired keys once per this many calls, so idle tenants do not pile up.
const SWEEP_EVERY: u64 = 4096;

/// Whether a key that expires at `expires_at` is gone at `clock_ms`. Redis
/// keeps a key through the very millisecond of its expiry (`now > when`).
fn expired(expires_at: u64, clock_ms: u64) -> bool {
    clock_ms > expires_at
}

#[derive(Debug)]
enum Value {
    /// Runs of (timestamp, permits), oldest first, timestamps non-decreasing:
    /// the list in Redis with equal neighbours merged.
    Log(VecDeque<(u64, u64)>),
    /// Window start -> permits admitted in that window.
    Counter(BTreeMap<u64, u64>),
    /// The bucketed window: the newest recorded admission and bucket index ->
    /// permits admitted in that bucket.
    Buckets {
        newest: u64,
        counts: BTreeMap<u64, u64>,
    },
}

#[derive(Debug)]
struct Entry {
    value: Value,
    /// On the engine's clock (never the caller's): the key is gone once the
    /// clock passes this time, as Redis expires it after `PEXPIRE`.
    expires_at: u64,
}

#[derive(Debug, Default)]
struct State {
    keys: HashMap<String, Entry>,
    calls: u64,
}

/// A thread-safe in-memory store of sliding logs and counters.
#[derive(Debug, Default)]
pub struct MemoryEngine {
    state: Mutex<State>,
}

struct Args {
    limit: u64,
    window: u64,
    /// The bucketed window's bucket count (1 for the other algorithms).
    buckets: u64,
    cost: u64,
    /// The script's time: the call's `now_ms`, or the clock when it has none.
    now: u64,
    /// The engine's clock, for key expiry only.
    clock: u64,
    /// Whether `now` is the caller's: then every key a write sets lingers
    /// (docs/protocol.md, "Key expiry and caller clocks").
    caller_time: bool,
}

impl Args {
    /// Where a key expires after a write whose time-to-nothing-counts is
    /// `ttl` (relative to `now`), on the engine's clock, as the scripts set
    /// it: `ttl` plus, with caller time, the window, at least a minute.
    fn expires_at(&self, ttl: u64) -> u64 {
        self.clock
            .saturating_add(ttl.saturating_add(self.expiry_margin()))
    }

    /// With caller time, one window and at least a minute (docs/protocol.md,
    /// "Key expiry and caller clocks"); with the clock's time, nothing.
    fn expiry_margin(&self) -> u64 {
        if self.caller_time {
            self.window.max(CALLER_TIME_EXPIRY_MARGIN_MS)
        } else {
            0
        }
    }
}

/// The clock as the script's time, for a call without a caller time: as
/// Redis TIME is, the script's time, and a decision's times stop at 2^52 ms;
/// past that (a clock in nanoseconds) they would overflow or could not be
/// read back.
fn script_time(clock_ms: u64) -> Result<u64> {
    if clock_ms > MAX_NOW_MS {
        return Err(Error::invalid(
            "clock",
            format!(
                "read {clock_ms}, past 2^52 ms; the engine's clock must return Unix milliseconds"
            ),
        ));
    }
    Ok(clock_ms)
}

/// The scripts' argument checks, in the scripts' order, with the same codes
/// and fields: decimal digits only (no sign, no spaces, no exponent), then
/// the policy's rules (the log's cap included), the cost, the time.
fn parse_args(call: &ScriptCall, clock_ms: u64) -> Result<Args> {
    if call.keys.len() != 1 || !(4..=5).contains(&call.args.len()) {
        return Err(Error::new(
            ErrorCode::ScriptError,
            "slidelimit: expected one key and four arguments (five for the bucketed window)",
        ));
    }
    let digits = |field: &'static str, s: &str| {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Error::invalid(
                field,
                "must be a decimal integer (digits only)",
            ));
        }
        // Past u64 is past every bound below, as the script's double is.
        Ok(s.parse::<u64>().unwrap_or(u64::MAX))
    };
    let limit = digits("limit", &call.args[0])?;
    let window = digits("window_ms", &call.args[1])?;
    let cost = digits("cost", &call.args[2])?;
    let now = match call.args[3].as_str() {
        "" => None,
        s => Some(digits("now_ms", s).map_err(|_| {
            Error::invalid("now_ms", "must be empty or a decimal integer (digits only)")
        })?),
    };
    // The prelude's rules on limit and window_ms answer first (the counter
    // has no bound of its own, so its rules are exactly the prelude's).
    let Some(algorithm) = call.script.algorithm() else {
        return Err(Error::new(
            ErrorCode::Internal,
            "parse_args is for one-limit scripts",
        ));
    };
    crate::policy::check_limit_and_window(Algorithm::SlidingCounter, limit, window)?;
    // Then the algorithm's file: its count of arguments, its own bound.
    let (argc, argc_words) = match algorithm {
        Algorithm::BucketedWindow => (5, "five"),
        _ => (4, "four"),
    };
    if call.args.len() != argc {
        return Err(Error::new(
            ErrorCode::ScriptError,
            format!("slidelimit: expected one key and {argc_words} arguments"),
        ));
    }
    crate::policy::check_limit_and_window(algorithm, limit, window)?;
    let buckets = if algorithm == Algorithm::BucketedWindow {
        let n = digits("buckets", &call.args[4])?;
        crate::policy::check_buckets(window, n, false)?;
        n
    } else {
        1
    };
    crate::policy::check_cost(limit, cost)?;
    if let Some(now) = now {
        crate::policy::check_now_ms(now)?;
    }
    Ok(Args {
        limit,
        window,
        buckets,
        cost,
        now: match now {
            Some(now) => now,
            None => script_time(clock_ms)?,
        },
        clock: clock_ms,
        caller_time: now.is_some(),
    })
}

fn wrong_type() -> Error {
    Error::new(
        ErrorCode::WrongType,
        "WRONGTYPE Operation against a key holding the wrong kind of value",
    )
}

impl MemoryEngine {
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs one call as Redis would run its script. `clock_ms` is the server
    /// clock: the script's time when the call carries no `now_ms`, and in
    /// every call the only time that expires keys (a key written with
    /// `PEXPIRE ttl` is gone once `clock_ms` passes the write's clock + ttl),
    /// whatever `now_ms` the caller passed.
    pub fn eval(&self, call: &ScriptCall, clock_ms: u64) -> Result<Vec<i64>> {
        let write = call.script.mode == Mode::Acquire;
        let single = match call.script.kind {
            ScriptKind::Single(algorithm) => Some((algorithm, parse_args(call, clock_ms)?)),
            ScriptKind::MultiLimit => {
                check_multi_args(call)?;
                None
            }
        };
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.calls += 1;
        if state.calls.is_multiple_of(SWEEP_EVERY) {
            // Only keys Redis would have expired by now: unobservable, like
            // Redis's own active expiry, and it keeps memory bounded.
            state.keys.retain(|_, e| !expired(e.expires_at, clock_ms));
        }
        match single {
            Some((algorithm, args)) => {
                let decision = run_one(&mut state, algorithm, &call.keys[0], &args, write)?;
                Ok(decision.to_reply(1))
            }
            None => Ok(run_multi(&mut state, call, clock_ms, write)?.to_reply(call.keys.len())),
        }
    }

    /// One acquire or peek, as a binding runs it: `now_ms` is the caller's
    /// time (`None`: the clock's, as the script reads Redis `TIME`), and
    /// `clock_ms` is the engine's real clock, the stand-in for the Redis
    /// server's clock, which alone expires keys. Bindings pass their real
    /// clock here even when the caller supplies `now_ms`.
    pub fn check(
        &self,
        policy: &Policy,
        tenant: &str,
        cost: u64,
        now_ms: Option<u64>,
        clock_ms: u64,
        mode: Mode,
    ) -> Result<Decision> {
        let call = policy.build_call(tenant, cost, now_ms, mode)?;
        Decision::from_reply(&self.eval(&call, clock_ms)?, policy.limits().len())
    }

    /// Acquire `cost` permits for `tenant` at `now_ms`, with `now_ms` as the
    /// clock too: for a simulation whose only time is `now_ms`. A caller
    /// time next to a real clock goes through [`MemoryEngine::check`].
    pub fn acquire(
        &self,
        policy: &Policy,
        tenant: &str,
        cost: u64,
        now_ms: u64,
    ) -> Result<Decision> {
        self.check(policy, tenant, cost, Some(now_ms), now_ms, Mode::Acquire)
    }

    /// What `acquire` would answer at `now_ms`, recording nothing (the clock
    /// is `now_ms` too, as in `acquire`).
    pub fn peek(&self, policy: &Policy, tenant: &str, cost: u64, now_ms: u64) -> Result<Decision> {
        self.check(policy, tenant, cost, Some(now_ms), now_ms, Mode::Peek)
    }

    /// Forgets everything recorded for `tenant` under `policy` (every limit's
    /// key). True if anything was.
    pub fn reset(&self, policy: &Policy, tenant: &str) -> Result<bool> {
        let keys = policy.keys(tenant)?;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut removed = false;
        for key in keys {
            removed |= state.keys.remove(&key).is_some();
        }
        Ok(removed)
    }

    /// Keys currently held. A key whose TTL has passed on the engine's clock
    /// counts until its next access or the next sweep (one every 4,096
    /// calls), so at most 4,096 keys more than those still live on the clock
    /// at the last sweep.
    pub fn key_count(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys
            .len()
    }

    /// What `key` holds now, in the units its Redis twin stores: list
    /// entries for a log, window counts for a counter, bucket counts for a
    /// bucketed window (0 when absent). Memory per tenant, for reports.
    pub fn held(&self, key: &str) -> u64 {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match state.keys.get(key).map(|e| &e.value) {
            None => 0,
            Some(Value::Log(runs)) => runs.iter().map(|&(_, n)| n).sum(),
            Some(Value::Counter(fields)) => fields.len() as u64,
            Some(Value::Buckets { counts, .. }) => counts.len() as u64,
        }
    }
}

/// One limit's check on its key, as its script runs it.
fn run_one(
    state: &mut State,
    algorithm: Algorithm,
    key: &str,
    args: &Args,
    write: bool,
) -> Result<Decision> {
    if state
        .keys
        .get(key)
        .is_some_and(|e| expired(e.expires_at, args.clock))
    {
        state.keys.remove(key);
    }
    match algorithm {
        Algorithm::SlidingLog => sliding_log(&mut state.keys, key, args, write),
        Algorithm::SlidingCounter => sliding_counter(&mut state.keys, key, args, write),
        Algorithm::BucketedWindow => bucketed_window(&mut state.keys, key, args, write),
    }
}

/// `lua/multi_limit.lua`'s own checks, in its order: the counts of keys and
/// arguments, cost and now_ms as digits, no key twice, each algorithm's
/// name, buckets only for the bucketed window.
fn check_multi_args(call: &ScriptCall) -> Result<()> {
    let n = call.keys.len();
    if !(1..=MAX_LIMITS).contains(&n) || call.args.len() != 2 + 4 * n {
        return Err(Error::new(
            ErrorCode::ScriptError,
            "slidelimit: expected 1 to 8 keys and 2 + 4 per key arguments",
        ));
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(&call.args[0]) {
        return Err(Error::invalid(
            "cost",
            "must be a decimal integer (digits only)",
        ));
    }
    if !(call.args[1].is_empty() || digits(&call.args[1])) {
        return Err(Error::invalid(
            "now_ms",
            "must be empty or a decimal integer (digits only)",
        ));
    }
    for (i, key) in call.keys.iter().enumerate() {
        if call.keys[..i].contains(key) {
            return Err(Error::new(
                ErrorCode::ScriptError,
                "slidelimit: two limits name one key",
            ));
        }
        let algorithm = Algorithm::parse(&call.args[2 + 4 * i]).map_err(|_| {
            Error::invalid(
                "algorithm",
                "must be sliding_log, sliding_counter or bucketed_window",
            )
        })?;
        if algorithm != Algorithm::BucketedWindow && !call.args[5 + 4 * i].is_empty() {
            return Err(Error::invalid(
                "buckets",
                "only the bucketed_window algorithm has buckets",
            ));
        }
    }
    Ok(())
}

/// The multi-limit script: every limit decides at one time without
/// writing; only if all allow (and this is an acquire) does each record.
fn run_multi(state: &mut State, call: &ScriptCall, clock_ms: u64, write: bool) -> Result<Decision> {
    let now = match call.args[1].as_str() {
        "" => script_time(clock_ms)?.to_string(),
        given => given.to_owned(),
    };
    // Each limit's arguments, read once by its script's own checks (the
    // mode of the call only decides whether the second pass writes).
    let limit_call = |i: usize| -> Result<(Algorithm, ScriptCall)> {
        let a = &call.args[2 + 4 * i..6 + 4 * i];
        let algorithm = Algorithm::parse(&a[0])?;
        let mut args = vec![
            a[1].clone(),
            a[2].clone(),
            call.args[0].clone(),
            now.clone(),
        ];
        if algorithm == Algorithm::BucketedWindow {
            args.push(a[3].clone());
        }
        let single = ScriptCall {
            script: Script::new(algorithm, Mode::Peek),
            keys: vec![call.keys[i].clone()],
            args,
        };
        Ok((algorithm, single))
    };
    let mut decision = Decision {
        allowed: true,
        remaining: u64::MAX,
        retry_after_ms: 0,
        reset_after_ms: 0,
        now_ms: 0,
        denied_by: None,
    };
    let mut checked = Vec::with_capacity(call.keys.len());
    for i in 0..call.keys.len() {
        let (algorithm, single) = limit_call(i)?;
        let mut args = parse_args(&single, clock_ms)?;
        // The script reads the server's clock once and tells each limit.
        args.caller_time = !call.args[1].is_empty();
        let d = run_one(state, algorithm, &single.keys[0], &args, false)?;
        if !d.allowed {
            decision.allowed = false;
            if d.retry_after_ms > decision.retry_after_ms {
                decision.retry_after_ms = d.retry_after_ms;
                decision.denied_by = Some(i as u32);
            }
        }
        decision.remaining = decision.remaining.min(d.remaining);
        decision.reset_after_ms = decision.reset_after_ms.max(d.reset_after_ms);
        decision.now_ms = d.now_ms;
        checked.push((algorithm, single.keys, args));
    }
    if decision.allowed && write {
        for (algorithm, keys, args) in &checked {
            run_one(state, *algorithm, &keys[0], args, true)?;
        }
    }
    Ok(decision)
}

fn sliding_log(
    keys: &mut HashMap<String, Entry>,
    key: &str,
    a: &Args,
    write: bool,
) -> Result<Decision> {
    let empty = VecDeque::new();
    let runs = match keys.get(key).map(|e| &e.value) {
        None => &empty,
        Some(Value::Log(runs)) => runs,
        Some(_) => return Err(wrong_type()),
    };
    // The time rule (docs/protocol.md, "Time"): evaluated at
    // t = max(now, newest recorded entry), recorded at t, and nothing dropped
    // unless it has expired at the newest recorded time. An entry at s counts
    // at t iff t < s + W.
    let newest = runs.back().map(|&(ts, _)| ts);
    let t = newest.map_or(a.now, |n| n.max(a.now));
    let expired_runs = runs
        .iter()
        .take_while(|&&(ts, _)| ts + a.window <= t)
        .count();
    let count: u64 = runs.iter().skip(expired_runs).map(|&(_, n)| n).sum();

    if count + a.cost <= a.limit {
        // Recorded at t, which becomes the newest recorded time.
        let r = t;
        let ttl = r + a.window - a.now;
        if write {
            let entry = keys.entry(key.to_owned()).or_insert(Entry {
                value: Value::Log(VecDeque::new()),
                expires_at: 0,
            });
            let Value::Log(runs) = &mut entry.value else {
                unreachable!("type checked above")
            };
            runs.drain(..expired_runs);
            match runs.back_mut() {
                Some((ts, n)) if *ts == r => *n += a.cost,
                _ => runs.push_back((r, a.cost)),
            }
            entry.expires_at = a.expires_at(ttl);
        }
        return Ok(Decision {
            allowed: true,
            remaining: a.limit - count - a.cost,
            retry_after_ms: 0,
            reset_after_ms: ttl,
            now_ms: a.now,
            denied_by: None,
        });
    }

    // Denied: the k-th oldest live entry frees enough room once it expires.
    let k = count + a.cost - a.limit;
    let mut seen = 0;
    let mut kth = 0;
    for &(ts, n) in runs.iter().skip(expired_runs) {
        seen += n;
        if seen >= k {
            kth = ts;
            break;
        }
    }
    let newest = newest.expect("denied implies a live entry, since cost <= limit");
    // A denial drops nothing: only what has expired at the newest recorded
    // time may go, and the admission that recorded it already dropped that.
    // What a leading caller sees expired still counts at newest, where a
    // lagging caller is evaluated.
    Ok(Decision {
        allowed: false,
        remaining: a.limit.saturating_sub(count),
        retry_after_ms: kth + a.window - a.now,
        reset_after_ms: newest + a.window - a.now,
        now_ms: a.now,
        denied_by: None,
    })
}

fn sliding_counter(
    keys: &mut HashMap<String, Entry>,
    key: &str,
    a: &Args,
    write: bool,
) -> Result<Decision> {
    let empty = BTreeMap::new();
    let fields = match keys.get(key).map(|e| &e.value) {
        None => &empty,
        Some(Value::Counter(fields)) => fields,
        Some(_) => return Err(wrong_type()),
    };
    // Signed and wide: the same values the script computes in doubles, exactly.
    let (limit, w, cost) = (a.limit as i128, a.window as i128, a.cost as i128);
    let cur_start = a.now - a.now % a.window;
    let e = (a.now - cur_start) as i128;
    let count_at =
        |start: Option<u64>| start.and_then(|s| fields.get(&s)).copied().unwrap_or(0) as i128;
    let a_cur = count_at(Some(cur_start));
    let b = count_at(cur_start.checked_sub(a.window));

    let room = limit - a_cur - cost;
    let allowed = room >= 0 && b * (w - e) <= room * w;
    let a_after = if allowed { a_cur + cost } else { a_cur };
    if allowed && write {
        let entry = keys.entry(key.to_owned()).or_insert(Entry {
            value: Value::Counter(BTreeMap::new()),
            expires_at: 0,
        });
        let Value::Counter(fields) = &mut entry.value else {
            unreachable!("type checked above")
        };
        *fields.entry(cur_start).or_insert(0) += a.cost;
        if a_cur == 0 {
            // First permit of the window: older fields can never count again,
            // and nothing here counts past cur_start + 2W.
            fields.retain(|&start, _| start as i128 >= cur_start as i128 - w);
            entry.expires_at = a.expires_at(2 * a.window);
        }
    }

    let headroom = (limit - a_after) * w - b * (w - e);
    let remaining = if headroom > 0 { headroom / w } else { 0 };
    let reset_after = if a_after > 0 {
        2 * w - e
    } else if b > 0 {
        w - e
    } else {
        0
    };
    let retry_after = if allowed {
        0
    } else {
        let same_window = if a_cur + cost <= limit && b > 0 {
            let x = w - (limit - cost - a_cur) * w / b;
            (x < w).then(|| x.max(e) - e)
        } else {
            None
        };
        same_window.unwrap_or_else(|| {
            let x_next = if a_cur > 0 {
                (w - (limit - cost) * w / a_cur).max(0)
            } else {
                0
            };
            (w - e) + x_next
        })
    };
    Ok(Decision {
        allowed,
        remaining: remaining as u64,
        retry_after_ms: retry_after as u64,
        reset_after_ms: reset_after as u64,
        now_ms: a.now,
        denied_by: None,
    })
}

/// What `lua/bucketed_window.lua` answers when a hint would pass 2^53.
const HINT_PAST_2P53: &str = "lags the newest admission so far that the hints would pass 2^53 ms";

fn bucketed_window(
    keys: &mut HashMap<String, Entry>,
    key: &str,
    a: &Args,
    write: bool,
) -> Result<Decision> {
    let empty = BTreeMap::new();
    let (newest, counts) = match keys.get(key).map(|e| &e.value) {
        None => (None, &empty),
        Some(Value::Buckets { newest, counts }) => (Some(*newest), counts),
        Some(_) => return Err(wrong_type()),
    };
    let g = a.window / a.buckets;
    // A permit of bucket b counts until x_b = (b + 1) g - 1 + W.
    let x = |b: u64| (b + 1) * g - 1 + a.window;
    // The time rule: evaluated at t = max(now, newest), recorded at t.
    let t = newest.map_or(a.now, |n| n.max(a.now));
    // Every hint is at most x(t / g) - now; above 2^53 no double (nor the
    // script's Lua) holds it exactly. Only a caller lagging the newest
    // admission by about 2^52 ms, with a window above 2^51 ms, gets here.
    if x(t / g) - a.now > MAX_EXACT {
        return Err(Error::invalid("now_ms", HINT_PAST_2P53));
    }
    // Buckets below first_live have expired at t (x_b <= t).
    let first_live = (t + 1).saturating_sub(a.window) / g;
    let live: u64 = counts.range(first_live..).map(|(_, &n)| n).sum();

    if live + a.cost <= a.limit {
        let b = t / g;
        let ttl = x(b) - a.now;
        if write {
            // As the script: a key's expiry is set when it is made, on a
            // fresh start and when an admission opens a later bucket; within
            // one bucket it stays the instant the bucket's first admission
            // set (x_b, the same for every admission there with one clock).
            let sets_expiry = live == 0 || newest.is_none_or(|n| b > n / g);
            let entry = keys.entry(key.to_owned()).or_insert(Entry {
                value: Value::Buckets {
                    newest: t,
                    counts: BTreeMap::new(),
                },
                expires_at: 0,
            });
            let Value::Buckets { newest, counts } = &mut entry.value else {
                unreachable!("type checked above")
            };
            // After the admission t is the newest recorded time: whatever
            // has expired there may go.
            *counts = counts.split_off(&first_live);
            *counts.entry(b).or_insert(0) += a.cost;
            *newest = t;
            if sets_expiry {
                entry.expires_at = a.expires_at(ttl);
            }
        }
        return Ok(Decision {
            allowed: true,
            remaining: a.limit - live - a.cost,
            retry_after_ms: 0,
            reset_after_ms: ttl,
            now_ms: a.now,
            denied_by: None,
        });
    }

    // Denied: nothing recorded, nothing dropped. The oldest live bucket at
    // which the count from the oldest reaches `need` frees enough room.
    let need = live + a.cost - a.limit;
    let mut seen = 0;
    let mut freeing = first_live;
    for (&b, &n) in counts.range(first_live..) {
        seen += n;
        if seen >= need {
            freeing = b;
            break;
        }
    }
    let newest = newest.expect("denied implies a live bucket, since cost <= limit");
    Ok(Decision {
        allowed: false,
        remaining: a.limit.saturating_sub(live),
        retry_after_ms: x(freeing) - a.now,
        reset_after_ms: x(newest / g) - a.now,
        now_ms: a.now,
        denied_by: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(algorithm: Algorithm, limit: u64, window_ms: u64) -> Policy {
        Policy::new("rl", "geo", algorithm, limit, window_ms).unwrap()
    }

    fn d(allowed: bool, remaining: u64, retry: u64, reset: u64, now: u64) -> Decision {
        Decision {
            allowed,
            remaining,
            retry_after_ms: retry,
            reset_after_ms: reset,
            now_ms: now,
            denied_by: None,
        }
    }

    #[test]
    fn log_by_hand() {
        let e = MemoryEngine::new();
        let p = policy(Algorithm::SlidingLog, 3, 1000);
        assert_eq!(
            e.acquire(&p, "t", 2, 1000).unwrap(),
            d(true, 1, 0, 1000, 1000)
        );
        assert_eq!(
            e.acquire(&p, "t", 1, 1400).unwrap(),
            d(true, 0, 0, 1000, 1400)
        );
        // count 3, cost 2: k = 2, the second oldest entry (1000) frees room at 2000.
        assert_eq!(
            e.acquire(&p, "t", 2, 1500).unwrap(),
            d(false, 0, 500, 900, 1500)
        );
        // At 2000 both entries of 1000 expire; 1400 still counts.
        assert_eq!(
            e.acquire(&p, "t", 2, 2000).unwrap(),
            d(true, 0, 0, 1000, 2000)
        );
        assert_eq!(
            e.acquire(&p, "t", 1, 2399).unwrap(),
            d(false, 0, 1, 601, 2399)
        );
        assert_eq!(
            e.acquire(&p, "t", 1, 2400).unwrap(),
            d(true, 0, 0, 1000, 2400)
        );
    }

    #[test]
    fn log_never_records_before_the_newest_entry() {
        let e = MemoryEngine::new();
        let p = policy(Algorithm::SlidingLog, 3, 1000);
        e.acquire(&p, "t", 1, 5000).unwrap();
        // A caller whose clock is 300 ms behind: recorded at 5000, not 4700.
        assert_eq!(
            e.acquire(&p, "t", 1, 4700).unwrap(),
            d(true, 1, 0, 1300, 4700)
        );
        assert_eq!(
            e.acquire(&p, "t", 2, 5999).unwrap(),
            d(false, 1, 1, 1, 5999)
        );
        assert!(e.acquire(&p, "t", 2, 6000).unwrap().allowed);
    }

    #[test]
    fn a_leading_denial_drops_nothing_a_lagging_caller_still_counts() {
        // Issue 12, section 0: limit 2, window 100 s, caller time.
        let e = MemoryEngine::new();
        let p = policy(Algorithm::SlidingLog, 2, 100_000);
        assert!(e.acquire(&p, "t", 1, 1_000_000).unwrap().allowed);
        assert!(e.acquire(&p, "t", 1, 1_000_001).unwrap().allowed);
        // Leading clock: 1,000,000 is expired for it, not at the newest admission.
        assert_eq!(
            e.acquire(&p, "t", 2, 1_100_000).unwrap(),
            d(false, 1, 1, 1, 1_100_000)
        );
        // Lagging clock: both entries still count.
        assert_eq!(
            e.acquire(&p, "t", 1, 1_050_000).unwrap(),
            d(false, 0, 50_000, 50_001, 1_050_000)
        );
    }

    #[test]
    fn a_lagging_caller_is_evaluated_at_the_newest_admission() {
        let e = MemoryEngine::new();
        let p = policy(Algorithm::SlidingLog, 2, 1000);
        e.acquire(&p, "t", 1, 10_000).unwrap();
        e.acquire(&p, "t", 1, 10_999).unwrap();
        // At 11,500 the entry at 10,000 has expired; recorded at 11,500.
        assert!(e.acquire(&p, "t", 1, 11_500).unwrap().allowed);
        // A caller at 11,000 is evaluated at 11,500: 10,999 and 11,500 count.
        assert_eq!(
            e.acquire(&p, "t", 1, 11_000).unwrap(),
            d(false, 0, 999, 1_500, 11_000)
        );
    }

    /// A tiny seeded generator: `next(n)` is uniform-ish in [0, n).
    fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
        move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        }
    }

    /// No [x, x + W) of the recorded admission times (sorted) holds more than `limit`.
    fn assert_no_window_over(recorded: &[u64], window: u64, limit: u64) {
        for (i, &x) in recorded.iter().enumerate() {
            let inside = recorded[i..]
                .iter()
                .take_while(|&&s| s < x + window)
                .count();
            assert!(
                inside as u64 <= limit,
                "{inside} admissions in [{x}, {}) against {limit}",
                x + window
            );
        }
    }

    /// The time rule's guarantee, by brute force: over random sequences of
    /// skewed caller clocks, the admissions as recorded (at t = now +
    /// reset_after - W) never put more than `limit` in any window [x, x + W),
    /// and a denial's retry hint is the first caller time at which the same
    /// check passes.
    #[test]
    fn skewed_clocks_never_exceed_the_limit_in_any_rolling_window() {
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
        for _ in 0..300 {
            let limit = 1 + next(5);
            let window = 1000 + next(3) * 500;
            let p = policy(Algorithm::SlidingLog, limit, window);
            let e = MemoryEngine::new();
            let mut recorded: Vec<u64> = Vec::new();
            let mut base = 1_000_000u64;
            for _ in 0..60 {
                base += next(window / 2);
                // Callers up to 1.5 W behind or ahead of the base clock.
                let now = base + next(3 * window) - 3 * window / 2;
                let cost = 1 + next(limit);
                let before = e.peek(&p, "t", cost, now).unwrap();
                let got = e.acquire(&p, "t", cost, now).unwrap();
                assert_eq!(before, got, "peek and acquire decide alike");
                if got.allowed {
                    let r = now + got.reset_after_ms - window;
                    assert!(recorded.last().is_none_or(|&l| r >= l));
                    recorded.extend(std::iter::repeat_n(r, cost as usize));
                } else {
                    let retry = got.retry_after_ms;
                    assert!(retry > 0);
                    // Exact: one ms earlier still denied, at now + retry it passes.
                    assert!(!e.peek(&p, "t", cost, now + retry - 1).unwrap().allowed);
                    assert!(e.peek(&p, "t", cost, now + retry).unwrap().allowed);
                }
                assert_no_window_over(&recorded, window, limit);
            }
        }
    }

    fn bucketed(limit: u64, window_ms: u64, buckets: u64) -> Policy {
        Policy::with_buckets(
            "rl",
            "geo",
            Algorithm::BucketedWindow,
            limit,
            window_ms,
            Some(buckets),
        )
        .unwrap()
    }

    #[test]
    fn bucketed_by_hand() {
        // L = 3, W = 1000, N = 10: g = 100, x_b = (b + 1) * 100 - 1 + 1000.
        let e = MemoryEngine::new();
        let p = bucketed(3, 1000, 10);
        // Bucket 100 (10,000..10,099): x = 11,099.
        assert_eq!(
            e.acquire(&p, "t", 1, 10_050).unwrap(),
            d(true, 2, 0, 1049, 10_050)
        );
        assert_eq!(
            e.acquire(&p, "t", 1, 10_099).unwrap(),
            d(true, 1, 0, 1000, 10_099)
        );
        // Bucket 101: x = 11,199.
        assert_eq!(
            e.acquire(&p, "t", 1, 10_100).unwrap(),
            d(true, 0, 0, 1099, 10_100)
        );
        // Full: the two permits of bucket 100 free room at 11,099, where the
        // log would free it at 11,050; reset with the newest bucket's x.
        assert_eq!(
            e.acquire(&p, "t", 1, 10_500).unwrap(),
            d(false, 0, 599, 699, 10_500)
        );
        assert_eq!(
            e.acquire(&p, "t", 2, 10_500).unwrap(),
            d(false, 0, 599, 699, 10_500)
        );
        // Cost 3 needs bucket 101's permit too.
        assert_eq!(
            e.acquire(&p, "t", 3, 10_500).unwrap(),
            d(false, 0, 699, 699, 10_500)
        );
        assert!(!e.peek(&p, "t", 1, 11_098).unwrap().allowed);
        // At 11,099 bucket 100 has expired: two places free.
        assert_eq!(
            e.acquire(&p, "t", 2, 11_099).unwrap(),
            d(true, 0, 0, 1000, 11_099)
        );
        assert_eq!(
            e.peek(&p, "t", 1, 11_150).unwrap(),
            d(false, 0, 49, 949, 11_150)
        );
    }

    #[test]
    fn a_hint_past_2p53_is_refused_naming_now_ms() {
        // L = 1, W = 2^52, N = 1: the permit at 2^52 is in bucket 1, held
        // until x_1 = 3 * 2^52 - 1. A caller at 2^52 - 1 is owed exactly
        // 2^53; one at 2^52 - 2 would be owed 2^53 + 1, which no double holds.
        // (Found by `make fuzz`'s engine target with a window of about 2^52.)
        let e = MemoryEngine::new();
        let p = bucketed(1, 1 << 52, 1);
        let top = 1u64 << 52;
        assert_eq!(
            e.acquire(&p, "t", 1, top).unwrap(),
            d(true, 0, 0, (1 << 53) - 1, top)
        );
        assert_eq!(
            e.acquire(&p, "t", 1, top - 1).unwrap(),
            d(false, 0, 1 << 53, 1 << 53, top - 1)
        );
        for now in [top - 2, 0] {
            for mode in [Mode::Acquire, Mode::Peek] {
                let err = e.check(&p, "t", 1, Some(now), top, mode).unwrap_err();
                assert_eq!(err.code(), ErrorCode::InvalidArgument, "{err}");
                assert_eq!(err.field(), Some("now_ms"), "{err}");
                assert_eq!(err.message(), format!("now_ms: {HINT_PAST_2P53}"));
            }
        }
        // Nothing was recorded or dropped: the owner of the permit still sees it.
        assert_eq!(
            e.peek(&p, "t", 1, top).unwrap(),
            d(false, 0, (1 << 53) - 1, (1 << 53) - 1, top)
        );
        // A window of 2^51 never gets there: the most any caller is owed is
        // 2^52 + g - 1 + W = 2^53 - 1.
        let p = bucketed(1, 1 << 51, 1);
        let e = MemoryEngine::new();
        e.acquire(&p, "t", 1, top).unwrap();
        assert_eq!(
            e.acquire(&p, "t", 1, 0).unwrap(),
            d(false, 0, (1 << 53) - 1, (1 << 53) - 1, 0)
        );
    }

    #[test]
    fn one_millisecond_buckets_are_the_sliding_log() {
        // g = 1: the same sequence, skewed clocks included, decides the same.
        let mut next = xorshift(0x2545_F491_4F6C_DD1D);
        for _ in 0..200 {
            let limit = 1 + next(6);
            let window = [1000, 1500, 3600][next(3) as usize];
            let log = policy(Algorithm::SlidingLog, limit, window);
            let one_ms = bucketed(limit, window, window);
            let (a, b) = (MemoryEngine::new(), MemoryEngine::new());
            let mut base = 50_000u64;
            for _ in 0..50 {
                base += next(window / 2);
                let now = base + next(2 * window) - window;
                let cost = 1 + next(limit);
                let mode = if next(5) == 0 {
                    Mode::Peek
                } else {
                    Mode::Acquire
                };
                assert_eq!(
                    a.check(&log, "t", cost, Some(now), 0, mode).unwrap(),
                    b.check(&one_ms, "t", cost, Some(now), 0, mode).unwrap(),
                    "at {now} cost {cost} {mode:?}"
                );
            }
        }
    }

    /// The bucketed window's guarantee, by brute force over skewed clocks:
    /// admissions recorded at r = max(now, newest) never put more than the
    /// limit in any [x, x + W); each permit's reset is its bucket's x_b; a
    /// denial's retry is the first caller time at which the check passes.
    #[test]
    fn bucketed_never_exceeds_the_limit_in_any_rolling_window() {
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
        for _ in 0..300 {
            let limit = 1 + next(8);
            let window = 1000 * (1 + next(3));
            let buckets = [1, 4, 10, 50, 1000][next(5) as usize];
            let g = window / buckets;
            let p = bucketed(limit, window, buckets);
            let e = MemoryEngine::new();
            let mut recorded: Vec<u64> = Vec::new();
            let mut base = 1_000_000u64;
            for _ in 0..60 {
                base += next(window / 2);
                let now = base + next(3 * window) - 3 * window / 2;
                let cost = 1 + next(limit);
                let got = e.acquire(&p, "t", cost, now).unwrap();
                if got.allowed {
                    let r = recorded.last().map_or(now, |&l| l.max(now));
                    assert_eq!(got.reset_after_ms, (r / g + 1) * g - 1 + window - now);
                    recorded.extend(std::iter::repeat_n(r, cost as usize));
                } else {
                    let retry = got.retry_after_ms;
                    assert!(retry > 0);
                    assert!(!e.peek(&p, "t", cost, now + retry - 1).unwrap().allowed);
                    assert!(e.peek(&p, "t", cost, now + retry).unwrap().allowed);
                }
                assert_no_window_over(&recorded, window, limit);
            }
        }
    }

    #[test]
    fn counter_by_hand() {
        let e = MemoryEngine::new();
        let p = policy(Algorithm::SlidingCounter, 3, 1000);
        for (i, now) in [1000, 1100, 1200].into_iter().enumerate() {
            let got = e.acquire(&p, "t", 1, now).unwrap();
            assert_eq!(got, d(true, 2 - i as u64, 0, 3000 - now, now));
        }
        // a = 3: next window, x' = 1000 - floor(2000 / 3) = 334; wait 700 + 334.
        assert_eq!(
            e.acquire(&p, "t", 1, 1300).unwrap(),
            d(false, 0, 1034, 1700, 1300)
        );
        // At 2333 the previous window still weighs 3 * 667 / 1000 > 2.
        assert!(!e.peek(&p, "t", 1, 2333).unwrap().allowed);
        assert!(e.peek(&p, "t", 1, 2334).unwrap().allowed);
        // Same-window hint: a = 1 at 2500, b = 3; x = 1000 - floor(1000 / 3) = 667.
        assert_eq!(
            e.acquire(&p, "t", 1, 2500).unwrap(),
            d(true, 0, 0, 1500, 2500)
        );
        assert_eq!(
            e.acquire(&p, "t", 1, 2600).unwrap(),
            d(false, 0, 67, 1400, 2600)
        );
        assert_eq!(
            e.acquire(&p, "t", 1, 2667).unwrap(),
            d(true, 0, 0, 1333, 2667)
        );
    }

    #[test]
    fn peek_records_nothing() {
        for algorithm in [Algorithm::SlidingLog, Algorithm::SlidingCounter] {
            let e = MemoryEngine::new();
            let p = policy(algorithm, 1, 1000);
            let peeked = e.peek(&p, "t", 1, 10).unwrap();
            assert_eq!(e.key_count(), 0);
            assert_eq!(peeked, e.acquire(&p, "t", 1, 10).unwrap());
            assert!(!e.peek(&p, "t", 1, 10).unwrap().allowed);
            assert!(e.reset(&p, "t").unwrap());
            assert!(e.acquire(&p, "t", 1, 10).unwrap().allowed);
        }
    }

    /// A real clock far from every caller time, as in a binding: limit 1 per
    /// 60 s, the numbers.
    const CLOCK: u64 = 1_800_000_000_000;

    fn check(e: &MemoryEngine, p: &Policy, t: &str, now: u64, mode: Mode) -> Decision {
        e.check(p, t, 1, Some(now), CLOCK, mode).unwrap()
    }

    #[test]
    fn a_peek_at_a_far_time_forgets_nothing() {
        for algorithm in [Algorithm::SlidingLog, Algorithm::SlidingCounter] {
            let e = MemoryEngine::new();
            let p = policy(algorithm, 1, 60_000);
            assert!(check(&e, &p, "A", 1000, Mode::Acquire).allowed);
            assert!(check(&e, &p, "A", 1_000_000, Mode::Peek).allowed);
            let denied = check(&e, &p, "A", 1001, Mode::Acquire);
            assert!(!denied.allowed, "{algorithm:?}");
            if algorithm == Algorithm::SlidingLog {
                assert_eq!(denied, d(false, 0, 59_999, 59_999, 1001));
            }
        }
    }

    #[test]
    fn other_tenants_at_far_times_forget_nothing() {
        for algorithm in [Algorithm::SlidingLog, Algorithm::SlidingCounter] {
            let e = MemoryEngine::new();
            let p = policy(algorithm, 1, 60_000);
            assert!(check(&e, &p, "A", 1000, Mode::Acquire).allowed);
            // More than one sweep interval, peeks and acquires alike.
            for i in 0..2 * SWEEP_EVERY {
                let mode = if i % 2 == 0 {
                    Mode::Peek
                } else {
                    Mode::Acquire
                };
                check(&e, &p, &format!("other-{i}"), 5_000_000, mode);
            }
            let denied = check(&e, &p, "A", 1001, Mode::Acquire);
            assert!(!denied.allowed, "{algorithm:?}");
            if algorithm == Algorithm::SlidingLog {
                assert_eq!(denied, d(false, 0, 59_999, 59_999, 1001));
            }
        }
    }

    #[test]
    fn peek_never_changes_state() {
        // Whatever a peek asks (any tenant, any caller time, any cost), every
        // later decision is the one the same history without it gives.
        for algorithm in [Algorithm::SlidingLog, Algorithm::SlidingCounter] {
            let p = policy(algorithm, 3, 1000);
            let (with, without) = (MemoryEngine::new(), MemoryEngine::new());
            let times: [u64; 10] = [0, 1, 999, 1000, 1999, 5000, 4000, 1_000_000_000, 2500, 7];
            for (i, &now) in times.iter().enumerate() {
                for peek_at in [0, now.saturating_sub(1000), now + 1, 1 << 52] {
                    for cost in 1..=3 {
                        with.check(&p, "t", cost, Some(peek_at), CLOCK, Mode::Peek)
                            .unwrap();
                    }
                }
                let cost = 1 + i as u64 % 2;
                let a = with.check(&p, "t", cost, Some(now), CLOCK, Mode::Acquire);
                let b = without.check(&p, "t", cost, Some(now), CLOCK, Mode::Acquire);
                assert_eq!(a.unwrap(), b.unwrap(), "{algorithm:?} step {i} at {now}");
                assert_eq!(with.key_count(), without.key_count());
            }
        }
    }

    /// A writer whose clock leads the server's by 200 ms fills the limit; a
    /// caller on the server's clock must find those permits until they
    /// expire on its own clock, 200 ms after the writer's. Without the caller
    /// time margin the key was gone by then and it was admitted 3 more
    /// (seen in a skewed-clock audit at limit 3).
    #[test]
    fn a_caller_time_key_outlives_a_leading_writers_clock() {
        let bucketed =
            Policy::with_buckets("rl", "geo", Algorithm::BucketedWindow, 3, 1500, Some(1500))
                .unwrap();
        for p in [policy(Algorithm::SlidingLog, 3, 1500), bucketed] {
            let name = p.limits()[0].algorithm;
            let e = MemoryEngine::new();
            let d = e.check(&p, "t", 3, Some(CLOCK + 200), CLOCK, Mode::Acquire);
            assert!(d.unwrap().allowed);
            // At the server's CLOCK + 1600 the writer's clock is past its
            // admissions' window (and the key's TTL of 1500 has run out on
            // the server), but ours is not: they count until CLOCK + 1699.
            let at = |clock: u64| e.check(&p, "t", 1, Some(clock), clock, Mode::Peek).unwrap();
            let d = at(CLOCK + 1600);
            assert!(!d.allowed, "{name:?}: {d:?}");
            assert_eq!(d.retry_after_ms, 100, "{name:?}");
            assert!(at(CLOCK + 1700).allowed, "{name:?}");
            // With the server's clock there is no margin: the key is gone
            // once its TTL of 1500 has run out, which a caller lagging by
            // 1500 ms can tell (for it the permits would still count).
            let e = MemoryEngine::new();
            let d = e.check(&p, "t", 3, None, CLOCK, Mode::Acquire);
            assert!(d.unwrap().allowed);
            let lagging = |clock: u64| {
                e.check(&p, "t", 1, Some(CLOCK + 1), clock, Mode::Peek)
                    .unwrap()
                    .allowed
            };
            assert!(!lagging(CLOCK + 1500), "{name:?}");
            assert!(lagging(CLOCK + 1501), "{name:?}");
        }
    }

    /// The bucketed script sets its key's expiry when an admission opens a
    /// bucket, not on every admission: a second admission into the same
    /// bucket, from a caller whose clock lags the server's by 500 ms more,
    /// leaves the expiry the first one set (rust/tests/bucketed.rs shows
    /// the script's PTTL doing the same).
    #[test]
    fn a_bucketed_key_keeps_the_expiry_its_bucket_opened_with() {
        let p = Policy::with_buckets("rl", "geo", Algorithm::BucketedWindow, 3, 1000, Some(10))
            .unwrap();
        // One engine per sequence: each expires its key on the clock.
        let run = |admissions: &[(u64, u64)], peek_clock: u64| {
            let e = MemoryEngine::new();
            for &(now, clock) in admissions {
                let d = e
                    .check(&p, "t", 1, Some(now), clock, Mode::Acquire)
                    .unwrap();
                assert!(d.allowed, "{d:?}");
            }
            // A caller for whom every admission still counts.
            e.check(&p, "t", 1, Some(CLOCK + 50), peek_clock, Mode::Peek)
                .unwrap()
                .remaining
        };
        // Bucket CLOCK / 100 counts until x = CLOCK + 1099: TTL 1099 plus the
        // caller-time margin (a minute, more than the window), so the key
        // expires at the clock's CLOCK + 61099, whatever the clock of the
        // bucket's second admission.
        let same_bucket = [(CLOCK, CLOCK), (CLOCK + 10, CLOCK + 500)];
        assert_eq!(run(&same_bucket, CLOCK + 61_099), 0, "both permits held");
        assert_eq!(run(&same_bucket, CLOCK + 61_100), 2, "the key has expired");
        // An admission into a later bucket sets the expiry again, from its
        // own clock: x = CLOCK + 1199 for bucket CLOCK / 100 + 1, so the key
        // expires at CLOCK + 500 + (1199 - 150) + 60000.
        let next_bucket = [(CLOCK, CLOCK), (CLOCK + 150, CLOCK + 500)];
        assert_eq!(run(&next_bucket, CLOCK + 61_549), 0, "both permits held");
        assert_eq!(run(&next_bucket, CLOCK + 61_550), 2, "the key has expired");
    }

    #[test]
    fn keys_expire_on_the_clock_as_redis_does() {
        // The log's 1000 ms to nothing counting, the counter's 2W, each plus
        // the caller-time margin: the window, at least a minute.
        for (algorithm, ttl) in [
            (Algorithm::SlidingLog, 61_000),
            (Algorithm::SlidingCounter, 62_000),
        ] {
            let e = MemoryEngine::new();
            let p = policy(algorithm, 1, 1000);
            // Caller time 10, clock CLOCK: PEXPIRE ttl runs from CLOCK.
            assert!(
                e.check(&p, "t", 1, Some(10), CLOCK, Mode::Acquire)
                    .unwrap()
                    .allowed
            );
            // Redis keeps a key through its expiry's millisecond.
            let at = |clock| e.check(&p, "t", 1, Some(10), clock, Mode::Peek).unwrap();
            assert!(!at(CLOCK + ttl).allowed, "{algorithm:?}");
            assert_eq!(e.key_count(), 1);
            assert!(at(CLOCK + ttl + 1).allowed, "{algorithm:?}");
            assert_eq!(e.key_count(), 0);
        }
        // A clock near u64::MAX saturates instead of wrapping to an expired key.
        let e = MemoryEngine::new();
        let p = policy(Algorithm::SlidingLog, 1, 1000);
        let late = u64::MAX - 10;
        assert!(
            e.check(&p, "t", 1, Some(10), late, Mode::Acquire)
                .unwrap()
                .allowed
        );
        assert!(
            !e.check(&p, "t", 1, Some(10), u64::MAX, Mode::Peek)
                .unwrap()
                .allowed
        );
    }

    #[test]
    fn a_clock_past_2_52_is_refused_where_it_is_the_scripts_time() {
        let e = MemoryEngine::new();
        let p = policy(Algorithm::SlidingLog, 5, 1000);
        let nanos = 1_800_000_000_000_000_000;
        for mode in [Mode::Acquire, Mode::Peek] {
            let err = e.check(&p, "t", 1, None, nanos, mode).unwrap_err();
            assert_eq!(err.code(), ErrorCode::InvalidArgument);
            assert_eq!(err.field(), Some("clock"));
            assert!(err.to_string().contains("1800000000000000000"), "{err}");
        }
        assert_eq!(e.key_count(), 0, "nothing recorded");
        // 2^52 itself is a time a decision can carry; with a caller time the
        // clock only expires keys (keys_expire_on_the_clock_as_redis_does).
        assert!(
            e.check(&p, "t", 1, None, MAX_NOW_MS, Mode::Acquire)
                .unwrap()
                .allowed
        );
        assert!(
            e.check(&p, "u", 1, Some(10), nanos, Mode::Acquire)
                .unwrap()
                .allowed
        );
        // A bad field of the call is named before the clock.
        let err = e.check(&p, "", 1, None, nanos, Mode::Acquire).unwrap_err();
        assert_eq!(err.field(), Some("tenant"));
        // The raw engine too, for every algorithm and a policy of several
        // limits: an error, not an overflow on the script's arithmetic.
        let several = Policy::with_limits(
            "rl",
            "geo",
            &[
                crate::Limit::new(Algorithm::SlidingLog, 2, 1000),
                crate::Limit::new(Algorithm::BucketedWindow, 5, 60_000),
            ],
        )
        .unwrap();
        let single = [
            Algorithm::SlidingLog,
            Algorithm::SlidingCounter,
            Algorithm::BucketedWindow,
        ];
        let policies = single.map(|a| policy(a, 5, 60_000));
        for p in policies.iter().chain([&several]) {
            let call = p.build_call("t", 1, None, Mode::Acquire).unwrap();
            for clock in [MAX_NOW_MS + 1, u64::MAX] {
                let err = e.eval(&call, clock).unwrap_err();
                assert_eq!(err.field(), Some("clock"), "{:?}", p.limits());
            }
        }
    }

    #[test]
    fn idle_keys_expire_on_the_clock_not_on_caller_time() {
        let e = MemoryEngine::new();
        let p = policy(Algorithm::SlidingLog, 5, 1000);
        for i in 0..20_000u64 {
            let clock = CLOCK + 10 * i;
            e.check(&p, &format!("tenant-{i}"), 1, Some(0), clock, Mode::Acquire)
                .unwrap();
        }
        // Memory stays bounded by keys live on the clock, 61 s of them (the
        // window and the caller-time margin), plus one sweep interval.
        assert!(
            e.key_count() <= 6101 + SWEEP_EVERY as usize,
            "{}",
            e.key_count()
        );
    }

    #[test]
    fn idle_keys_are_dropped() {
        let e = MemoryEngine::new();
        let p = policy(Algorithm::SlidingLog, 5, 1000);
        for i in 0..20_000u64 {
            e.acquire(&p, &format!("tenant-{i}"), 1, 10 * i).unwrap();
        }
        // Every sweep keeps only keys that are still inside their window and
        // the caller-time margin (61 s, 6,100 tenants here).
        assert!(
            e.key_count() <= 6100 + SWEEP_EVERY as usize,
            "{}",
            e.key_count()
        );
    }

    #[test]
    fn huge_costs_stay_cheap() {
        // One run per timestamp: a cost of half the log's cap is one run, not
        // 5,000 entries.
        let e = MemoryEngine::new();
        let cap = crate::MAX_LOG_LIMIT;
        let p = policy(Algorithm::SlidingLog, cap, 1000);
        assert!(e.acquire(&p, "t", cap / 2, 1).unwrap().allowed);
        assert!(e.acquire(&p, "t", cap / 2, 1).unwrap().allowed);
        let denied = e.acquire(&p, "t", 1, 2).unwrap();
        assert_eq!(denied, d(false, 0, 999, 999, 2));
    }

    #[test]
    fn arguments_are_checked_as_the_scripts_check_them() {
        // Raw calls, as a binding that skipped core might send them: the
        // engine answers what the scripts answer (lua/*.lua), same code,
        // same field, and records nothing.
        let e = MemoryEngine::new();
        let eval = |algorithm: Algorithm, args: [&str; 4]| {
            let call = ScriptCall {
                script: crate::Script::new(algorithm, Mode::Acquire),
                keys: vec![format!("rl:{{geo:t}}:{}:1000", algorithm.key_tag())],
                args: args.iter().map(|a| a.to_string()).collect(),
            };
            e.eval(&call, 5000)
        };
        let log = Algorithm::SlidingLog;
        let counter = Algorithm::SlidingCounter;
        let cap = crate::MAX_LOG_LIMIT.to_string();
        let over_cap = (crate::MAX_LOG_LIMIT + 1).to_string();
        let cases: &[([&str; 4], &str)] = &[
            (["10", "1000", "-1", ""], "cost"),
            (["10", "1000", "0", ""], "cost"),
            (["10", "1000", "1.5", ""], "cost"),
            (["10", "1000", "0x2", ""], "cost"),
            (["10", "1000", "1e0", ""], "cost"),
            (["10", "1000", " 5", ""], "cost"),
            (["10", "1000", "5 ", ""], "cost"),
            (["10", "1000", "+5", ""], "cost"),
            (["10", "1000", "", ""], "cost"),
            (["10", "1000", "11", ""], "cost"),
            (["10", "1000", "99999999999999999999999", ""], "cost"),
            (["0", "1000", "1", ""], "limit"),
            (["-10", "1000", "1", ""], "limit"),
            (["10.0", "1000", "1", ""], "limit"),
            (["10", "0", "1", ""], "window_ms"),
            (["10", "1e3", "1", ""], "window_ms"),
            (["67108865", "67108864", "1", ""], "limit"),
            (["10", "99999999999999999999999", "1", ""], "limit"),
            (["10", "1000", "1", "-1"], "now_ms"),
            (["10", "1000", "1", "1.5"], "now_ms"),
            (["10", "1000", "1", " 1"], "now_ms"),
            (["10", "1000", "1", "4503599627370497"], "now_ms"),
            (["10", "1000", "1", "99999999999999999999999"], "now_ms"),
            // The first field at fault is named, in the scripts' order.
            (["x", "0", "-1", "y"], "limit"),
            (["0", "0", "0", "y"], "now_ms"),
            (["0", "0", "0", "1"], "limit"),
            (["10", "0", "11", "1"], "window_ms"),
            (["10", "1000", "11", "4503599627370497"], "cost"),
        ];
        for (i, algorithm) in [log, counter].into_iter().enumerate() {
            for (args, field) in cases {
                let err = eval(algorithm, *args).unwrap_err();
                assert_eq!(err.code(), ErrorCode::InvalidArgument, "{args:?}: {err}");
                assert_eq!(err.field(), Some(*field), "{algorithm:?} {args:?}: {err}");
            }
            assert_eq!(e.key_count(), i, "nothing recorded");
            // The bounds themselves pass; leading zeros are digits too.
            for args in [
                ["10", "1000", "10", ""],
                ["10", "1000", "1", "4503599627370496"],
                ["010", "01000", "01", "0"],
                ["1", "4503599627370496", "1", "0"],
            ] {
                assert!(eval(algorithm, args).is_ok(), "{algorithm:?} {args:?}");
            }
        }
        // The log's cap; the counter has none.
        assert!(eval(log, [cap.as_str(), "1000", "1", "0"]).is_ok());
        let err = eval(log, [over_cap.as_str(), "1000", "1", "0"]).unwrap_err();
        assert_eq!(err.field(), Some("limit"), "{err}");
        assert!(eval(counter, [over_cap.as_str(), "1000", "1", "0"]).is_ok());
        // A call of the wrong shape is a script error, as in Redis.
        let mut call = ScriptCall {
            script: crate::Script::new(log, Mode::Acquire),
            keys: vec!["k".to_owned()],
            args: vec!["1".to_owned(); 3],
        };
        assert_eq!(e.eval(&call, 0).unwrap_err().code(), ErrorCode::ScriptError);
        call.args.push(String::new());
        call.keys.push("k2".to_owned());
        assert_eq!(e.eval(&call, 0).unwrap_err().code(), ErrorCode::ScriptError);
    }

    #[test]
    fn a_key_of_the_other_algorithm_is_wrong_type() {
        let e = MemoryEngine::new();
        let log = policy(Algorithm::SlidingLog, 3, 1000);
        let mut call = log.build_call("t", 1, Some(1), Mode::Acquire).unwrap();
        e.eval(&call, 0).unwrap();
        call.script = crate::Script::new(Algorithm::SlidingCounter, Mode::Acquire);
        assert_eq!(e.eval(&call, 0).unwrap_err().code(), ErrorCode::WrongType);
    }

    #[test]
    fn several_limits_record_in_all_or_none() {
        use crate::Limit;
        // 2 per second and 3 per 10 seconds, log and bucketed.
        let mut ten_s = Limit::new(Algorithm::BucketedWindow, 3, 10_000);
        ten_s.buckets = Some(10);
        let p = Policy::with_limits(
            "rl",
            "geo",
            &[Limit::new(Algorithm::SlidingLog, 2, 1000), ten_s],
        )
        .unwrap();
        let e = MemoryEngine::new();
        let [log_key, bucket_key] = [0, 1].map(|i| p.keys("t").unwrap()[i].clone());
        let at = |now| e.acquire(&p, "t", 1, now).unwrap();
        assert_eq!((at(0).allowed, at(1).allowed), (true, true));
        // The second-limit allows one more, the first denies: nothing recorded.
        let denied = at(2);
        assert_eq!(
            (denied.allowed, denied.denied_by, denied.retry_after_ms),
            (false, Some(0), 998)
        );
        assert_eq!((e.held(&log_key), e.held(&bucket_key)), (2, 1));
        assert_eq!(at(1000).remaining, 0);
        // Both deny now; the retry is the longer one, the 10 s limit's.
        let both = at(1001);
        assert_eq!(both.denied_by, Some(1));
        assert_eq!(both.retry_after_ms, 999 + 10_000 - 1001);
        assert_eq!(both.remaining, 0);
        // Peek never records; reset forgets every limit.
        assert!(e.peek(&p, "t", 1, 1500).unwrap().denied_by.is_some());
        assert!(e.reset(&p, "t").unwrap());
        assert_eq!(e.key_count(), 0);
    }

    #[test]
    fn shared_across_threads() {
        let e = std::sync::Arc::new(MemoryEngine::new());
        let p = policy(Algorithm::SlidingCounter, 100, 60_000);
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (e, p) = (e.clone(), p.clone());
                std::thread::spawn(move || {
                    (0..50)
                        .filter(|_| e.acquire(&p, "t", 1, 5).unwrap().allowed)
                        .count()
                })
            })
            .collect();
        let allowed: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(allowed, 100);
    }
}
