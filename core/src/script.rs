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
const MULTI_LIMIT: &str = include_str!("../lua/multi_limit.lua");
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

/// What a script checks: one limit of an algorithm, or several limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScriptKind {
    Single(Algorithm),
    /// A policy of several limits (`lua/multi_limit.lua` around every algorithm).
    MultiLimit,
}

/// One of the eight scripts: an algorithm (or several limits) in a mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Script {
    pub kind: ScriptKind,
    pub mode: Mode,
}

struct Compiled {
    text: String,
    sha1: String,
}

impl Compiled {
    fn new(text: String) -> Compiled {
        let sha1 = Sha1::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Compiled { text, sha1 }
    }
}

/// The prelude without its first line (the mode line), and the mode line
/// for `mode`.
fn prelude_and_mode_line(mode: Mode) -> (&'static str, &'static str) {
    let prelude = PRELUDE
        .strip_prefix(WRITABLE_LINE)
        .expect("lua/prelude.lua starts with `local read_only = false`");
    let first = match mode {
        Mode::Acquire => WRITABLE_LINE,
        Mode::Peek => READ_ONLY_LINE,
    };
    (prelude, first)
}

/// The text sent to Redis: the prelude, then the algorithm's file; for peek
/// the first line (the prelude's) is `local read_only = true`.
fn compile(source: &str, mode: Mode) -> Compiled {
    let (prelude, first) = prelude_and_mode_line(mode);
    Compiled::new([first, prelude, source].concat())
}

/// The multi-limit text: the mode line, each algorithm's whole script (the
/// prelude without its mode line, then the algorithm's file) as a local
/// function of `(KEYS, ARGV, read_only)` named after the algorithm, then
/// `lua/multi_limit.lua`, which calls them. Built from the same files, so
/// the algorithms exist once.
fn compile_multi(mode: Mode) -> Compiled {
    let (prelude, first) = prelude_and_mode_line(mode);
    let mut text = String::from(first);
    for (algorithm, source) in [
        (Algorithm::SlidingLog, SLIDING_LOG),
        (Algorithm::SlidingCounter, SLIDING_COUNTER),
        (Algorithm::BucketedWindow, BUCKETED_WINDOW),
    ] {
        text.push_str(&format!(
            "local function {}(KEYS, ARGV, read_only)\n",
            algorithm.as_str()
        ));
        text.push_str(prelude);
        text.push_str(source);
        text.push_str("end\n");
    }
    text.push_str(MULTI_LIMIT);
    Compiled::new(text)
}

impl Script {
    pub const ALL: [Script; 8] = [
        Script::new(Algorithm::SlidingLog, Mode::Acquire),
        Script::new(Algorithm::SlidingLog, Mode::Peek),
        Script::new(Algorithm::SlidingCounter, Mode::Acquire),
        Script::new(Algorithm::SlidingCounter, Mode::Peek),
        Script::new(Algorithm::BucketedWindow, Mode::Acquire),
        Script::new(Algorithm::BucketedWindow, Mode::Peek),
        Script::multi_limit(Mode::Acquire),
        Script::multi_limit(Mode::Peek),
    ];

    pub const fn new(algorithm: Algorithm, mode: Mode) -> Script {
        Script {
            kind: ScriptKind::Single(algorithm),
            mode,
        }
    }

    /// The script of a policy of several limits.
    pub const fn multi_limit(mode: Mode) -> Script {
        Script {
            kind: ScriptKind::MultiLimit,
            mode,
        }
    }

    /// The algorithm of a one-limit script; `None` for several limits.
    pub fn algorithm(self) -> Option<Algorithm> {
        match self.kind {
            ScriptKind::Single(algorithm) => Some(algorithm),
            ScriptKind::MultiLimit => None,
        }
    }

    fn compiled(self) -> &'static Compiled {
        static CELLS: [OnceLock<Compiled>; 8] = [
            OnceLock::new(),
            OnceLock::new(),
            OnceLock::new(),
            OnceLock::new(),
            OnceLock::new(),
            OnceLock::new(),
            OnceLock::new(),
            OnceLock::new(),
        ];
        let mode_index = match self.mode {
            Mode::Acquire => 0,
            Mode::Peek => 1,
        };
        let (index, source) = match self.kind {
            ScriptKind::Single(Algorithm::SlidingLog) => (0, SLIDING_LOG),
            ScriptKind::Single(Algorithm::SlidingCounter) => (2, SLIDING_COUNTER),
            ScriptKind::Single(Algorithm::BucketedWindow) => (4, BUCKETED_WINDOW),
            ScriptKind::MultiLimit => {
                return CELLS[6 + mode_index].get_or_init(|| compile_multi(self.mode));
            }
        };
        CELLS[index + mode_index].get_or_init(|| compile(source, self.mode))
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

