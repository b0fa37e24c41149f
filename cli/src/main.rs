//! The `slidelimit` command line: the demo (`simulate`), one-off checks
//! against a Redis (`acquire`, `peek`, `reset`), and `check-server`, what a
//! server's INFO says about running slidelimit on it.
//!
//! Exit status: 0 success (allowed, for acquire and peek), 1 denied, 2 usage
//! error, 10 + the error's stable number otherwise (11 invalid_argument,
//! 12 unavailable, 13 script_error, 14 wrong_type, 15 malformed_reply,
//! 16 permission_denied, 17 internal). Errors go to stderr: `error: <code>:
//! <message>`, or with `--json` one line `{"error":...,"field":...,"message":...}`;
//! with `--json` a usage error (exit 2) is such a line too, `invalid_argument`
//! naming the flag (`--now-ms` is `now_ms`). A negative number after a flag
//! is read as its value, so `--limit -1` says the value is wrong.
//! Every argument is checked before Redis is reached, so a bad one is
//! `invalid_argument` even when Redis is out of reach.

mod decision_json;
mod simulate;

use clap::{Args, Parser, Subcommand};
use decision_json::{decision_json, error_json, error_parts_json};
use slidelimit::{blocking, Algorithm, Decision, Error, ErrorCode, Limit, Mode, Options, Policy};
use std::io::Write;
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
    #[command(allow_negative_numbers = true)]
    Simulate(simulate::SimulateArgs),
    /// Take permits for a tenant (exit 0 when allowed, 1 when denied).
    #[command(allow_negative_numbers = true)]
    Acquire(CallArgs),
    /// What acquire would answer, recording nothing (exit 0 / 1 like acquire).
    #[command(allow_negative_numbers = true)]
    Peek(CallArgs),
    /// Forget everything recorded for a tenant under a policy.
    #[command(allow_negative_numbers = true)]
    Reset(ResetArgs),
    /// What a server's INFO says about running slidelimit on it: eviction,
    /// a replica, a full memory, failed saves, ... (exit 1 when any finding
    /// is a problem).
    #[command(allow_negative_numbers = true)]
    CheckServer(CheckServerArgs),
}

#[derive(Debug, Args)]
struct CheckServerArgs {
    /// Redis URL; comma-separated URLs check each server (every Cluster
    /// master, say) on its own.
    // hide_env_values: --help would print the variable, password and all.
    #[arg(
        long,
        value_name = "URL",
        env = "SLIDELIMIT_REDIS_URL",
        hide_env_values = true
    )]
    redis: String,
    /// Timeout for each server's connect and INFO, 1 to 2^31 - 1 ms.
    #[arg(long, default_value_t = slidelimit_core::DEFAULT_TIMEOUT_MS)]
    timeout_ms: u64,
    /// One JSON line per server, errors included (on stderr).
    #[arg(long)]
    json: bool,
}

/// Where the keys live and which ones.
#[derive(Debug, Args)]
struct Target {
    /// Redis URL (with --cluster: comma-separated seed URLs).
    #[arg(
        long,
        value_name = "URL",
        env = "SLIDELIMIT_REDIS_URL",
        hide_env_values = true
    )]
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
    #[arg(long, required_unless_present = "limits")]
    window_ms: Option<u64>,
    /// Buckets of a bucketed_window (default 60; must divide --window-ms).
    /// Core rejects it with any other algorithm, so it is not ignored.
    #[arg(long)]
    buckets: Option<u64>,
    /// Several limits in one policy, all checked and recorded together (or
    /// none): ALGORITHM:LIMIT/WINDOW_MS[/BUCKETS], comma-separated or the
    /// option repeated, e.g. `sliding_log:20/1000,bucketed_window:600/60000`.
    /// Replaces --algorithm, --limit, --window-ms and --buckets.
    #[arg(
        long,
        value_name = "SPECS",
        value_delimiter = ',',
        conflicts_with_all = ["algorithm", "window_ms", "buckets"]
    )]
    limits: Vec<String>,
    /// Per-call timeout, 1 to 2^31 - 1 ms (0 is invalid_argument); a slower
    /// or unreachable Redis is `unavailable`.
    #[arg(long, default_value_t = slidelimit_core::DEFAULT_TIMEOUT_MS)]
    timeout_ms: u64,
    /// Print JSON (snake_case keys) instead of text, errors included (on stderr).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct CallArgs {
    #[command(flatten)]
    target: Target,
    /// Permits per window.
    #[arg(long, required_unless_present = "limits", conflicts_with = "limits")]
    limit: Option<u64>,
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

