//! What core adds to every check: building the call (validation, key, ARGV)
//! and parsing the five-integer reply. Target: under 1 microsecond together.
//!
//! Group `core` measures the CPU time of the benchmarking thread, so that other
//! processes on a busy machine (2 cores, parallel builds) do not count; group
//! `core-wall` repeats the headline check in wall time for comparison.
//!
//! `cargo bench -p slidelimit-core --bench check`

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use slidelimit_core::{Algorithm, Decision, MemoryEngine, Mode, Policy};
use std::hint::black_box;
use std::time::Duration;

const NOW_MS: u64 = 1_800_000_000_000;
const ALLOWED: [i64; 5] = [1, 599, 0, 60_000, 1_800_000_000_000];
const DENIED: [i64; 5] = [0, 0, 137, 59_863, 1_800_000_000_000];

/// CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID): unlike wall
/// time it leaves out the time other processes held the CPU.
struct ThreadCpuTime(WallTime);

fn thread_cpu_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and the clock id is a
    // constant every Linux kernel knows.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

impl Measurement for ThreadCpuTime {
    type Intermediate = Duration;
    type Value = Duration;

    fn start(&self) -> Duration {
        thread_cpu_now()
    }
    fn end(&self, start: Duration) -> Duration {
        thread_cpu_now().saturating_sub(start)
    }
    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }
    fn zero(&self) -> Duration {
        Duration::ZERO
    }
    fn to_f64(&self, value: &Duration) -> f64 {
        value.as_nanos() as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        // Same unit as wall time (nanoseconds), so the same formatting.
        self.0.formatter()
    }
}

fn policies() -> [Policy; 2] {
    [Algorithm::SlidingLog, Algorithm::SlidingCounter]
        .map(|a| Policy::new("rl", "geocode", a, 600, 60_000).expect("valid policy"))
}

fn check(c: &mut Criterion<ThreadCpuTime>) {
    let mut group = c.benchmark_group("core");
    for policy in policies() {
        let name = policy.algorithm().as_str();
        // Server time (the production default): ARGV[4] is empty.
        group.bench_function(BenchmarkId::new("build_call", name), |b| {
            b.iter(|| {
                policy
                    .build_call(black_box("tenant-17"), 1, None, Mode::Acquire)
                    .unwrap()
            })
        });
        group.bench_function(BenchmarkId::new("build_call_at", name), |b| {
            b.iter(|| {
                policy
                    .build_call(black_box("tenant-17"), 1, Some(NOW_MS), Mode::Acquire)
                    .unwrap()
            })
        });
        // One whole check as a binding does it, minus the network.
        group.bench_function(BenchmarkId::new("build_and_parse", name), |b| {
            b.iter(|| {
                let call = policy
                    .build_call(black_box("tenant-17"), 1, None, Mode::Acquire)
                    .unwrap();
                black_box(&call);
                Decision::from_reply(black_box(&ALLOWED), 1).unwrap()
            })
        });
        // The embedded engine (no Redis): a full 600-entry log or a counter in
        // steady state, time advancing one permit interval per check.
        group.bench_function(BenchmarkId::new("memory_engine_acquire", name), |b| {
            let engine = MemoryEngine::new();
            let mut now = NOW_MS;
            b.iter(|| {
                now += 100;
                engine.acquire(&policy, "tenant-17", 1, now).unwrap()
            })
        });
    }
    for (name, reply) in [("allowed", ALLOWED), ("denied", DENIED)] {
        group.bench_function(BenchmarkId::new("from_reply", name), |b| {
            b.iter(|| Decision::from_reply(black_box(&reply), 1).unwrap())
        });
    }
    // A tenant that needs escaping takes the slow path of key building.
    let log = &policies()[0];
    group.bench_function("build_call/escaped_tenant", |b| {
        b.iter(|| {
            log.build_call(black_box("team {a}%/ü"), 1, None, Mode::Acquire)
                .unwrap()
        })
    });
    group.finish();
}

/// The headline figure again, in wall time.
fn check_wall(c: &mut Criterion) {
    let mut group = c.benchmark_group("core-wall");
    for policy in policies() {
        group.bench_function(
            BenchmarkId::new("build_and_parse", policy.algorithm().as_str()),
            |b| {
                b.iter(|| {
                    let call = policy
                        .build_call(black_box("tenant-17"), 1, None, Mode::Acquire)
                        .unwrap();
                    black_box(&call);
                    Decision::from_reply(black_box(&ALLOWED), 1).unwrap()
                })
            },
        );
    }
    group.finish();
}

// Modest times: the machine has 2 cores shared with other builds.
fn config<M: Measurement>(c: Criterion<M>) -> Criterion<M> {
    c.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

criterion_group! {
    name = cpu;
    config = config(Criterion::default().with_measurement(ThreadCpuTime(WallTime)));
    targets = check
}
criterion_group! {
    name = wall;
    config = config(Criterion::default());
    targets = check_wall
}
criterion_main!(cpu, wall);
