//! The Lua scripts (embedded from `lua/`, the only copy) and the arguments of
//! one call.
//!
//! A script's text is `lua/prelude.lua` (argument parsing and validation,
//! `int()`, Redis `TIME`: what every algorithm shares) followed by the
//! algorithm's file, concatenated byte for byte: `cat lua/prelude.lua
//! lua/sliding_log.lua` is exactly [`Script::text`] of the log's acquire
//! variant. Neither file runs alone. The SHA1 is of that whole text.

use crate::error::Result;
use crate::policy::{check_now_ms, Algorithm, Policy};
use sha1::{Digest, Sha1};
use std::sync::OnceLock;

/// Shared by every script and sent in front of each; starts with `WRITABLE_LINE`.
const PRELUDE: &str = include_str!("../lua/prelude.lua");
const SLIDING_LOG: &str = include_str!("../lua/sliding_log.lua");
const SLIDING_COUNTER: &str = include_str!("../lua/sliding_counter.lua");
const BUCKETED_WINDOW: &str = include_str!("../lua/bucketed_window.lua");
/// Every script text starts with this line (the prelude's first); the peek
/// variant swaps in `READ_ONLY_LINE`.
const WRITABLE_LINE: &str = "local read_only = false\n";
const READ_ONLY_LINE: &str = "local read_only = true\n";

/// Whether a call records permits or only reports what it would decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    Acquire,
    /// Same reply as `Acquire`, records nothing; the script issues no writes.
    Peek,
}

/// One of the six scripts: an algorithm in a mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Script {
    pub algorithm: Algorithm,
    pub mode: Mode,
}

struct Compiled {
    text: String,
    sha1: String,
}

/// The text sent to Redis: the prelude, then the algorithm's file; for peek
/// the first line (the prelude's) is `local read_only = true`.
fn compile(source: &str, mode: Mode) -> Compiled {
    let prelude = PRELUDE
        .strip_prefix(WRITABLE_LINE)
        .expect("lua/prelude.lua starts with `local read_only = false`");
    let first = match mode {
        Mode::Acquire => WRITABLE_LINE,
        Mode::Peek => READ_ONLY_LINE,
    };
    let text = [first, prelude, source].concat();
    let sha1 = Sha1::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Compiled { text, sha1 }
}

impl Script {
    pub const ALL: [Script; 6] = [
        Script::new(Algorithm::SlidingLog, Mode::Acquire),
        Script::new(Algorithm::SlidingLog, Mode::Peek),
        Script::new(Algorithm::SlidingCounter, Mode::Acquire),
        Script::new(Algorithm::SlidingCounter, Mode::Peek),
        Script::new(Algorithm::BucketedWindow, Mode::Acquire),
        Script::new(Algorithm::BucketedWindow, Mode::Peek),
    ];

    pub const fn new(algorithm: Algorithm, mode: Mode) -> Script {
        Script { algorithm, mode }
    }

    fn compiled(self) -> &'static Compiled {
        static CELLS: [OnceLock<Compiled>; 6] = [
            OnceLock::new(),
            OnceLock::new(),
            OnceLock::new(),
            OnceLock::new(),
            OnceLock::new(),
            OnceLock::new(),
        ];
        let (index, source) = match (self.algorithm, self.mode) {
            (Algorithm::SlidingLog, Mode::Acquire) => (0, SLIDING_LOG),
            (Algorithm::SlidingLog, Mode::Peek) => (1, SLIDING_LOG),
            (Algorithm::SlidingCounter, Mode::Acquire) => (2, SLIDING_COUNTER),
            (Algorithm::SlidingCounter, Mode::Peek) => (3, SLIDING_COUNTER),
            (Algorithm::BucketedWindow, Mode::Acquire) => (4, BUCKETED_WINDOW),
            (Algorithm::BucketedWindow, Mode::Peek) => (5, BUCKETED_WINDOW),
        };
        CELLS[index].get_or_init(|| compile(source, self.mode))
    }

    /// The Lua source sent with EVAL or SCRIPT LOAD: `lua/prelude.lua` then
    /// the algorithm's file (first line swapped for peek), one
    /// self-contained script. Tools that run a script by hand
    /// (`redis-cli --eval`) need this text, not a file in `lua/` alone.
    pub fn text(self) -> &'static str {
        &self.compiled().text
    }

    /// Lower-case hex SHA1 of [`Script::text`], as EVALSHA expects.
    pub fn sha1(self) -> &'static str {
        &self.compiled().sha1
    }

    /// True for the peek variants, which can also run with EVALSHA_RO.
    pub fn is_read_only(self) -> bool {
        self.mode == Mode::Peek
    }
}

/// Everything one EVALSHA needs: the script, KEYS and ARGV.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptCall {
    pub script: Script,
    pub keys: Vec<String>,
    pub args: Vec<String>,
}

impl ScriptCall {
    /// Cluster slot of the call's keys (all of them share one hash tag).
    pub fn slot(&self) -> u16 {
        crate::key::slot(&self.keys[0])
    }
}