    /// The first key and its algorithm: what an error about the call's data
    /// (WRONGTYPE) names. For several limits the multi-limit script's reply
    /// names the limit at fault, and core's error table takes that instead.
    pub fn first_key(&self) -> (&str, Algorithm) {
        let key = self.keys.first().map_or("", String::as_str);
        let algorithm = match self.script.kind {
            ScriptKind::Single(algorithm) => algorithm,
            ScriptKind::MultiLimit => self
                .args
                .get(2)
                .and_then(|name| Algorithm::parse(name).ok())
                .unwrap_or(crate::policy::DEFAULT_ALGORITHM),
        };
        (key, algorithm)
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
        let keys = self.keys(tenant)?;
        self.check_cost(cost)?;
        if let Some(now) = now_ms {
            check_now_ms(now)?;
        }
        let now_arg = now_ms.map(|n| n.to_string()).unwrap_or_default();
        let args = match self.rules() {
            [rule] => {
                let mut args = vec![
                    rule.limit_arg.clone(),
                    rule.window_arg.clone(),
                    cost.to_string(),
                    now_arg,
                ];
                if let Some(buckets) = &rule.buckets_arg {
                    args.push(buckets.clone());
                }
                args
            }
            rules => {
                let mut args = Vec::with_capacity(2 + 4 * rules.len());
                args.push(cost.to_string());
                args.push(now_arg);
                for rule in rules {
                    args.push(rule.limit.algorithm.as_str().to_owned());
                    args.push(rule.limit_arg.clone());
                    args.push(rule.window_arg.clone());
                    args.push(rule.buckets_arg.clone().unwrap_or_default());
                }
                args
            }
        };
        Ok(ScriptCall {
            script: self.script(mode),
            keys,
            args,
        })
    }

    /// The script this policy's calls run in `mode`: its algorithm's for
    /// one limit, the multi-limit script for several.
    pub fn script(&self, mode: Mode) -> Script {
        match self.limits() {
            [one] => Script::new(one.algorithm, mode),
            _ => Script::multi_limit(mode),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eight_distinct_scripts() {
        let mut shas: Vec<&str> = Script::ALL.iter().map(|s| s.sha1()).collect();
        shas.sort_unstable();
        shas.dedup();
        assert_eq!(shas.len(), 8);
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
    fn the_multi_limit_text_wraps_each_whole_script() {
        let text = Script::multi_limit(Mode::Acquire).text();
        let body = PRELUDE.strip_prefix(WRITABLE_LINE).unwrap();
        for (algorithm, source) in [
            (Algorithm::SlidingLog, SLIDING_LOG),
            (Algorithm::SlidingCounter, SLIDING_COUNTER),
            (Algorithm::BucketedWindow, BUCKETED_WINDOW),
        ] {
            let wrapped = format!(
                "local function {}(KEYS, ARGV, read_only)\n{body}{source}end\n",
                algorithm.as_str()
            );
            assert!(text.contains(&wrapped), "{algorithm:?}");
        }
        assert!(text.ends_with(MULTI_LIMIT));
        assert!(MULTI_LIMIT.contains(&format!(
            "\nlocal max_limits = {}\n",
            crate::decision::MAX_LIMITS
        )));
    }

    #[test]
    fn several_limits_make_one_call_over_every_key() {
        use crate::policy::Limit;
        let mut bucketed = Limit::new(Algorithm::BucketedWindow, 600, 60_000);
        bucketed.buckets = Some(60);
        let p = Policy::with_limits(
            "rl",
            "geo",
            &[Limit::new(Algorithm::SlidingLog, 20, 1000), bucketed],
        )
        .unwrap();
        let c = p.build_call("t", 2, Some(7), Mode::Acquire).unwrap();
        assert_eq!(c.script, Script::multi_limit(Mode::Acquire));
        assert_eq!(
            c.keys,
            ["rl:{geo:t}:log:1000", "rl:{geo:t}:bucketed:60000:60"]
        );
        assert_eq!(
            c.args,
            [
                "2",
                "7",
                "sliding_log",
                "20",
                "1000",
                "",
                "bucketed_window",
                "600",
                "60000",
                "60"
            ]
        );
        assert_eq!(crate::key::slot(&c.keys[0]), crate::key::slot(&c.keys[1]));
        // One limit is the plain policy, its script and its call.
        let one = Policy::with_limits("rl", "geo", &[Limit::new(Algorithm::SlidingLog, 20, 1000)])
            .unwrap();
        assert_eq!(
            one,
            Policy::new("rl", "geo", Algorithm::SlidingLog, 20, 1000).unwrap()
        );
        assert_eq!(
            one.script(Mode::Peek),
            Script::new(Algorithm::SlidingLog, Mode::Peek)
        );
    }

    #[test]
    fn peek_differs_from_acquire_only_in_the_first_line() {
        let kinds = Algorithm::ALL
            .map(ScriptKind::Single)
            .into_iter()
            .chain([ScriptKind::MultiLimit]);
        for kind in kinds {
            let acquire = Script {
                kind,
                mode: Mode::Acquire,
            }
            .text();
            let peek = Script {
                kind,
                mode: Mode::Peek,
            }
            .text();
            let (a_first, a_rest) = acquire.split_once('\n').unwrap();
            let (p_first, p_rest) = peek.split_once('\n').unwrap();
            assert_eq!(a_first, "local read_only = false");
            assert_eq!(p_first, "local read_only = true");
            assert_eq!(a_rest, p_rest, "{kind:?}");
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
