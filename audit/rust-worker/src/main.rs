//! One worker process of the cross-language audit (`audit/run`): CONCURRENCY
//! tasks share one limiter and call `acquire` on one tenant with server time
//! (Redis `TIME`) from `--start-at-ms` for `--duration-ms`, then every
//! decision is written to `--out` as a JSON line
//! `{"lang":..,"allowed":..,"now_ms":..,"retry_after_ms":..}` (an error as
//! `{"lang":..,"error":"<code>"}`). `audit/check.py` merges the logs of all
//! workers. The Go and Node workers take the same flags and write the same lines.

use clap::{Parser, ValueEnum};
use slidelimit::{Algorithm, Limiter, Options, Policy};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Pattern {
    /// Calls all the time.
    Uniform,
    /// Cycles of three windows: calls only in the last tenth of the first,
    /// all through the second, none in the third.
    Burst,
}

#[derive(Debug, Parser)]
#[command(about = "Cross-language audit worker (Rust binding).")]
struct Args {
    /// Label written into every line.
    #[arg(long, default_value = "rust")]
    lang: String,
    /// Redis URL (with --cluster: comma-separated URLs of Cluster nodes).
    #[arg(long)]
    redis: String,
    #[arg(long)]
    cluster: bool,
    #[arg(long)]
    namespace: String,
    #[arg(long, default_value = "audit")]
    resource: String,
    #[arg(long, default_value = "tenant-1")]
    tenant: String,
    #[arg(long, default_value = "sliding_log")]
    algorithm: String,
    #[arg(long, default_value_t = 50)]
    limit: u64,
    #[arg(long, default_value_t = 2000)]
    window_ms: u64,
    /// Unix ms at which every worker starts calling (0: at once).
    #[arg(long, default_value_t = 0)]
    start_at_ms: u64,
    #[arg(long, default_value_t = 6000)]
    duration_ms: u64,
    /// Calls in flight at any time.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    #[arg(long, value_enum, default_value_t = Pattern::Uniform)]
    pattern: Pattern,
    /// After each call a caller pauses a random 0..=JITTER_MS ms, so the
    /// processes' calls interleave at Redis instead of arriving in batches.
    #[arg(long, default_value_t = 3)]
    jitter_ms: u64,
    /// Each caller makes its first call at a random point of the first
    /// RAMP_MS ms, so the first window is not filled by whichever process
    /// fires first (the log would then keep that phase for the whole run).
    #[arg(long, default_value_t = 0)]
    ramp_ms: u64,
    #[arg(long, default_value_t = 2000)]
    timeout_ms: u64,
    /// Where the JSON lines go.
    #[arg(long, required_unless_present = "print_key")]
    out: Option<PathBuf>,
    /// Print the tenant's Redis key (built by the binding) and exit:
    /// `audit/run --failover` needs it to find the tenant's slot without
    /// re-implementing the key format.
    #[arg(long)]
    print_key: bool,
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// How long to wait at `t` before the next call; the same rule in every
/// worker. Time is the local wall clock: Redis runs on the same host.
fn wait_ms(pattern: Pattern, start_at: u64, window: u64, t: u64) -> u64 {
    if t < start_at {
        return start_at - t;
    }
    if pattern == Pattern::Uniform {
        return 0;
    }
    let rel = t - start_at;
    let (n, e) = ((rel / window) % 3, rel % window);
    let burst = (window / 10).max(1);
    match n {
        0 if e >= window - burst => 0,
        0 => window - burst - e,
        1 => 0,
        _ => (window - e) + (window - burst),
    }
}

/// One line of the log, built by hand: it holds only a label, numbers and
/// an error code.
enum Outcome {
    Decision {
        allowed: bool,
        now_ms: u64,
        retry_after_ms: u64,
    },
    Error(String),
}

/// A xorshift64 step: enough randomness for pauses, without a dependency.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

async fn caller(limiter: Limiter, args: std::sync::Arc<Args>, seed: u64) -> Vec<Outcome> {
    let end = args.start_at_ms + args.duration_ms;
    let mut out = Vec::new();
    let mut random = seed | 1;
    let first = args.start_at_ms + next_random(&mut random) % (args.ramp_ms + 1);
    let lead = first.min(end).saturating_sub(wall_ms());
    if lead > 0 {
        tokio::time::sleep(Duration::from_millis(lead)).await;
    }
    loop {
        let now = wall_ms();
        if now >= end {
            return out;
        }
        let wait = wait_ms(args.pattern, args.start_at_ms, args.window_ms, now);
        if wait > 0 {
            tokio::time::sleep(Duration::from_millis(wait.min(end - now))).await;
            continue;
        }
        out.push(match limiter.acquire(&args.tenant).await {
            Ok(d) => Outcome::Decision {
                allowed: d.allowed,
                now_ms: d.now_ms,
                retry_after_ms: d.retry_after_ms,
            },
            Err(e) => Outcome::Error(e.code().to_string()),
        });
        let pause = next_random(&mut random) % (args.jitter_ms + 1);
        if pause > 0 {
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
    }
}

async fn run(mut args: Args) -> Result<usize, String> {
    let algorithm = Algorithm::parse(&args.algorithm).map_err(|e| e.to_string())?;
    let policy = Policy::new(
        &args.namespace,
        &args.resource,
        algorithm,
        args.limit,
        args.window_ms,
    )
    .map_err(|e| e.to_string())?;
    if args.print_key {
        println!("{}", policy.key(&args.tenant).map_err(|e| e.to_string())?);
        return Ok(0);
    }
    let options = Options {
        timeout: Duration::from_millis(args.timeout_ms),
        ..Options::default()
    };
    let limiter = if args.cluster {
        let urls: Vec<&str> = args.redis.split(',').map(str::trim).collect();
        Limiter::connect_cluster(&urls, policy, options).await
    } else {
        Limiter::connect(&args.redis, policy, options).await
    }
    .map_err(|e| format!("connect: {e}"))?;
    if args.start_at_ms == 0 {
        args.start_at_ms = wall_ms();
    }
    let args = std::sync::Arc::new(args);
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ u64::from(std::process::id());
    let tasks: Vec<_> = (0..args.concurrency as u64)
        .map(|i| {
            let seed = seed.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            tokio::spawn(caller(limiter.clone(), args.clone(), seed))
        })
        .collect();
    let mut text = String::new();
    let mut lines = 0;
    for task in tasks {
        for outcome in task.await.map_err(|e| format!("a caller failed: {e}"))? {
            lines += 1;
            let _ = match outcome {
                Outcome::Decision {
                    allowed,
                    now_ms,
                    retry_after_ms,
                } => writeln!(
                    text,
                    "{{\"lang\":\"{}\",\"allowed\":{allowed},\"now_ms\":{now_ms},\"retry_after_ms\":{retry_after_ms}}}",
                    args.lang
                ),
                Outcome::Error(code) => {
                    writeln!(text, "{{\"lang\":\"{}\",\"error\":\"{code}\"}}", args.lang)
                }
            };
        }
    }
    // clap requires --out unless --print-key, which returned above.
    let out = args.out.as_deref().ok_or("--out is required")?;
    let mut file = std::fs::File::create(out).map_err(|e| format!("{}: {e}", out.display()))?;
    file.write_all(text.as_bytes())
        .map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(lines)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args = Args::parse();
    if args.lang.contains(['"', '\\']) {
        eprintln!("audit worker: --lang must not hold quotes or backslashes");
        return ExitCode::from(2);
    }
    let lang = args.lang.clone();
    let print_key = args.print_key;
    match run(args).await {
        Ok(_) if print_key => ExitCode::SUCCESS,
        Ok(lines) => {
            eprintln!("audit worker {lang}: {lines} decisions logged");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("audit worker {lang}: {e}");
            ExitCode::FAILURE
        }
    }
}