impl Policy {
    /// Validates tenant, cost and time and builds the call. `now_ms = None`
    /// lets the script read Redis `TIME` (one clock for every worker).
    pub fn build_call(
        &self,
        tenant: &str,
        cost: u64,
        now_ms: Option<u64>,
        mode: Mode,
    ) -> Result<ScriptCall> {
        let key = self.key(tenant)?;
        self.check_cost(cost)?;
        if let Some(now) = now_ms {
            check_now_ms(now)?;
        }
        let mut args = vec![
            self.limit_arg.clone(),
            self.window_arg.clone(),
            cost.to_string(),
            now_ms.map(|n| n.to_string()).unwrap_or_default(),
        ];
        if let Some(buckets) = &self.buckets_arg {
            args.push(buckets.clone());
        }
        Ok(ScriptCall {
            script: Script::new(self.algorithm(), mode),
            keys: vec![key],
            args,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn six_distinct_scripts() {
        let mut shas: Vec<&str> = Script::ALL.iter().map(|s| s.sha1()).collect();
        shas.sort_unstable();
        shas.dedup();
        assert_eq!(shas.len(), 6);
        for s in Script::ALL {
            assert_eq!(s.sha1().len(), 40);
            assert!(s.text().contains("redis.call"));
            let first = s.text().lines().next().unwrap();
            assert_eq!(first == "local read_only = true", s.is_read_only());
        }
    }

    #[test]
    fn text_is_the_prelude_then_the_script() {
        // Byte for byte `cat lua/prelude.lua lua/<algorithm>.lua`, as
        // docs/protocol.md tells anyone who runs a script by hand.
        assert_eq!(
            Script::new(Algorithm::SlidingLog, Mode::Acquire).text(),
            format!("{PRELUDE}{SLIDING_LOG}")
        );
        assert_eq!(
            Script::new(Algorithm::SlidingCounter, Mode::Acquire).text(),
            format!("{PRELUDE}{SLIDING_COUNTER}")
        );
        assert_eq!(
            Script::new(Algorithm::BucketedWindow, Mode::Acquire).text(),
            format!("{PRELUDE}{BUCKETED_WINDOW}")
        );
        // The mode line is the prelude's first and exists once: an
        // algorithm's file neither declares it nor starts with it.
        assert!(PRELUDE.starts_with(WRITABLE_LINE));
        for source in [SLIDING_LOG, SLIDING_COUNTER, BUCKETED_WINDOW] {
            assert!(
                !source.lines().any(|l| l.contains("local read_only =")),
                "{source:.80}"
            );
            assert!(
                source.contains("lua/prelude.lua"),
                "the header names the prelude"
            );
        }
    }

    #[test]
    fn peek_differs_from_acquire_only_in_the_first_line() {
        for algorithm in Algorithm::ALL {
            let acquire = Script::new(algorithm, Mode::Acquire).text();
            let peek = Script::new(algorithm, Mode::Peek).text();
            let (a_first, a_rest) = acquire.split_once('\n').unwrap();
            let (p_first, p_rest) = peek.split_once('\n').unwrap();
            assert_eq!(a_first, "local read_only = false");
            assert_eq!(p_first, "local read_only = true");
            assert_eq!(a_rest, p_rest, "{algorithm:?}");
            let declared = |text: &str| {
                text.lines()
                    .filter(|l| l.starts_with("local read_only"))
                    .count()
            };
            assert_eq!((declared(acquire), declared(peek)), (1, 1));
        }
    }

    #[test]
    fn sha1_is_of_the_text() {
        // SHA1("abc") from FIPS 180 as a check of the hex encoding.
        let abc: String = Sha1::digest(b"abc")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(abc, "a9993e364706816aba3e25717850c26c9cd0d89d");
        // Every script's SHA1 is the digest of the text it sends with EVAL
        // (the peek variants included), so EVALSHA names that exact text.
        for s in Script::ALL {
            let digest: String = Sha1::digest(s.text().as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(s.sha1(), digest, "{s:?}");
        }
    }

    #[test]
    fn call_arguments_are_integer_strings() {
        let p = Policy::new("rl", "geocode", Algorithm::SlidingLog, 600, 60_000).unwrap();
        let c = p
            .build_call("tenant-17", 2, Some(100_000_000_000_000), Mode::Acquire)
            .unwrap();
        assert_eq!(c.keys, vec!["rl:{geocode:tenant-17}:log:60000"]);
        assert_eq!(c.args, vec!["600", "60000", "2", "100000000000000"]);
        let server_time = p.build_call("t", 1, None, Mode::Peek).unwrap();
        assert_eq!(server_time.args[3], "");
        assert!(server_time.script.is_read_only());
        assert_eq!(
            p.build_call("t", 1, Some((1 << 52) + 1), Mode::Acquire)
                .unwrap_err()
                .field(),
            Some("now_ms")
        );
        assert_eq!(
            p.build_call("", 1, None, Mode::Acquire)
                .unwrap_err()
                .field(),
            Some("tenant")
        );
        assert_eq!(
            p.build_call("t", 601, None, Mode::Acquire)
                .unwrap_err()
                .field(),
            Some("cost")
        );
        // The bucketed window carries its bucket count as ARGV[5].
        let b = Policy::with_buckets(
            "rl",
            "geocode",
            Algorithm::BucketedWindow,
            600,
            60_000,
            Some(60),
        )
        .unwrap();
        let c = b
            .build_call("tenant-17", 1, Some(5), Mode::Acquire)
            .unwrap();
        assert_eq!(c.keys, vec!["rl:{geocode:tenant-17}:bucketed:60000:60"]);
        assert_eq!(c.args, vec!["600", "60000", "1", "5", "60"]);
    }
}
