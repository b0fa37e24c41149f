//! `slidelimit simulate`: the seed scenario, replayed through a naive fixed
//! window (the contrast), the sliding log, the sliding counter and the
//! bucketed window, with an independent audit of the largest count admitted
//! in any rolling window and the state each holds per tenant.
//!
//! Everything runs on simulated time (caller time), in one deterministic order,
//! so the same flags always print the same report, on the embedded engine and
//! on a real Redis alike.

use crate::Failure;
use clap::{Args, ValueEnum};
use slidelimit::{blocking, Algorithm, Error, MemoryEngine, Options, Policy, Result};
use slidelimit_core::MAX_NOW_MS;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::time::Duration;

/// 2026-01-01T00:00:00Z: the simulated day. Only the time of day is shown.
const DEMO_DAY_MS: u64 = 1_767_225_600_000;
const DAY_MS: u64 = 86_400_000;
const TENANT: &str = "demo";
const RESOURCE: &str = "simulate";
/// Rows of the steady part are merged at most this many seconds at a time.
const MAX_ROW_SECONDS: u64 = 10;
const BAR_WIDTH: usize = 4;
/// Redis connections of one limiter in `simulate --redis`.
const MAX_CONNECTIONS: u32 = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Pattern {
    /// The seed scenario: `limit` requests in the second before a fixed-window
    /// boundary, `limit` in the second after it, then a steady --rate.
    Burst,
    /// Only the steady --rate, from --start on.
    Steady,
    /// Three rounds, two windows apart: `limit` requests in the last 100 ms
    /// before a fixed-window boundary and `limit` in the first 100 ms after it.
    Boundary,
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Permits per window, at most 10000 (the most the sliding log accepts).
    #[arg(long, default_value_t = 600)]
    limit: u64,
    /// The window in milliseconds.
    #[arg(long, default_value_t = 60_000)]
    window_ms: u64,
    /// Simulated workers sharing the budget; the requests are spread over
    /// them, the total stays the same.
    #[arg(long, default_value_t = 8)]
    workers: u32,
    #[arg(long, value_enum, default_value_t = Pattern::Burst)]
    pattern: Pattern,
    /// Simulated start: HH:MM[:SS] (UTC, on 2026-01-01) or Unix milliseconds.
    #[arg(long, default_value = "12:00:00")]
    start: String,
    /// Requests per second of the steady part.
    #[arg(long, default_value_t = 20)]
    rate: u64,
    /// Seconds of steady traffic (after the bursts, for --pattern burst).
    #[arg(long, default_value_t = 120)]
    duration_s: u64,
    /// Seed of the jitter of request times within their second.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Buckets of the bucketed window (must divide --window-ms). Default: 60
    /// when 60 divides the window, else the largest divisor of it below 60.
    #[arg(long)]
    buckets: Option<u64>,
    /// Run the three slidelimit algorithms on this Redis (caller time = simulated
    /// time; the demo keys are reset first) instead of the embedded engine.
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
    /// Namespace of the demo keys (with --redis).
    #[arg(long, default_value = "slidelimit-sim")]
    namespace: String,
    /// Per-call timeout with --redis.
    #[arg(long, default_value_t = slidelimit_core::DEFAULT_TIMEOUT_MS)]
    timeout_ms: u64,
}

/// The most requests one simulation makes (the demo makes 3,600).
const MAX_REQUESTS: u64 = 5_000_000;

pub fn run(args: &SimulateArgs) -> std::result::Result<(), Failure> {
    let scenario = Scenario::new(args)?;
    let mut limiters = vec![Limiter::Fixed(FixedWindow::new(args.limit, args.window_ms))];
    for algorithm in Algorithm::ALL {
        let buckets = (algorithm == Algorithm::BucketedWindow).then_some(scenario.buckets);
        let policy = Policy::with_buckets(
            &args.namespace,
            RESOURCE,
            algorithm,
            args.limit,
            args.window_ms,
            buckets,
        )?;
        limiters.push(match &args.redis {
            None => Limiter::Memory(MemoryEngine::new(), policy),
            Some(url) => Limiter::Redis(connect_workers(url, policy, args)?),
        });
    }
    let outcomes = limiters
        .iter_mut()
        .map(|l| l.run(&scenario.events))
        .collect::<Result<Vec<_>>>()?;
    let engine = match &args.redis {
        None => "embedded (in memory)".to_owned(),
        Some(url) => format!("Redis at {}", crate::without_credentials(url)),
    };
    let report = render(&scenario, &outcomes, &engine);
    std::io::stdout()
        .lock()
        .write_all(report.as_bytes())
        .map_err(Failure::io)
}

