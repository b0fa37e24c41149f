//! An in-memory engine with the scripts' exact semantics and integer
//! arithmetic: the embedded default (one process, no Redis) and the test
//! oracle for Redis.
//!
//! It runs the same [`ScriptCall`] a binding sends to Redis, so a call built by
//! core is interpreted exactly once, the same way, in both places. The caller
//! supplies the clock; the engine never reads one.

use crate::decision::{Decision, REPLY_LEN};
use crate::error::{Error, ErrorCode, Result};
use crate::policy::{Algorithm, Policy};
use crate::script::{Mode, ScriptCall};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;

/// Sweep expired keys once per this many calls, so idle tenants do not pile up.
const SWEEP_EVERY: u64 = 4096;

#[derive(Debug)]
enum Value {
    /// Runs of (timestamp, permits), oldest first, timestamps non-decreasing:
    /// the list in Redis with equal neighbours merged.
    Log(VecDeque<(u64, u64)>),
    /// Window start -> permits admitted in that window.
    Counter(BTreeMap<u64, u64>),
}

#[derive(Debug)]
struct Entry {
    value: Value,
    /// The key is gone at or after this time, as if Redis had expired it.
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
    cost: u64,
    now: u64,
}

fn parse_args(call: &ScriptCall, clock_ms: u64) -> Result<Args> {
    let script_error = |what: &str| {
        Error::new(
            ErrorCode::ScriptError,
            format!("slidelimit: {what} must be integers"),
        )
    };
    if call.keys.len() != 1 || call.args.len() != 4 {
        return Err(script_error("one key and four arguments"));
    }
    let number = |s: &str| {
        s.parse::<u64>()
            .map_err(|_| script_error("limit, window_ms and cost"))
    };
    let now = match call.args[3].as_str() {
        "" => clock_ms,
        s => s.parse::<u64>().map_err(|_| script_error("now_ms"))?,
    };
    Ok(Args {
        limit: number(&call.args[0])?,
        window: number(&call.args[1])?,
        cost: number(&call.args[2])?,
        now,
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

    /// Runs one call as Redis would run its script; `clock_ms` is the server
    /// time used when the call carries no `now_ms`.
    pub fn eval(&self, call: &ScriptCall, clock_ms: u64) -> Result<[i64; REPLY_LEN]> {
        let args = parse_args(call, clock_ms)?;
        let write = call.script.mode == Mode::Acquire;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.calls += 1;
        if state.calls.is_multiple_of(SWEEP_EVERY) {
            state.keys.retain(|_, e| e.expires_at > args.now);
        }
        let key = &call.keys[0];
        if state
            .keys
            .get(key)
            .is_some_and(|e| e.expires_at <= args.now)
        {
            state.keys.remove(key);
        }
        let decision = match call.script.algorithm {
            Algorithm::SlidingLog => sliding_log(&mut state.keys, key, &args, write)?,
            Algorithm::SlidingCounter => sliding_counter(&mut state.keys, key, &args, write)?,
        };
        Ok(decision.to_reply())
    }

    /// Acquire `cost` permits for `tenant` at `now_ms`.
    pub fn acquire(
        &self,
        policy: &Policy,
        tenant: &str,
        cost: u64,
        now_ms: u64,
    ) -> Result<Decision> {
        self.run(policy, tenant, cost, now_ms, Mode::Acquire)
    }

    /// What `acquire` would answer at `now_ms`, recording nothing.
    pub fn peek(&self, policy: &Policy, tenant: &str, cost: u64, now_ms: u64) -> Result<Decision> {
        self.run(policy, tenant, cost, now_ms, Mode::Peek)
    }

    fn run(
        &self,
        policy: &Policy,
        tenant: &str,
        cost: u64,
        now_ms: u64,
        mode: Mode,
    ) -> Result<Decision> {
        let call = policy.build_call(tenant, cost, Some(now_ms), mode)?;
        Decision::from_reply(&self.eval(&call, now_ms)?)
    }

    /// Forgets everything recorded for `tenant` under `policy`. True if anything was.
    pub fn reset(&self, policy: &Policy, tenant: &str) -> Result<bool> {
        let key = policy.key(tenant)?;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        Ok(state.keys.remove(&key).is_some())
    }

    /// Keys currently held (expired ones count until the next sweep or access).
    pub fn key_count(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys
            .len()
    }
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
    // An entry at s counts for now in [s, s + W).
    let live = |&&(ts, _): &&(u64, u64)| ts + a.window > a.now;
    let expired_runs = runs.iter().take_while(|r| !live(r)).count();
    let count: u64 = runs.iter().skip(expired_runs).map(|&(_, n)| n).sum();
    let newest = runs.iter().skip(expired_runs).last().map(|&(ts, _)| ts);

    if count + a.cost <= a.limit {
        let r = newest.map_or(a.now, |n| n.max(a.now));
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
            entry.expires_at = a.now + ttl;
        }
        return Ok(Decision {
            allowed: true,
            remaining: a.limit - count - a.cost,
            retry_after_ms: 0,
            reset_after_ms: ttl,
            now_ms: a.now,
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
    let decision = Decision {
        allowed: false,
        remaining: a.limit.saturating_sub(count),
        retry_after_ms: kth + a.window - a.now,
        reset_after_ms: newest + a.window - a.now,
        now_ms: a.now,
    };
    if write && expired_runs > 0 {
        if let Some(Entry {
            value: Value::Log(runs),
            ..
        }) = keys.get_mut(key)
        {
            runs.drain(..expired_runs);
        }
    }
    Ok(decision)
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
            entry.expires_at = a.now + 2 * a.window;
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

    #[test]
    fn idle_keys_are_dropped() {
        let e = MemoryEngine::new();
        let p = policy(Algorithm::SlidingLog, 5, 1000);
        for i in 0..10_000u64 {
            e.acquire(&p, &format!("tenant-{i}"), 1, i).unwrap();
        }
        // Every sweep keeps only keys that are still inside their window.
        assert!(
            e.key_count() <= 1000 + SWEEP_EVERY as usize,
            "{}",
            e.key_count()
        );
    }

    #[test]
    fn huge_costs_stay_cheap() {
        // One run per timestamp: a cost of 2^40 is one entry, not 2^40.
        let e = MemoryEngine::new();
        let p = policy(Algorithm::SlidingLog, 1 << 41, 1000);
        assert!(e.acquire(&p, "t", 1 << 40, 1).unwrap().allowed);
        assert!(e.acquire(&p, "t", 1 << 40, 1).unwrap().allowed);
        let denied = e.acquire(&p, "t", 1, 2).unwrap();
        assert_eq!(denied, d(false, 0, 999, 999, 2));
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
