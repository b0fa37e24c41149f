//! Throughput of `Limiter::acquire` against the leanest raw redis-rs call of
//! the same script (same SHA, same KEYS and ARGV, a `MultiplexedConnection`),
//! in the same process, against the same redis-server, one call at a time and
//! with 32 in flight. Target: the binding at least 0.9x the raw client.
//!
//! Rounds alternate binding and raw (swapping who goes first) so that noise
//! from a shared machine hits both alike; the table shows medians over rounds.
//! It also shows the client's CPU time per check (process CPU time over the
//! round): the work the binding adds, free of the server's and the network's
//! share and steadier than throughput on a busy machine.
//! Each side has its own tenant, reset before every round, so both see the same
//! regime. The binding's local deny cache is off: with it a denial never
//! reaches Redis, and this bench would time the cache against a round trip
//! (its effect is `audit/flood`'s measure, `make bench-flood`). Needs a Redis
//! at `SLIDELIMIT_TEST_REDIS_URL`:
//!
//! `scripts/with-redis.sh cargo bench -p slidelimit --bench acquire [FILTER]`

use slidelimit::{Algorithm, Limiter, Mode, Options, Policy, Script};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// Many short rounds: on a shared machine the median of many paired ratios is
/// steadier than a few long runs.
const ROUNDS: usize = 21;
/// Wall time one side of one round aims at.
const ROUND_TARGET: Duration = Duration::from_millis(150);

#[derive(Clone, Copy)]
struct Regime {
    name: &'static str,
    algorithm: Algorithm,
    limit: u64,
    window_ms: u64,
    /// Permits taken before each round: `limit` makes every call a denial.
    prefill: u64,
    allowed: bool,
}

const REGIMES: [Regime; 4] = [
    Regime {
        name: "log, allowed",
        algorithm: Algorithm::SlidingLog,
        // The log's cap; a round never takes more (see `measure`).
        limit: slidelimit_core::MAX_LOG_LIMIT,
        window_ms: 60_000,
        prefill: 0,
        allowed: true,
    },
    Regime {
        name: "log, denied (600 of 600)",
        algorithm: Algorithm::SlidingLog,
        limit: 600,
        window_ms: 60_000,
        prefill: 600,
        allowed: false,
    },
    Regime {
        name: "counter, allowed",
        algorithm: Algorithm::SlidingCounter,
        limit: 1_000_000_000,
        window_ms: 60_000,
        prefill: 0,
        allowed: true,
    },
    Regime {
        name: "counter, denied (600 of 600)",
        algorithm: Algorithm::SlidingCounter,
        limit: 600,
        window_ms: 60_000,
        prefill: 600,
        allowed: false,
    },
];

const BINDING_TENANT: &str = "bench-binding";
const RAW_TENANT: &str = "bench-raw";

/// What a user without slidelimit would write: the key and ARGV prepared once,
/// one EVALSHA per check, the reply read as integers.
#[derive(Clone)]
struct Raw {
    connection: redis::aio::MultiplexedConnection,
    sha: &'static str,
    key: String,
    args: [String; 4],
}

impl Raw {
    async fn acquire(&mut self) -> Vec<i64> {
        redis::cmd("EVALSHA")
            .arg(self.sha)
            .arg(1)
            .arg(&self.key)
            .arg(&self.args)
            .query_async(&mut self.connection)
            .await
            .expect("raw EVALSHA")
    }
}

/// CPU time of the whole process (all threads): the client's own work.
fn process_cpu_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and the clock id is a
    // constant every Linux kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[derive(Clone, Copy, PartialEq)]
enum Side {
    Binding,
    Raw,
}

struct Bench {
    limiter: Limiter,
    raw: Raw,
    regime: Regime,
}