/// A connection per worker (up to MAX_CONNECTIONS, then shared in turn), all
/// on the same keys; the demo keys are reset first so every run starts from
/// an empty budget.
fn connect_workers(
    url: &str,
    policy: Policy,
    args: &SimulateArgs,
) -> Result<Vec<blocking::Limiter>> {
    let options = || Options {
        timeout: Duration::from_millis(args.timeout_ms),
        ..Options::default()
    };
    let url = crate::one_url(url, "simulate runs on one standalone Redis")?;
    let workers = (0..args.workers.min(MAX_CONNECTIONS))
        .map(|_| blocking::Limiter::connect(url, policy.clone(), options()))
        .collect::<Result<Vec<_>>>()?;
    workers[0].reset(TENANT)?;
    Ok(workers)
}

/// One simulated request: when, and which worker sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Event {
    at_ms: u64,
    worker: u32,
}

struct Scenario {
    limit: u64,
    window_ms: u64,
    buckets: u64,
    workers: u32,
    start_ms: u64,
    pattern: Pattern,
    seed: u64,
    /// A human summary of what is sent when.
    description: String,
    events: Vec<Event>,
}

/// splitmix64: a tiny seeded generator, so the jitter needs no dependency and
/// the report is the same on every machine.
struct Jitter(u64);

impl Jitter {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n.max(1)
    }
}

struct Builder {
    events: Vec<Event>,
    workers: u32,
    next_worker: u32,
    jitter: Jitter,
}

impl Builder {
    /// `n` requests at random milliseconds of [from, from + span), handed to
    /// the workers in turn.
    fn burst(&mut self, n: u64, from: u64, span: u64) {
        for _ in 0..n {
            let at_ms = from + self.jitter.below(span);
            self.push(at_ms);
        }
    }

    /// `rate` requests per second for `seconds`, evenly spaced with jitter.
    fn steady(&mut self, rate: u64, from: u64, seconds: u64) {
        let gap = (1000 / rate.max(1)).max(1);
        for second in 0..seconds {
            for j in 0..rate {
                let at_ms = from + second * 1000 + j * 1000 / rate + self.jitter.below(gap);
                self.push(at_ms);
            }
        }
    }

    fn push(&mut self, at_ms: u64) {
        self.events.push(Event {
            at_ms,
            worker: self.next_worker,
        });
        self.next_worker = (self.next_worker + 1) % self.workers;
    }
}

fn invalid(field: &'static str, problem: impl std::fmt::Display) -> Error {
    Error::invalid(field, problem)
}

