// The Rust snippet of README.md, verbatim (rust/tests/docs.rs checks that and
// runs it against a real Redis): `cargo run -p slidelimit --example readme`.
use slidelimit::{Algorithm, Limiter, Options, Policy};

#[tokio::main]
async fn main() -> slidelimit::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let policy = Policy::new("rl", "geocode", Algorithm::SlidingLog, 600, 60_000)?;
    let limiter = Limiter::connect(&url, policy, Options::default()).await?;

    let decision = limiter.acquire("tenant-17").await?;
    if decision.allowed {
        // call the geocoding API
    } else {
        // come back in decision.retry_after_ms
    }
    Ok(())
}
