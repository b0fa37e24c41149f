//! The `slidelimit` command line: the demo (`simulate`) and one-off checks
//! against a Redis (`acquire`, `peek`, `reset`).
//!
//! Exit status: 0 success (allowed, for acquire and peek), 1 denied, 2 usage
//! error, 10 + the error's stable number otherwise (11 invalid_argument,
//! 12 unavailable, 13 script_error, 14 wrong_type, 15 malformed_reply,
//! 16 permission_denied, 17 internal).

mod simulate;

use clap::{Args, Parser, Subcommand};
use slidelimit::{blocking, Algorithm, Decision, ErrorCode, Options, Policy};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "slidelimit",
    version,
    about = "Sliding-window rate limiting on Redis: demo and checks."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Replay the burst scenario through a fixed window, the sliding log,
    /// the sliding counter and the bucketed window, and audit every rolling
    /// window (no Redis needed).
    Simulate(simulate::SimulateArgs),
    /// Take permits for a tenant (exit 0 when allowed, 1 when denied).
    Acquire(CallArgs),
    /// What acquire would answer, recording nothing (exit 0 / 1 like acquire).
    Peek(CallArgs),
    /// Forget everything recorded for a tenant under a policy.
    Reset(ResetArgs),
}

/// Where the keys live and which ones.
#[derive(Debug, Args)]
struct Target {
    /// Redis URL (with --cluster: comma-separated seed URLs).
    #[arg(long, value_name = "URL", env = "SLIDELIMIT_REDIS_URL")]
    redis: String,
    /// The URLs are seeds of a Redis Cluster.
    #[arg(long)]
    cluster: bool,
    #[arg(long, default_value = slidelimit_core::DEFAULT_NAMESPACE)]
    namespace: String,
    #[arg(long)]
    resource: String,
    /// Any UTF-8 string; bytes that are not UTF-8 are `invalid_argument`.
    #[arg(long)]
    tenant: std::ffi::OsString,
    /// sliding_log, sliding_counter or bucketed_window.
    #[arg(long, default_value = slidelimit_core::DEFAULT_ALGORITHM.as_str())]
    algorithm: String,
    #[arg(long)]
    window_ms: u64,
    /// Buckets of a bucketed_window (default 60; must divide --window-ms).
    /// Core rejects it with any other algorithm, so it is not ignored.
    #[arg(long)]
    buckets: Option<u64>,
    /// Per-call timeout, 1 to 2^31 - 1 ms (0 is invalid_argument); a slower
    /// or unreachable Redis is `unavailable`.
    #[arg(long, default_value_t = 1000)]
    timeout_ms: u64,
    /// Print JSON (snake_case keys) instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct CallArgs {
    #[command(flatten)]
    target: Target,
    /// Permits per window.
    #[arg(long)]
    limit: u64,
    /// Permits this call takes.
    #[arg(long, default_value_t = 1)]
    cost: u64,
    /// Caller time in Unix milliseconds (default: the Redis server's clock).
    #[arg(long)]
    now_ms: Option<u64>,
}

#[derive(Debug, Args)]
struct ResetArgs {
    #[command(flatten)]
    target: Target,
}

/// A command's way out: the exit status and what to print on stderr.
#[derive(Debug)]
pub struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    /// A failed write to stdout. A reader that went away (`| head`) is no error.
    fn io(e: std::io::Error) -> Failure {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return Failure {
                code: 0,
                message: String::new(),
            };
        }
        Failure {
            code: exit_code_for(ErrorCode::Internal),
            message: format!("error: internal: writing the output: {e}"),
        }
    }
}

impl From<slidelimit::Error> for Failure {
    fn from(e: slidelimit::Error) -> Self {
        Failure {
            code: exit_code_for(e.code()),
            message: format!("error: {e}"),
        }
    }
}

/// 10 + the stable error number, so scripts can tell a bad argument (11) from
/// an unreachable Redis (12) without parsing text.
pub fn exit_code_for(code: ErrorCode) -> u8 {
    10 + code.as_u32() as u8
}

impl Target {
    /// The tenant as core validates it: clap would call non-UTF-8 bytes a
    /// usage error (exit 2), but the contract says `invalid_argument` (11).
    fn tenant(&self) -> slidelimit::Result<&str> {
        slidelimit_core::tenant_from_bytes(self.tenant.as_encoded_bytes())
    }

    fn connect(&self, limit: u64) -> slidelimit::Result<blocking::Limiter> {
        let algorithm = Algorithm::parse(&self.algorithm)?;
        let policy = Policy::with_buckets(
            &self.namespace,
            &self.resource,
            algorithm,
            limit,
            self.window_ms,
            self.buckets,
        )?;
        let options = Options {
            timeout: Duration::from_millis(self.timeout_ms),
            ..Options::default()
        };
        if self.cluster {
            let urls: Vec<&str> = self.redis.split(',').map(str::trim).collect();
            blocking::Limiter::connect_cluster(&urls, policy, options)
        } else {
            blocking::Limiter::connect(&self.redis, policy, options)
        }
    }
}

fn decision_json(d: &Decision) -> String {
    format!(
        "{{\"allowed\":{},\"remaining\":{},\"retry_after_ms\":{},\"reset_after_ms\":{},\"now_ms\":{}}}",
        d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms, d.now_ms
    )
}

fn decision_text(d: &Decision, cost: u64) -> String {
    let verdict = if d.allowed { "allowed" } else { "denied" };
    let retry = if d.allowed {
        String::new()
    } else {
        format!(", retry after {} ms", d.retry_after_ms)
    };
    format!(
        "{verdict} (cost {cost}): {} remaining{retry}, empty after {} ms, at {} ms",
        d.remaining, d.reset_after_ms, d.now_ms
    )
}

fn call(args: &CallArgs, peek: bool) -> Result<ExitCode, Failure> {
    let tenant = args.target.tenant()?;
    let limiter = args.target.connect(args.limit)?;
    let decision = match (peek, args.now_ms) {
        (false, None) => limiter.acquire_n(tenant, args.cost),
        (false, Some(now)) => limiter.acquire_at(tenant, args.cost, now),
        (true, None) => limiter.peek(tenant, args.cost),
        (true, Some(now)) => limiter.peek_at(tenant, args.cost, now),
    }?;
    if args.target.json {
        println!("{}", decision_json(&decision));
    } else {
        println!("{}", decision_text(&decision, args.cost));
    }
    Ok(ExitCode::from(if decision.allowed { 0 } else { 1 }))
}

fn reset(args: &ResetArgs) -> Result<ExitCode, Failure> {
    let t = &args.target;
    let tenant = t.tenant()?;
    // The key does not depend on the limit; 1 is always valid.
    let limiter = t.connect(1)?;
    limiter.reset(tenant)?;
    let key = limiter.policy().key(tenant)?;
    if t.json {
        println!(
            "{{\"reset\":true,\"key\":{}}}",
            serde_json::to_string(&key).expect("a string always serializes")
        );
    } else {
        println!("reset {key}");
    }
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Simulate(args) => simulate::run(args).map(|()| ExitCode::SUCCESS),
        Command::Acquire(args) => call(args, false),
        Command::Peek(args) => call(args, true),
        Command::Reset(args) => reset(args),
    };
    result.unwrap_or_else(|f| {
        if !f.message.is_empty() {
            eprintln!("{}", f.message);
        }
        ExitCode::from(f.code)
    })
}