impl Scenario {
    fn new(args: &SimulateArgs) -> Result<Scenario> {
        // Policy::new is the one place limit and window_ms are validated. As
        // a sliding log it also caps the limit at MAX_LOG_LIMIT, which bounds
        // the bursts of `limit` requests the patterns send.
        Policy::new(
            "sim",
            RESOURCE,
            Algorithm::SlidingLog,
            args.limit,
            args.window_ms,
        )?;
        // And the bucketed window's count, before any request is made.
        let buckets = args.buckets.unwrap_or_else(|| {
            (1..=slidelimit_core::DEFAULT_BUCKETS)
                .rev()
                .find(|n| args.window_ms.is_multiple_of(*n))
                .unwrap_or(1)
        });
        Policy::with_buckets(
            "sim",
            RESOURCE,
            Algorithm::BucketedWindow,
            args.limit,
            args.window_ms,
            Some(buckets),
        )?;
        if args.workers == 0 {
            return Err(invalid("workers", "must be at least 1"));
        }
        if !(1..=100_000).contains(&args.rate) {
            return Err(invalid("rate", "must be between 1 and 100000"));
        }
        if args.duration_s > 86_400 {
            return Err(invalid("duration_s", "must be at most 86400 (one day)"));
        }
        // Checked with or without --redis: a flag given is never ignored.
        slidelimit_core::check_timeout_ms(args.timeout_ms)?;
        // Every request is held in memory, four times over (one outcome per
        // limiter): bounded before any is made.
        let steady = args.rate * args.duration_s;
        let planned = match args.pattern {
            Pattern::Burst => args.limit.saturating_mul(2).saturating_add(steady),
            Pattern::Steady => steady,
            Pattern::Boundary => args.limit.saturating_mul(6),
        };
        if planned > MAX_REQUESTS {
            return Err(invalid(
                "duration_s",
                format!(
                    "the run would send {planned} requests, more than {MAX_REQUESTS}; \
                     lower --rate, --duration-s or --limit"
                ),
            ));
        }
        let start_ms = parse_start(&args.start)?;
        let (limit, w) = (args.limit, args.window_ms);
        let mut b = Builder {
            events: Vec::new(),
            workers: args.workers,
            next_worker: 0,
            jitter: Jitter(args.seed),
        };
        // The first fixed-window boundary after the start: where a fixed
        // window is weakest.
        let boundary = (start_ms / w + 1) * w;
        let rate = args.rate;
        let description = match args.pattern {
            Pattern::Burst => {
                let span = 1000.min(w);
                let first = boundary.saturating_sub(span).max(start_ms);
                b.burst(limit, first, boundary - first);
                b.burst(limit, boundary, span);
                let steady_from = boundary + span;
                b.steady(rate, steady_from, args.duration_s);
                format!(
                    "{} requests at {}, {} at {}, then {rate}/s for {} s",
                    thousands(limit),
                    clock(first),
                    thousands(limit),
                    clock(boundary),
                    args.duration_s
                )
            }
            Pattern::Steady => {
                b.steady(rate, start_ms, args.duration_s);
                format!(
                    "{rate} requests per second from {} for {} s",
                    clock(start_ms),
                    args.duration_s
                )
            }
            Pattern::Boundary => {
                let span = 100.min(w);
                for round in 0..3 {
                    let at = boundary + 2 * round * w;
                    b.burst(limit, at - span, span);
                    b.burst(limit, at, span);
                }
                format!(
                    "3 rounds, 2 windows apart from {}: {} requests in the {span} ms \
                     before a fixed-window boundary, {} in the {span} ms after it",
                    clock(boundary),
                    thousands(limit),
                    thousands(limit)
                )
            }
        };
        if b.events.is_empty() {
            return Err(invalid("duration_s", "the pattern sends no request"));
        }
        b.events.sort_unstable();
        // Every request's time goes to the limiters as now_ms: the whole run
        // must fit below core's bound, not only its start.
        let last = b.events.last().map_or(start_ms, |e| e.at_ms);
        if last > MAX_NOW_MS {
            return Err(invalid(
                "start",
                format!("the run would end at {last} ms, past 2^52 ms; start earlier"),
            ));
        }
        Ok(Scenario {
            limit,
            window_ms: w,
            buckets,
            workers: args.workers,
            start_ms,
            pattern: args.pattern,
            seed: args.seed,
            description,
            events: b.events,
        })
    }
}

/// HH:MM[:SS] on the demo day, or Unix milliseconds.
fn parse_start(s: &str) -> Result<u64> {
    if let Ok(ms) = s.parse::<u64>() {
        if ms > MAX_NOW_MS {
            return Err(invalid("start", "must be at most 2^52 Unix milliseconds"));
        }
        return Ok(ms);
    }
    let parts: Vec<&str> = s.split(':').collect();
    let numbers: Option<Vec<u64>> = parts.iter().map(|p| p.parse::<u64>().ok()).collect();
    match numbers.as_deref() {
        Some([h, m]) if *h < 24 && *m < 60 => Ok(DEMO_DAY_MS + (h * 3600 + m * 60) * 1000),
        Some([h, m, sec]) if *h < 24 && *m < 60 && *sec < 60 => {
            Ok(DEMO_DAY_MS + (h * 3600 + m * 60 + sec) * 1000)
        }
        _ => Err(invalid(
            "start",
            format!("expected HH:MM[:SS] or Unix milliseconds, got {s:?}"),
        )),
    }
}

/// The contrast, NOT part of slidelimit: the naive fixed-window counter
/// (INCR a key named after floor(now / W), allow while it is <= limit).
struct FixedWindow {
    limit: u64,
    window_ms: u64,
    window: u64,
    count: u64,
}