impl Bench {
    async fn new(url: &str, regime: Regime) -> Bench {
        let policy = Policy::new(
            "bench",
            "acquire",
            regime.algorithm,
            regime.limit,
            regime.window_ms,
        )
        .expect("valid policy");
        let script = Script::new(regime.algorithm, Mode::Acquire);
        let mut connection = redis::Client::open(url)
            .expect("redis url")
            .get_multiplexed_async_connection()
            .await
            .expect("raw connection");
        // The raw client loads its script once, as a user of EVALSHA would.
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(script.text())
            .query_async(&mut connection)
            .await
            .expect("SCRIPT LOAD");
        assert_eq!(sha, script.sha1());
        let raw = Raw {
            connection,
            sha: script.sha1(),
            key: policy.key(RAW_TENANT).expect("key"),
            args: [
                regime.limit.to_string(),
                regime.window_ms.to_string(),
                "1".to_owned(),
                String::new(), // server time, as acquire() uses
            ],
        };
        let options = Options {
            deny_cache: None,
            ..Options::default()
        };
        let limiter = Limiter::connect(url, policy, options)
            .await
            .expect("binding connects");
        Bench {
            limiter,
            raw,
            regime,
        }
    }

    /// Puts both tenants in the regime: empty, or holding `prefill` permits now.
    async fn prepare(&self) {
        if self.regime.algorithm == Algorithm::SlidingCounter && self.regime.prefill > 0 {
            // A full counter stays full only until its window ends: start
            // the round well inside one.
            let left = self.ms_to_window_end().await;
            if left < 3_000 {
                tokio::time::sleep(Duration::from_millis(left + 10)).await;
            }
        }
        for tenant in [BINDING_TENANT, RAW_TENANT] {
            self.limiter.reset(tenant).await.expect("reset");
            if self.regime.prefill > 0 {
                let d = self
                    .limiter
                    .acquire_n(tenant, self.regime.prefill)
                    .await
                    .expect("prefill");
                assert!(d.allowed, "prefill of {} failed", self.regime.name);
            }
        }
    }

    async fn ms_to_window_end(&self) -> u64 {
        let (secs, micros): (u64, u64) = redis::cmd("TIME")
            .query_async(&mut self.raw.connection.clone())
            .await
            .expect("TIME");
        let now = secs * 1000 + micros / 1000;
        self.regime.window_ms - now % self.regime.window_ms
    }

    /// Runs `calls` checks with `in_flight` concurrent callers; returns the
    /// elapsed time, the process CPU time and how many replies did not fit
    /// the regime.
    async fn run(&self, side: Side, calls: usize, in_flight: usize) -> (Duration, Duration, usize) {
        let per_task = calls / in_flight;
        let expect = self.regime.allowed;
        let cpu = process_cpu_now();
        let start = Instant::now();
        let mut tasks = JoinSet::new();
        for _ in 0..in_flight {
            let limiter = self.limiter.clone();
            let mut raw = self.raw.clone();
            tasks.spawn(async move {
                let mut off_regime = 0;
                for _ in 0..per_task {
                    let allowed = match side {
                        Side::Binding => {
                            limiter
                                .acquire(BINDING_TENANT)
                                .await
                                .expect("binding acquire")
                                .allowed
                        }
                        Side::Raw => raw.acquire().await[0] == 1,
                    };
                    off_regime += usize::from(allowed != expect);
                }
                off_regime
            });
        }
        let mut off_regime = 0;
        while let Some(result) = tasks.join_next().await {
            off_regime += result.expect("bench task");
        }
        let elapsed = start.elapsed();
        (elapsed, process_cpu_now().saturating_sub(cpu), off_regime)
    }
}

