//! The synchronous API: the async [`crate::Limiter`] driven by a private
//! single-worker runtime, so blocking code needs no runtime of its own.

use crate::{Decision, Error, ErrorCode, MemoryEngine, Options, Policy, Result};
use std::sync::Arc;
use tokio::runtime::Runtime;

/// A blocking rate limiter; cheap to clone, usable from many threads.
#[derive(Clone)]
pub struct Limiter {
    runtime: Arc<Runtime>,
    inner: crate::Limiter,
}

fn runtime() -> Result<Arc<Runtime>> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("slidelimit-io")
        .enable_all()
        .build()
        .map(Arc::new)
        .map_err(|e| {
            Error::new(
                ErrorCode::Internal,
                format!("cannot start the I/O runtime: {e}"),
            )
        })
}

impl Limiter {
    pub fn connect(url: &str, policy: Policy, options: Options) -> Result<Limiter> {
        let runtime = runtime()?;
        let inner = runtime.block_on(crate::Limiter::connect(url, policy, options))?;
        Ok(Limiter { runtime, inner })
    }

    pub fn connect_cluster(urls: &[&str], policy: Policy, options: Options) -> Result<Limiter> {
        let runtime = runtime()?;
        let inner = runtime.block_on(crate::Limiter::connect_cluster(urls, policy, options))?;
        Ok(Limiter { runtime, inner })
    }

    /// See [`crate::Limiter::connect_lazy`]: no I/O until the first call.
    pub fn connect_lazy(url: &str, policy: Policy, options: Options) -> Result<Limiter> {
        let runtime = runtime()?;
        let inner = runtime.block_on(crate::Limiter::connect_lazy(url, policy, options))?;
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
            runtime.block_on(crate::Limiter::connect_cluster_lazy(urls, policy, options))?;
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
        self.runtime.block_on(self.inner.acquire(tenant))
    }

    pub fn acquire_n(&self, tenant: &str, cost: u64) -> Result<Decision> {
        self.runtime.block_on(self.inner.acquire_n(tenant, cost))
    }

    pub fn acquire_at(&self, tenant: &str, cost: u64, now_ms: u64) -> Result<Decision> {
        self.runtime
            .block_on(self.inner.acquire_at(tenant, cost, now_ms))
    }

    pub fn peek(&self, tenant: &str, cost: u64) -> Result<Decision> {
        self.runtime.block_on(self.inner.peek(tenant, cost))
    }

    pub fn peek_at(&self, tenant: &str, cost: u64, now_ms: u64) -> Result<Decision> {
        self.runtime
            .block_on(self.inner.peek_at(tenant, cost, now_ms))
    }

    pub fn reset(&self, tenant: &str) -> Result<()> {
        self.runtime.block_on(self.inner.reset(tenant))
    }
}