/// A command's way out other than its result.
#[derive(Debug)]
pub enum Failure {
    /// The reader of stdout went away (`| head`): no error, nothing to say.
    ReaderGone,
    Error(Error),
}

impl Failure {
    /// A failed write to stdout.
    fn io(e: std::io::Error) -> Failure {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return Failure::ReaderGone;
        }
        Failure::Error(Error::new(
            ErrorCode::Internal,
            format!("writing the output: {e}"),
        ))
    }

    /// Says what went wrong on stderr (as JSON with `json`); the exit status.
    fn report(self, json: bool) -> ExitCode {
        match self {
            Failure::ReaderGone => ExitCode::SUCCESS,
            Failure::Error(e) => {
                if json {
                    eprintln!("{}", error_json(&e));
                } else {
                    eprintln!("error: {e}");
                }
                ExitCode::from(exit_code_for(e.code()))
            }
        }
    }
}

impl From<slidelimit::Error> for Failure {
    fn from(e: slidelimit::Error) -> Self {
        Failure::Error(e)
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

    /// The policy: of --limits when given, else of the single-limit options
    /// with `limit` (clap makes --window-ms present whenever --limits is not).
    fn policy(&self, limit: u64) -> slidelimit::Result<Policy> {
        if !self.limits.is_empty() {
            let limits = parse_limits(&self.limits)?;
            return Policy::with_limits(&self.namespace, &self.resource, &limits);
        }
        Policy::with_buckets(
            &self.namespace,
            &self.resource,
            Algorithm::parse(&self.algorithm)?,
            limit,
            self.window_ms.unwrap_or_default(),
            self.buckets,
        )
    }

    fn connect(&self, policy: Policy) -> slidelimit::Result<blocking::Limiter> {
        let options = Options {
            timeout: Duration::from_millis(self.timeout_ms),
            ..Options::default()
        };
        if self.cluster {
            let urls: Vec<&str> = self.redis.split(',').map(str::trim).collect();
            blocking::Limiter::connect_cluster(&urls, policy, options)
        } else {
            let url = one_url(&self.redis, "give --cluster for a Cluster's seed URLs")?;
            blocking::Limiter::connect(url, policy, options)
        }
    }
}

/// `url`, refused when it is a comma-separated list (else redis-rs reads the
/// rest of the list as the database number); `hint` says what to do instead.
pub(crate) fn one_url<'a>(url: &'a str, hint: &str) -> slidelimit::Result<&'a str> {
    if url.contains(',') {
        return Err(Error::invalid(
            "redis",
            format!("holds several URLs; {hint}"),
        ));
    }
    Ok(url)
}

/// `--limits` as core's limits. The syntax is this command's own; every
/// value is then core's to check (`limits[1].window_ms: ...`).
fn parse_limits(specs: &[String]) -> slidelimit::Result<Vec<Limit>> {
    let count = specs.len();
    // Digits only: u64's parse alone would also take a leading '+'.
    let number = |field: &'static str, text: &str, index: usize| match text.parse() {
        Ok(n) if !text.starts_with('+') => Ok(n),
        _ => Err(Error::invalid(
            field,
            format!("must be a decimal integer below 2^64, got {text:?}"),
        )
        .for_limit(index, count)),
    };
    specs
        .iter()
        .enumerate()
        .map(|(index, spec)| {
            let malformed = || {
                Error::invalid(
                    "limits",
                    format!("expected ALGORITHM:LIMIT/WINDOW_MS[/BUCKETS], got {spec:?}"),
                )
            };
            let (algorithm, numbers) = spec.trim().split_once(':').ok_or_else(malformed)?;
            let numbers: Vec<&str> = numbers.split('/').collect();
            if !(2..=3).contains(&numbers.len()) {
                return Err(malformed());
            }
            Ok(Limit {
                algorithm: Algorithm::parse(algorithm).map_err(|e| e.for_limit(index, count))?,
                limit: number("limit", numbers[0], index)?,
                window_ms: number("window_ms", numbers[1], index)?,
                buckets: match numbers.get(2) {
                    Some(text) => Some(number("buckets", text, index)?),
                    None => None,
                },
            })
        })
        .collect()
}