struct Row {
    regime: &'static str,
    in_flight: usize,
    calls: usize,
    binding: f64,
    raw: f64,
    /// Client CPU microseconds per check.
    binding_cpu: f64,
    raw_cpu: f64,
    ratio: f64,
    ratio_min: f64,
    ratio_max: f64,
    off_regime: usize,
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

async fn measure(url: &str, regime: Regime, in_flight: usize) -> Row {
    let bench = Bench::new(url, regime).await;
    // Calibrate on the raw side so one round takes about ROUND_TARGET.
    bench.prepare().await;
    let probe = 64 * in_flight;
    bench.run(Side::Raw, probe, in_flight).await;
    let (elapsed, _, _) = bench.run(Side::Raw, probe, in_flight).await;
    let per_call = elapsed.as_secs_f64() / probe as f64;
    let mut calls =
        ((ROUND_TARGET.as_secs_f64() / per_call) as usize / in_flight).max(1) * in_flight;
    if regime.allowed {
        // Every call of an allowed round must pass: stay within the limit
        // (the tenants are reset before each round).
        calls = calls.min(regime.limit as usize / in_flight * in_flight);
    }

    let (mut binding, mut raw, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut binding_cpu, mut raw_cpu) = (Vec::new(), Vec::new());
    let mut off_regime = 0;
    for round in 0..ROUNDS {
        bench.prepare().await;
        let order = if round % 2 == 0 {
            [Side::Binding, Side::Raw]
        } else {
            [Side::Raw, Side::Binding]
        };
        let (mut rate, mut cpu) = ([0.0; 2], [0.0; 2]);
        for side in order {
            let (elapsed, cpu_time, off) = bench.run(side, calls, in_flight).await;
            off_regime += off;
            let i = usize::from(side == Side::Raw);
            rate[i] = calls as f64 / elapsed.as_secs_f64();
            cpu[i] = cpu_time.as_secs_f64() * 1e6 / calls as f64;
        }
        binding.push(rate[0]);
        raw.push(rate[1]);
        binding_cpu.push(cpu[0]);
        raw_cpu.push(cpu[1]);
        ratios.push(rate[0] / rate[1]);
    }
    let ratio = median(&mut ratios);
    Row {
        regime: regime.name,
        in_flight,
        calls,
        binding: median(&mut binding),
        raw: median(&mut raw),
        binding_cpu: median(&mut binding_cpu),
        raw_cpu: median(&mut raw_cpu),
        ratio,
        ratio_min: ratios[0],
        ratio_max: ratios[ratios.len() - 1],
        off_regime,
    }
}

fn main() {
    let Ok(url) = std::env::var("SLIDELIMIT_TEST_REDIS_URL") else {
        eprintln!(
            "acquire bench: set SLIDELIMIT_TEST_REDIS_URL \
             (make bench-rust, or scripts/with-redis.sh cargo bench ...)"
        );
        std::process::exit(2);
    };
    // cargo bench passes `--bench`; any other argument filters regimes by name.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    // One thread for the client, the other core for redis-server.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut rows = Vec::new();
    for regime in REGIMES {
        if !filter.is_empty() && !filter.iter().any(|f| regime.name.contains(f.as_str())) {
            continue;
        }
        for in_flight in [1, 32] {
            let row = runtime.block_on(measure(&url, regime, in_flight));
            eprintln!(
                "acquire: {} x{}: ratio {:.3}",
                row.regime, row.in_flight, row.ratio
            );
            rows.push(row);
        }
    }
    println!();
    println!("## acquire: binding vs raw redis-rs EVALSHA (server time, {ROUNDS} alternating rounds, medians)");
    println!();
    println!("| regime | in flight | calls/round | binding checks/s | raw checks/s | binding/raw | min..max | client CPU us/check binding / raw | off-regime replies |");
    println!("|---|---:|---:|---:|---:|---:|---|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {:.0} | {:.0} | {:.3} | {:.3}..{:.3} | {:.1} / {:.1} | {} |",
            r.regime,
            r.in_flight,
            r.calls,
            r.binding,
            r.raw,
            r.ratio,
            r.ratio_min,
            r.ratio_max,
            r.binding_cpu,
            r.raw_cpu,
            r.off_regime
        );
    }
    let worst = rows.iter().map(|r| r.ratio).fold(f64::INFINITY, f64::min);
    println!();
    println!(
        "target binding/raw >= 0.90: {} (lowest median ratio {worst:.3})",
        if worst >= 0.9 { "met" } else { "MISSED" }
    );
}
