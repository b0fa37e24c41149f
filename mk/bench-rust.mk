# Rust benchmarks, figures in docs/benchmarks.md: core's criterion benches
# (core/benches/check.rs), then the binding against raw redis-rs
# (rust/benches/acquire.rs) and the Redis side of each script with memory per
# tenant (rust/benches/redis_side.rs), all on one fresh redis-server.
# `--bench '*'` runs only the bench targets: the libraries' unit tests are no
# benchmarks and would only be rebuilt in release mode to be ignored.
BENCH_RUST_CMD = scripts/with-redis.sh $(CARGO) bench -p slidelimit-core -p slidelimit --bench '*'