impl FixedWindow {
    fn new(limit: u64, window_ms: u64) -> Self {
        FixedWindow {
            limit,
            window_ms,
            window: u64::MAX,
            count: 0,
        }
    }

    fn allow(&mut self, at_ms: u64) -> bool {
        let window = at_ms / self.window_ms;
        if window != self.window {
            self.window = window;
            self.count = 0;
        }
        if self.count < self.limit {
            self.count += 1;
            true
        } else {
            false
        }
    }
}

enum Limiter {
    Fixed(FixedWindow),
    Memory(MemoryEngine, Policy),
    /// Connections to Redis, used by the workers in turn.
    Redis(Vec<blocking::Limiter>),
}

/// What one limiter did with the scenario.
struct Outcome {
    name: &'static str,
    kind: Kind,
    /// Times of the admitted requests, in order.
    allowed: Vec<u64>,
    /// One flag per event, in event order.
    verdicts: Vec<bool>,
    /// The most the tenant's key held at once (embedded engine only): log
    /// entries, counter windows or buckets.
    peak_held: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Fixed,
    Log,
    Counter,
    Bucketed,
}

impl Limiter {
    fn kind(&self) -> Kind {
        let algorithm = match self {
            Limiter::Fixed(_) => return Kind::Fixed,
            Limiter::Memory(_, p) => p.algorithm(),
            Limiter::Redis(w) => w[0].policy().algorithm(),
        };
        match algorithm {
            Algorithm::SlidingLog => Kind::Log,
            Algorithm::SlidingCounter => Kind::Counter,
            Algorithm::BucketedWindow => Kind::Bucketed,
        }
    }

    fn run(&mut self, events: &[Event]) -> Result<Outcome> {
        let kind = self.kind();
        let name = match kind {
            Kind::Fixed => "fixed window*",
            Kind::Log => "sliding log",
            Kind::Counter => "sliding counter",
            Kind::Bucketed => "bucketed window",
        };
        let key = match self {
            Limiter::Memory(_, policy) => Some(policy.key(TENANT)?),
            _ => None,
        };
        let mut out = Outcome {
            name,
            kind,
            allowed: Vec::new(),
            verdicts: Vec::with_capacity(events.len()),
            peak_held: None,
        };
        for e in events {
            let allowed = match self {
                Limiter::Fixed(f) => f.allow(e.at_ms),
                Limiter::Memory(engine, policy) => {
                    let allowed = engine.acquire(policy, TENANT, 1, e.at_ms)?.allowed;
                    if let Some(key) = &key {
                        let held = engine.held(key);
                        out.peak_held = Some(out.peak_held.unwrap_or(0).max(held));
                    }
                    allowed
                }
                Limiter::Redis(conns) => {
                    conns[e.worker as usize % conns.len()]
                        .acquire_at(TENANT, 1, e.at_ms)?
                        .allowed
                }
            };
            out.verdicts.push(allowed);
            if allowed {
                out.allowed.push(e.at_ms);
            }
        }
        Ok(out)
    }
}

/// The largest number of admitted requests in any (t - W, t], found by an
/// audit that knows nothing about the limiters: for each admitted time t
/// (the maximum is reached at one), count the admitted times above t - W.
/// Returns (count, first, last) of the first window reaching it.
fn max_rolling(allowed: &[u64], window_ms: u64) -> (u64, u64, u64) {
    let mut best = (0, 0, 0);
    let mut i = 0;
    for (j, &t) in allowed.iter().enumerate() {
        while allowed[i] + window_ms <= t {
            i += 1;
        }
        let count = (j - i + 1) as u64;
        if count > best.0 {
            best = (count, allowed[i], t);
        }
    }
    best
}

/// Admitted requests in (end - W, end].
fn rolling_at(allowed: &[u64], window_ms: u64, end: u64) -> u64 {
    let hi = allowed.partition_point(|&t| t <= end);
    let lo = allowed.partition_point(|&t| t + window_ms <= end);
    (hi - lo) as u64
}

