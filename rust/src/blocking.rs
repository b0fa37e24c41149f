//! The synchronous API: the async [`crate::Limiter`] driven by a private
//! single-worker runtime, so blocking code needs no runtime of its own.

use crate::{Decision, Error, ErrorCode, Finding, MemoryEngine, Options, Policy, Result};
use std::future::Future;
use std::sync::Arc;
use tokio::runtime::{Handle, Runtime};

/// A blocking rate limiter; cheap to clone, usable from many threads. In
/// async code use [`crate::Limiter`]: a call from an async task works, but
/// blocks that task's worker thread until Redis answers. From
/// `spawn_blocking` or `block_in_place` it is what they are for.
#[derive(Clone)]
pub struct Limiter {
    runtime: Arc<Io>,
    inner: crate::Limiter,
}

/// The private runtime. Blocking on it, or dropping it, inside another
/// runtime's context may panic: a call there waits on a thread of its own,
/// and the last clone dropped there shuts it down in the background.
struct Io(Option<Runtime>);

impl Io {
    fn block_on<F>(&self, future: F) -> Result<F::Output>
    where
        F: Future + Send,
        F::Output: Send,
    {
        let Some(runtime) = &self.0 else {
            return Err(Error::new(ErrorCode::Internal, "the I/O runtime is gone"));
        };
        if Handle::try_current().is_err() {
            return Ok(runtime.block_on(future));
        }
        // In another runtime's context (an async task, spawn_blocking,
        // block_in_place), where tokio's block_on panics on a worker thread:
        // a thread without that context waits for the call instead.
        std::thread::scope(|scope| scope.spawn(|| runtime.block_on(future)).join())
            .map_err(|_| Error::new(ErrorCode::Internal, "the I/O call panicked"))
    }
}

impl Drop for Io {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            if Handle::try_current().is_ok() {
                runtime.shutdown_background();
            }
        }
    }
}

fn runtime() -> Result<Arc<Io>> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("slidelimit-io")
        .enable_all()
        .build()
        .map(|runtime| Arc::new(Io(Some(runtime))))
        .map_err(|e| {
            Error::new(
                ErrorCode::Internal,
                format!("cannot start the I/O runtime: {e}"),
            )
        })
}

/// See [`crate::check_server`]: what the server at `url` says in `INFO`
/// about running slidelimit on it.
pub fn check_server(url: &str, options: &Options) -> Result<Vec<Finding>> {
    runtime()?.block_on(crate::check_server(url, options))?
}

impl Limiter {
    pub fn connect(url: &str, policy: Policy, options: Options) -> Result<Limiter> {
        let runtime = runtime()?;
        let inner = runtime.block_on(crate::Limiter::connect(url, policy, options))??;
        Ok(Limiter { runtime, inner })
    }

    pub fn connect_cluster(urls: &[&str], policy: Policy, options: Options) -> Result<Limiter> {
        let runtime = runtime()?;
        let inner = runtime.block_on(crate::Limiter::connect_cluster(urls, policy, options))??;
        Ok(Limiter { runtime, inner })
    }

    /// See [`crate::Limiter::connect_lazy`]: no I/O until the first call.
    pub fn connect_lazy(url: &str, policy: Policy, options: Options) -> Result<Limiter> {
        let runtime = runtime()?;
        let inner = runtime.block_on(crate::Limiter::connect_lazy(url, policy, options))??;
        Ok(Limiter { runtime, inner })
    }

    /// See [`crate::Limiter::connect_cluster_lazy`].
    pub fn connect_cluster_lazy(
        urls: &[&str],
        policy: Policy,
        options: Options,
    ) -> Result<Limiter> {
        let runtime = runtime()?;
        let inner =
            runtime.block_on(crate::Limiter::connect_cluster_lazy(urls, policy, options))??;
        Ok(Limiter { runtime, inner })
    }

    pub fn memory(policy: Policy, options: Options) -> Result<Limiter> {
        Ok(Limiter {
            runtime: runtime()?,
            inner: crate::Limiter::memory(policy, options),
        })
    }

    /// See [`crate::Limiter::memory_on`].
    pub fn memory_on(
        engine: Arc<MemoryEngine>,
        policy: Policy,
        options: Options,
    ) -> Result<Limiter> {
        Ok(Limiter {
            runtime: runtime()?,
            inner: crate::Limiter::memory_on(engine, policy, options),
        })
    }

    pub fn policy(&self) -> &Policy {
        self.inner.policy()
    }

    pub fn acquire(&self, tenant: &str) -> Result<Decision> {
        self.runtime.block_on(self.inner.acquire(tenant))?
    }

    pub fn acquire_n(&self, tenant: &str, cost: u64) -> Result<Decision> {
        self.runtime.block_on(self.inner.acquire_n(tenant, cost))?
    }

    pub fn acquire_at(&self, tenant: &str, cost: u64, now_ms: u64) -> Result<Decision> {
        self.runtime
            .block_on(self.inner.acquire_at(tenant, cost, now_ms))?
    }

    pub fn peek(&self, tenant: &str, cost: u64) -> Result<Decision> {
        self.runtime.block_on(self.inner.peek(tenant, cost))?
    }

    pub fn peek_at(&self, tenant: &str, cost: u64, now_ms: u64) -> Result<Decision> {
        self.runtime
            .block_on(self.inner.peek_at(tenant, cost, now_ms))?
    }

    pub fn reset(&self, tenant: &str) -> Result<()> {
        self.runtime.block_on(self.inner.reset(tenant))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Algorithm;

    fn policy() -> Policy {
        Policy::new("rl", "geo", Algorithm::SlidingLog, 2, 1000).unwrap()
    }

    /// Inside an async runtime a call is a decision, not tokio's panic, and
    /// dropping the last clone there does not panic either.
    #[tokio::test]
    async fn inside_an_async_task_calls_run_and_drops_are_quiet() {
        let limiter = Limiter::memory(policy(), Options::default()).unwrap();
        assert!(limiter.acquire_at("t", 1, 1000).unwrap().allowed);
        // Made there too: a lazy limiter connects on its first call.
        assert!(
            Limiter::connect_lazy("redis://127.0.0.1:1/", policy(), Options::default()).is_ok()
        );
        drop(limiter.clone());
        drop(limiter);
    }

    /// tokio's own ways to call blocking code from async code.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn spawn_blocking_and_block_in_place_calls_run() {
        let limiter = Limiter::memory(policy(), Options::default()).unwrap();
        let on_pool = limiter.clone();
        let spawned = tokio::task::spawn_blocking(move || on_pool.acquire_at("t", 1, 1000));
        assert!(spawned.await.unwrap().unwrap().allowed);
        let in_place = tokio::task::block_in_place(|| limiter.acquire_at("t", 1, 1000));
        assert!(in_place.unwrap().allowed);
        assert!(!limiter.acquire_at("t", 1, 1000).unwrap().allowed);
    }

    #[test]
    fn outside_a_runtime_calls_run() {
        let limiter = Limiter::memory(policy(), Options::default()).unwrap();
        assert!(limiter.acquire_at("t", 1, 1000).unwrap().allowed);
    }
}