fn decision_text(d: &Decision, cost: u64) -> String {
    let verdict = match (d.allowed, d.denied_by) {
        (true, _) => "allowed".to_owned(),
        (false, None) => "denied".to_owned(),
        (false, Some(index)) => format!("denied by limits[{index}]"),
    };
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
    // clap makes --limit present whenever --limits is not.
    let policy = args.target.policy(args.limit.unwrap_or_default())?;
    let mode = if peek { Mode::Peek } else { Mode::Acquire };
    // Core checks tenant, cost and time here, before any connect.
    policy.build_call(tenant, args.cost, args.now_ms, mode)?;
    let limiter = args.target.connect(policy)?;
    let decision = match (peek, args.now_ms) {
        (false, None) => limiter.acquire_n(tenant, args.cost),
        (false, Some(now)) => limiter.acquire_at(tenant, args.cost, now),
        (true, None) => limiter.peek(tenant, args.cost),
        (true, Some(now)) => limiter.peek_at(tenant, args.cost, now),
    }?;
    if args.target.json {
        print_line(&decision_json(&decision))?;
    } else {
        print_line(&decision_text(&decision, args.cost))?;
    }
    Ok(ExitCode::from(if decision.allowed { 0 } else { 1 }))
}

fn reset(args: &ResetArgs) -> Result<ExitCode, Failure> {
    let t = &args.target;
    let tenant = t.tenant()?;
    // The keys do not depend on the limit; 1 is always valid (--limits
    // brings its own).
    let policy = t.policy(1)?;
    let keys = policy.keys(tenant)?;
    let limiter = t.connect(policy)?;
    limiter.reset(tenant)?;
    if t.json {
        // One limit: {"reset":true,"key":...}; several: "keys", every one.
        let (name, value) = match keys.as_slice() {
            [key] => ("key", serde_json::to_string(key)),
            _ => ("keys", serde_json::to_string(&keys)),
        };
        let value = value.expect("strings always serialize");
        print_line(&format!("{{\"reset\":true,\"{name}\":{value}}}"))?;
    } else {
        for key in &keys {
            print_line(&format!("reset {key}"))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One line on stdout for a command that has already acted on Redis: a
/// reader that has gone (`| head -0`) is no failure, its exit status still
/// says what was decided; println! would panic (exit 101).
fn print_line(line: &str) -> Result<(), Failure> {
    match writeln!(std::io::stdout().lock(), "{line}") {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Failure::io(e)),
        _ => Ok(()),
    }
}

/// Checks each server in turn; one out of reach is reported and the rest
/// are still checked. Exit: the first error's status if any server failed,
/// else 1 when any finding is a problem, else 0.
fn check_server(args: &CheckServerArgs) -> Result<ExitCode, Failure> {
    let options = Options {
        timeout: Duration::from_millis(args.timeout_ms),
        ..Options::default()
    };
    let (mut problems, mut first_error) = (false, None);
    for url in args.redis.split(',').map(str::trim) {
        let server = without_credentials(url);
        let findings = match blocking::check_server(url, &options) {
            Ok(findings) => findings,
            Err(e) => {
                if args.json {
                    let mut line = serde_json::json!({"server": server});
                    line.as_object_mut()
                        .expect("an object")
                        .extend(error_object(&e));
                    eprintln!("{line}");
                } else {
                    eprintln!("error: {server}: {e}");
                }
                first_error.get_or_insert(e.code());
                continue;
            }
        };
        problems |= findings
            .iter()
            .any(|f| f.severity == slidelimit::Severity::Problem);
        let mut out = std::io::stdout().lock();
        if args.json {
            let findings: Vec<_> = findings
                .iter()
                .map(|f| {
                    serde_json::json!({
                        "severity": f.severity.as_str(),
                        "code": f.code,
                        "message": f.message,
                    })
                })
                .collect();
            let line = serde_json::json!({"server": server, "findings": findings});
            writeln!(out, "{line}").map_err(Failure::io)?;
        } else if findings.is_empty() {
            writeln!(out, "{server}: nothing to report").map_err(Failure::io)?;
        } else {
            writeln!(out, "{server}:").map_err(Failure::io)?;
            for f in &findings {
                writeln!(out, "  {} {}: {}", f.severity.as_str(), f.code, f.message)
                    .map_err(Failure::io)?;
            }
        }
    }
    Ok(match (first_error, problems) {
        (Some(code), _) => ExitCode::from(exit_code_for(code)),
        (None, true) => ExitCode::from(1),
        (None, false) => ExitCode::SUCCESS,
    })
}

/// The fields of `error_json`'s line, to put beside others.
fn error_object(e: &Error) -> serde_json::Map<String, serde_json::Value> {
    match serde_json::from_str(&error_json(e)) {
        Ok(serde_json::Value::Object(fields)) => fields,
        _ => serde_json::Map::new(),
    }
}

/// `url` without a user or password: those of its authority, and the
/// `user` and `pass` of its query (where redis-rs reads them for a unix
/// socket). A URL that does not parse is shown as `<unparsable URL>`: it
/// may hold a password that no rule here finds; so is one without a host
/// that has an `@` (`redis:user:pass@host`, a `//` missing), whose user and
/// password the URL type cannot drop.
pub(crate) fn without_credentials(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return "<unparsable URL>".to_owned();
    };
    // Fails only for URLs without a host (unix sockets among them).
    let dropped = parsed.set_username("").is_ok() && parsed.set_password(None).is_ok();
    if !dropped && url.contains('@') {
        return "<unparsable URL>".to_owned();
    }
    if parsed.query().is_some() {
        let kept: Vec<(String, String)> = parsed
            .query_pairs()
            .filter(|(key, _)| key != "user" && key != "pass")
            .map(|(key, value)| (key.into_owned(), value.into_owned()))
            .collect();
        if kept.is_empty() {
            parsed.set_query(None);
        } else {
            parsed.query_pairs_mut().clear().extend_pairs(kept);
        }
    }
    parsed.to_string()
}

/// A usage error (exit 2). With `--json` on the command line it is one JSON
/// line of the `invalid_argument` form, naming the flag, so a script reading
/// JSON never has to parse clap's text.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let asked_for_json = std::env::args_os()
        .take_while(|a| a != "--")
        .any(|a| a == "--json");
    let shown = matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if shown || !asked_for_json {
        e.exit();
    }
    // "--limit <LIMIT>" names the field "limit", as core's errors do; an
    // argument clap does not know is no field.
    let named = match e.kind() {
        ErrorKind::UnknownArgument => None,
        _ => match e.get(ContextKind::InvalidArg) {
            Some(ContextValue::String(arg)) => Some(arg.as_str()),
            Some(ContextValue::Strings(args)) => args.first().map(String::as_str),
            _ => None,
        },
    };
    let field = named.and_then(|arg| {
        let name = arg.strip_prefix("--")?.split([' ', '=']).next()?;
        Some(name.replace('-', "_"))
    });
    // The first paragraph, on one line: "the following required arguments
    // were not provided: --limit <LIMIT>".
    let text = e.render().to_string();
    let problem = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    let problem = problem.strip_prefix("error: ").unwrap_or(&problem);
    let message = match &field {
        Some(name) => format!("{name}: {problem}"),
        None => problem.to_owned(),
    };
    eprintln!(
        "{}",
        error_parts_json(ErrorCode::InvalidArgument, field.as_deref(), &message)
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let (result, json) = match &cli.command {
        Command::Simulate(args) => (simulate::run(args).map(|()| ExitCode::SUCCESS), false),
        Command::Acquire(args) => (call(args, false), args.target.json),
        Command::Peek(args) => (call(args, true), args.target.json),
        Command::Reset(args) => (reset(args), args.target.json),
        Command::CheckServer(args) => (check_server(args), args.json),
    };
    result.unwrap_or_else(|f| f.report(json))
}