fn clock(ms: u64) -> String {
    let s = (ms % DAY_MS) / 1000;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

fn clock_ms(ms: u64) -> String {
    format!("{}.{:03}", clock(ms), ms % 1000)
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn window_label(window_ms: u64) -> String {
    if window_ms.is_multiple_of(1000) {
        format!("{} s", thousands(window_ms / 1000))
    } else {
        format!("{} ms", thousands(window_ms))
    }
}

/// Milliseconds as seconds, rounded to a tenth: `1.9 s`.
fn seconds(ms: u64) -> String {
    let tenths = (ms + 50) / 100;
    format!("{}.{} s", tenths / 10, tenths % 10)
}

/// Per-second totals: requests sent, and admitted per limiter.
struct Second {
    sent: u64,
    allowed: Vec<u64>,
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum Share {
    Nothing,
    Some,
    All,
}

fn share(allowed: u64, sent: u64) -> Share {
    match allowed {
        0 => Share::Nothing,
        a if a == sent => Share::All,
        _ => Share::Some,
    }
}

/// A row of the timeline: seconds [from, to] (absolute second numbers).
struct Row {
    from: u64,
    to: u64,
}

/// Seconds with the same traffic and the same kind of verdict per limiter
/// (nothing, some, all admitted) share a row, at most MAX_ROW_SECONDS and
/// never across a multiple of ten seconds, so bursts get rows of their own and
/// the steady part stays short. Runs of silence are one row.
fn rows(seconds: &BTreeMap<u64, Second>, first: u64) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    let key = |s: &Second| -> (u64, Vec<Share>) {
        (
            s.sent,
            s.allowed.iter().map(|&a| share(a, s.sent)).collect(),
        )
    };
    // Only the seconds that saw requests are held: a quiet stretch, however
    // long (a window of a year leaves most of them quiet), is one row.
    let mut next = first;
    for (&at, s) in seconds {
        if at > next {
            match rows.last_mut() {
                Some(row) if !seconds.contains_key(&row.to) => row.to = at - 1,
                _ => rows.push(Row {
                    from: next,
                    to: at - 1,
                }),
            }
        }
        next = at + 1;
        if let Some(row) = rows.last_mut() {
            if let Some(prev) = seconds.get(&row.to).filter(|_| row.to + 1 == at) {
                let joins = key(prev) == key(s)
                    && at - row.from < MAX_ROW_SECONDS
                    && !at.is_multiple_of(MAX_ROW_SECONDS);
                if joins {
                    row.to = at;
                    continue;
                }
            }
        }
        rows.push(Row { from: at, to: at });
    }
    rows
}

fn bar(allowed: u64, sent: u64) -> String {
    if sent == 0 {
        return " ".repeat(BAR_WIDTH);
    }
    // Round up so that one admitted request is visible.
    let filled = ((allowed * BAR_WIDTH as u64).div_ceil(sent)) as usize;
    format!("{}{}", "█".repeat(filled), "·".repeat(BAR_WIDTH - filled))
}

fn render(sc: &Scenario, outcomes: &[Outcome], engine: &str) -> String {
    let mut o = String::new();
    let w = sc.window_ms;
    let wl = window_label(w);
    let total = sc.events.len() as u64;
    let pattern = sc
        .pattern
        .to_possible_value()
        .map_or_else(String::new, |v| v.get_name().to_owned());
    let _ = writeln!(
        o,
        "slidelimit simulate: limit {} per {wl}, pattern {pattern}, seed {}",
        thousands(sc.limit),
        sc.seed
    );
    o.push_str(&wrap(&format!("  {}", sc.description), 88, "  "));
    let _ = writeln!(
        o,
        "  {} requests from {} workers sharing one budget; engine: {engine}",
        thousands(total),
        sc.workers
    );
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{:<16} {:>8} {:>8}   most allowed in any rolling {wl}",
        "limiter", "allowed", "denied"
    );
    let log_allowed = outcomes
        .iter()
        .find(|out| out.kind == Kind::Log)
        .map(|out| out.allowed.len() as u64);
    let mut words = Vec::new();
    let mut held = Vec::new();
    for out in outcomes {
        let allowed = out.allowed.len() as u64;
        let (peak, first, last) = max_rolling(&out.allowed, w);
        let detail = if peak > sc.limit {
            format!(
                "over {}: {}-{} ({})",
                thousands(sc.limit),
                clock_ms(first),
                clock_ms(last),
                seconds(last - first)
            )
        } else {
            format!("never over {}", thousands(sc.limit))
        };
        // The tenant's state at its largest, in the units Redis stores.
        let unit = match out.kind {
            Kind::Fixed => "",
            Kind::Log => " entries",
            Kind::Counter => " window counts",
            Kind::Bucketed => " bucket counts",
        };
        if let Some(n) = out.peak_held {
            held.push(format!("{} {}{unit}", out.name, thousands(n)));
        }
        let _ = writeln!(
            o,
            "{:<16} {:>8} {:>8}   {:>7}  {detail}",
            out.name,
            thousands(allowed),
            thousands(total - allowed),
            thousands(peak),
        );
        let mut line = explain(out.kind, peak, last - first, sc.limit, &wl);
        if let (Kind::Bucketed, true, Some(log)) = (out.kind, peak <= sc.limit, log_allowed) {
            let g = sc.window_ms / sc.buckets;
            let _ = write!(
                line,
                " Its state is at most {} bucket counts per tenant ({} buckets + 1), \
                 whatever the limit, where the log holds one entry per permit; the price \
                 is that a permit counts until its {} bucket's last millisecond plus the \
                 window, so it admitted {} where the log admitted {}.",
                sc.buckets + 1,
                sc.buckets,
                window_label(g),
                thousands(allowed),
                thousands(log)
            );
        }
        words.push(line);
    }
    let _ = writeln!(
        o,
        "* the contrast: a naive fixed-window counter written for this demo, not part of slidelimit"
    );
    if !held.is_empty() {
        // Measured on the engine, whose state mirrors the Redis key's.
        o.push_str(&wrap(
            &format!(
                "State per tenant at its largest, on the embedded engine: {}.",
                held.join(", ")
            ),
            88,
            "  ",
        ));
    }
    let _ = writeln!(o);
    for line in words {
        o.push_str(&wrap(&line, 88, "  "));
    }
    let _ = writeln!(o);
    render_timeline(&mut o, sc, outcomes);
    o
}

/// One sentence per limiter, from the audited numbers.
fn explain(kind: Kind, peak: u64, span_ms: u64, limit: u64, wl: &str) -> String {
    let (peak_s, limit_s) = (thousands(peak), thousands(limit));
    match kind {
        Kind::Fixed if peak > limit => format!(
            "- Fixed window: {peak_s} allowed within {}, {}.{}x the limit: its count \
             starts again at every window boundary.",
            seconds(span_ms),
            peak / limit,
            peak * 10 / limit % 10
        ),
        Kind::Fixed => format!("- Fixed window: at most {peak_s} in any {wl} with this traffic."),
        Kind::Log if peak <= limit => format!(
            "- Sliding log: never more than {limit_s} in any {wl}, across all workers (exact)."
        ),
        Kind::Log => format!("- Sliding log: {peak_s} in one {wl}: a BUG, please report it."),
        Kind::Counter if peak > limit => format!(
            "- Sliding counter: up to {peak_s} in one {wl} (approximate): it weighs the \
             previous window as if its requests had been spread evenly, and a burst \
             at a window's end was not."
        ),
        Kind::Counter => format!(
            "- Sliding counter: at most {peak_s} in any {wl} with this traffic (approximate)."
        ),
        Kind::Bucketed if peak <= limit => format!(
            "- Bucketed window: never more than {limit_s} in any {wl}, across all workers \
             (exact)."
        ),
        Kind::Bucketed => {
            format!("- Bucketed window: {peak_s} in one {wl}: a BUG, please report it.")
        }
    }
}

/// Wraps words at `width` columns; continuation lines get `indent`.
fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    // The first line keeps the text's own indentation.
    let mut line: String = text.chars().take_while(|c| *c == ' ').collect();
    for word in text.split_whitespace() {
        if !line.trim().is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            out.push_str(&line);
            out.push('\n');
            line = indent.to_owned();
        }
        if !line.trim().is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// seconds [from, to] as a time column: `12:01:50-01:58`.
fn span_label(from: u64, to: u64) -> String {
    if from == to {
        clock(from * 1000)
    } else {
        let end = clock(to * 1000);
        format!("{}-{}", clock(from * 1000), &end[3..])
    }
}

fn render_timeline(o: &mut String, sc: &Scenario, outcomes: &[Outcome]) {
    let w = sc.window_ms;
    let first = sc.start_ms.min(sc.events[0].at_ms) / 1000;
    let mut secs: BTreeMap<u64, Second> = BTreeMap::new();
    for (i, e) in sc.events.iter().enumerate() {
        let s = secs.entry(e.at_ms / 1000).or_insert_with(|| Second {
            sent: 0,
            allowed: vec![0; outcomes.len()],
        });
        s.sent += 1;
        for (k, out) in outcomes.iter().enumerate() {
            s.allowed[k] += u64::from(out.verdicts[i]);
        }
    }
    let rolling = format!("in {}", short_window(w));
    let _ = writeln!(
        o,
        "Per second (bar: share of the row's requests allowed; {rolling}: allowed in the"
    );
    let _ = writeln!(
        o,
        "rolling {} ending with the row; !: over the limit)",
        window_label(w)
    );
    let num = 5;
    let cell = num + 1 + BAR_WIDTH + 1 + 6;
    let mut head = format!("{:<14} {:>num$}", "time", "sent");
    let mut sub = format!("{:<14} {:>num$}", "", "");
    for out in outcomes {
        let _ = write!(head, " | {:<cell$}", out.name);
        let _ = write!(
            sub,
            " | {:<w1$} {rolling:>6}",
            "allowed",
            w1 = num + 1 + BAR_WIDTH
        );
    }
    let _ = writeln!(o, "{}", head.trim_end());
    let _ = writeln!(o, "{}", sub.trim_end());
    for row in rows(&secs, first) {
        let span: Vec<&Second> = secs.range(row.from..=row.to).map(|(_, s)| s).collect();
        let sent: u64 = span.iter().map(|s| s.sent).sum();
        let mut line = format!(
            "{:<14} {:>num$}",
            span_label(row.from, row.to),
            thousands(sent)
        );
        let end = row.to * 1000 + 999;
        for (k, out) in outcomes.iter().enumerate() {
            let allowed: u64 = span.iter().map(|s| s.allowed[k]).sum();
            let in_window = rolling_at(&out.allowed, w, end);
            let mark = if in_window > sc.limit { "!" } else { "" };
            let _ = write!(
                line,
                " | {:>num$} {} {:>5}{mark:1}",
                thousands(allowed),
                bar(allowed, sent),
                thousands(in_window)
            );
        }
        let _ = writeln!(o, "{}", line.trim_end());
    }
}

fn short_window(window_ms: u64) -> String {
    if window_ms.is_multiple_of(1000) {
        format!("{}s", window_ms / 1000)
    } else {
        format!("{window_ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audit_counts_half_open_windows() {
        // (t - W, t]: an admission exactly W before t no longer counts.
        assert_eq!(max_rolling(&[0, 1000, 1000, 1999], 1000), (3, 1000, 1999));
        assert_eq!(max_rolling(&[5, 6, 7], 1000), (3, 5, 7));
        assert_eq!(max_rolling(&[], 1000), (0, 0, 0));
        assert_eq!(rolling_at(&[0, 1000, 1500], 1000, 1999), 2);
        assert_eq!(rolling_at(&[0, 1000, 1500], 1000, 999), 1);
    }

    #[test]
    fn fixed_window_resets_on_the_boundary() {
        let mut f = FixedWindow::new(2, 1000);
        let got: Vec<bool> = [0, 1, 999, 1000, 1001, 1002]
            .iter()
            .map(|&t| f.allow(t))
            .collect();
        assert_eq!(got, [true, true, false, true, true, false]);
    }

    #[test]
    fn wrap_keeps_the_indent() {
        assert_eq!(wrap("  a b c", 5, "    "), "  a b\n    c\n");
        assert_eq!(wrap("- one two", 80, "  "), "- one two\n");
        assert_eq!(span_label(43_259, 43_259), "12:00:59");
        assert_eq!(span_label(43_260, 43_269), "12:01:00-01:09");
    }

    #[test]
    fn start_accepts_clock_and_millis() {
        assert_eq!(parse_start("12:00:00").unwrap(), DEMO_DAY_MS + 43_200_000);
        assert_eq!(parse_start("12:00").unwrap(), DEMO_DAY_MS + 43_200_000);
        assert_eq!(parse_start("1234").unwrap(), 1234);
        assert_eq!(parse_start("25:00:00").unwrap_err().field(), Some("start"));
        assert_eq!(clock(DEMO_DAY_MS + 43_259_000), "12:00:59");
        assert_eq!(thousands(1_200), "1,200");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000_000), "1,000,000");
    }
}
