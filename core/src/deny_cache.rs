//! The local deny cache: after Redis denies an acquire of cost c with retry
//! R, an acquire of the same limiter and tenant of cost >= c within R is
//! denied in-process, without a Redis call (docs/protocol.md, "Local deny
//! cache"). Pure: the binding passes its monotonic clock in milliseconds.
//!
//! Why it is safe: a denial records nothing, and with no reset a limit's
//! count only falls as time passes, so a request of cost >= c cannot pass
//! before the retry Redis gave for c (other traffic only makes it later).
//! A reset in this process, through any limiter, reaches every cache of the
//! process ([`forget_tenant`]), and a denial whose call was in flight while
//! a reset of its tenant's slot began or ended is not cached (Redis may have
//! run it before the `DEL`). What a cache cannot see is another process's
//! `reset`: a tenant reset elsewhere stays denied here until the cached retry
//! runs out.

use crate::decision::Decision;
use crate::error::{Error, Result};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

/// Resets seen in this process, counted per slot of tenants (a tenant's
/// slot is a hash of its name): an entry made before its slot's count moved
/// is dropped. Tenants that share a slot drop each other's entries, which
/// costs one Redis call, never a wrong denial. A process holds one table per
/// copy of this crate (one per wasm instance).
static RESETS: [AtomicU64; RESET_SLOTS] = [const { AtomicU64::new(0) }; RESET_SLOTS];
const RESET_SLOTS: usize = 1024;

/// FNV-1a: stable, and enough to spread tenants over the slots.
fn reset_slot(tenant: &str) -> usize {
    let hash = tenant.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (hash % RESET_SLOTS as u64) as usize
}

/// Every deny cache of this process (this copy of the crate) forgets
/// `tenant`: what a `reset` of the tenant through any limiter does. A
/// binding whose caches live in several copies (several wasm instances)
/// calls it in each.
pub fn forget_tenant(tenant: &str) {
    RESETS[reset_slot(tenant)].fetch_add(1, Ordering::AcqRel);
}

fn resets_of(slot: usize) -> u64 {
    RESETS[slot].load(Ordering::Acquire)
}

/// Entries a binding's cache holds when the caller names no capacity.
pub const DEFAULT_DENY_CACHE_CAPACITY: usize = 10_000;
/// The most entries a cache may be given.
pub const MAX_DENY_CACHE_CAPACITY: usize = 1 << 24;

#[derive(Debug, Clone)]
struct Entry {
    cost: u64,
    /// The Redis decision, and the monotonic time it arrived at.
    decision: Decision,
    at_ms: u64,
    /// Its position in the recency order.
    tick: u64,
    /// Its tenant's slot's count in `RESETS` when it was made.
    resets: u64,
}

/// A bounded (least recently used first out) map from tenant to its last
/// Redis denial. Not synchronized: a binding holds it behind its own lock.
#[derive(Debug, Clone)]
pub struct DenyCache {
    capacity: usize,
    entries: HashMap<String, Entry>,
    order: BTreeMap<u64, String>,
    next_tick: u64,
    /// Per slot of `RESETS`: the count this cache last saw, and the calls
    /// it no longer caches because a reset may have overtaken them.
    slots: Box<[SlotSeen]>,
    /// The latest send time this cache knows of: every `check`'s, `record`'s
    /// and `note_sent`'s.
    latest_ms: u64,
}

/// A reset is seen when a check or a record of a tenant of its slot next
/// looks. Every call sent before that (its time at most `latest_ms` then)
/// may have been run by Redis before the reset's `DEL`: a denial sent
/// before `stale_before_ms` is not cached. Later calls were checked after
/// the count moved, so were sent after the reset began.
#[derive(Debug, Clone, Copy)]
struct SlotSeen {
    resets: u64,
    stale_before_ms: u64,
}

impl DenyCache {
    /// A cache of at most `capacity` tenants (1 ..= [`MAX_DENY_CACHE_CAPACITY`]).
    pub fn new(capacity: usize) -> Result<DenyCache> {
        if capacity < 1 {
            return Err(Error::invalid(
                "deny_cache_capacity",
                "must be at least 1 (switch the cache off instead)",
            ));
        }
        if capacity > MAX_DENY_CACHE_CAPACITY {
            return Err(Error::invalid(
                "deny_cache_capacity",
                format!("{capacity} exceeds {MAX_DENY_CACHE_CAPACITY}"),
            ));
        }
        Ok(DenyCache {
            capacity,
            entries: HashMap::new(),
            order: BTreeMap::new(),
            next_tick: 0,
            slots: (0..RESET_SLOTS)
                .map(|slot| SlotSeen {
                    resets: resets_of(slot),
                    stale_before_ms: 0,
                })
                .collect(),
            latest_ms: 0,
        })
    }

    /// Notes a reset of `slot` since this cache last looked; returns the
    /// slot's count.
    fn look_at(&mut self, slot: usize) -> u64 {
        let resets = resets_of(slot);
        let seen = &mut self.slots[slot];
        if seen.resets != resets {
            seen.resets = resets;
            seen.stale_before_ms = self.latest_ms.saturating_add(1);
        }
        resets
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Tenants held now (expired entries count until they are next looked up
    /// or pushed out).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The local denial for an acquire of `cost` by `tenant` at monotonic
    /// time `now_ms`, or `None` when Redis must be asked: no entry, a cost
    /// below the cached one, or the cached retry has run out. A local denial
    /// is the cached one with every duration reduced by the time elapsed
    /// (`retry_after_ms` stays at least 1) and `now_ms` moved on by it.
    ///
    /// Every acquire whose answer goes to [`DenyCache::record`] is checked
    /// here first, with the same `now_ms`, before it is sent: that is how
    /// the cache tells a call a reset may have overtaken.
    pub fn check(&mut self, tenant: &str, cost: u64, now_ms: u64) -> Option<Decision> {
        let resets = self.look_at(reset_slot(tenant));
        self.latest_ms = self.latest_ms.max(now_ms);
        let entry = self.entries.get(tenant)?;
        let elapsed = now_ms.saturating_sub(entry.at_ms);
        if elapsed >= entry.decision.retry_after_ms || resets != entry.resets {
            self.remove(tenant);
            return None;
        }
        if cost < entry.cost {
            return None;
        }
        let cached = entry.decision;
        let old_tick = entry.tick;
        let tick = self.bump();
        if let Some(entry) = self.entries.get_mut(tenant) {
            entry.tick = tick;
        }
        if let Some(name) = self.order.remove(&old_tick) {
            self.order.insert(tick, name);
        }
        Some(Decision {
            allowed: false,
            remaining: cached.remaining,
            retry_after_ms: cached.retry_after_ms - elapsed,
            reset_after_ms: cached.reset_after_ms.saturating_sub(elapsed),
            now_ms: cached.now_ms.saturating_add(elapsed),
            denied_by: cached.denied_by,
        })
    }

    /// Tells the cache that acquires were sent up to monotonic time
    /// `latest_sent_ms` without [`DenyCache::check`] (a binding that skips
    /// it while the cache is empty). Call it before each
    /// [`DenyCache::record`] with the latest send time of any acquire of this
    /// limiter so far: a reset this record is the first to see may have
    /// overtaken any of them.
    pub fn note_sent(&mut self, latest_sent_ms: u64) {
        self.latest_ms = self.latest_ms.max(latest_sent_ms);
    }

    /// Notes what Redis answered an acquire of `cost` by `tenant` sent at
    /// monotonic time `now_ms`: the time taken before the call (the one
    /// given to `check`), not when the reply came. Redis decided somewhere in
    /// between, so a retry counted from the send never outlasts Redis's,
    /// while one counted from a slow reply would deny past it.
    ///
    /// A denial is cached (replacing the tenant's entry), unless a reset of
    /// its tenant's slot was seen after the call was checked: Redis may have
    /// run the call before the reset's `DEL`. An admission of a cost below
    /// the cached one drops the entry: the count grew, so its retry may now
    /// come too early. One of the same or a higher cost leaves it: no such
    /// acquire passes within the cached retry, so Redis ran it before the
    /// cached denial (both were in flight), which already counted it.
    pub fn record(&mut self, tenant: &str, cost: u64, decision: &Decision, now_ms: u64) {
        if decision.allowed {
            if self.entries.get(tenant).is_some_and(|e| cost < e.cost) {
                self.remove(tenant);
            }
            return;
        }
        self.remove(tenant);
        let slot = reset_slot(tenant);
        // A record without its check counts its own call as checked now;
        // other unchecked calls in flight only through `note_sent`.
        self.latest_ms = self.latest_ms.max(now_ms);
        let resets = self.look_at(slot);
        if decision.retry_after_ms == 0 || now_ms < self.slots[slot].stale_before_ms {
            return;
        }
        while self.entries.len() >= self.capacity {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            self.entries.remove(&oldest);
        }
        let tick = self.bump();
        self.order.insert(tick, tenant.to_owned());
        self.entries.insert(
            tenant.to_owned(),
            Entry {
                cost,
                decision: *decision,
                at_ms: now_ms,
                tick,
                resets,
            },
        );
    }

    /// A `reset` of `tenant` in this process: this cache and every other of
    /// the process ([`forget_tenant`]) drop its entry.
    pub fn forget(&mut self, tenant: &str) {
        forget_tenant(tenant);
        self.remove(tenant);
    }

    fn remove(&mut self, tenant: &str) {
        if let Some(entry) = self.entries.remove(tenant) {
            self.order.remove(&entry.tick);
        }
    }

    /// Drops every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.order.clear();
    }

    fn bump(&mut self) -> u64 {
        self.next_tick += 1;
        self.next_tick
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denial(retry: u64, reset: u64, now: u64) -> Decision {
        Decision {
            allowed: false,
            remaining: 0,
            retry_after_ms: retry,
            reset_after_ms: reset,
            now_ms: now,
            denied_by: Some(1),
        }
    }

    #[test]
    fn a_denial_answers_costs_at_least_its_own_until_the_retry() {
        let mut c = DenyCache::new(4).unwrap();
        c.record("t", 2, &denial(500, 900, 10_000), 1_000);
        assert_eq!(c.check("t", 1, 1_000), None, "a lower cost asks Redis");
        assert_eq!(c.check("other", 5, 1_000), None);
        let d = c.check("t", 3, 1_200).unwrap();
        assert_eq!(
            (
                d.allowed,
                d.retry_after_ms,
                d.reset_after_ms,
                d.now_ms,
                d.denied_by
            ),
            (false, 300, 700, 10_200, Some(1))
        );
        assert_eq!(c.check("t", 2, 1_499).unwrap().retry_after_ms, 1);
        assert_eq!(c.check("t", 2, 1_500), None, "the retry has run out");
        assert!(c.is_empty());
    }

    #[test]
    fn a_lower_cost_admission_or_a_reset_drops_the_entry() {
        let mut c = DenyCache::new(4).unwrap();
        c.record("t", 2, &denial(500, 500, 0), 0);
        let mut allowed = denial(0, 500, 0);
        allowed.allowed = true;
        // An admission of cost 2 or more came from Redis before the denial:
        // the denial stands.
        c.record("t", 2, &allowed, 10);
        c.record("t", 3, &allowed, 10);
        assert_eq!(c.check("t", 2, 20).unwrap().retry_after_ms, 480);
        // Cost 1 may pass after it, and then the count grew: dropped.
        c.record("t", 1, &allowed, 30);
        assert_eq!(c.check("t", 2, 30), None);
        // An admission with no entry caches nothing.
        c.record("t", 2, &allowed, 40);
        assert!(c.is_empty());
        // (Each test names its own tenants: a reset reaches every cache of
        // the process, those of the tests running beside this one too.)
        c.record("reset-t", 1, &denial(500, 500, 0), 0);
        c.forget("reset-t");
        assert_eq!(c.check("reset-t", 1, 10), None);
        c.record("reset-t", 1, &denial(500, 500, 0), 0);
        c.clear();
        assert!(c.is_empty());
    }

    #[test]
    fn a_reset_reaches_every_cache_of_the_process() {
        let (mut a, mut b) = (DenyCache::new(4).unwrap(), DenyCache::new(4).unwrap());
        for c in [&mut a, &mut b] {
            c.record("everywhere-t", 1, &denial(500, 500, 0), 0);
            c.record("everywhere-u", 1, &denial(500, 500, 0), 0);
        }
        assert_ne!(reset_slot("everywhere-t"), reset_slot("everywhere-u"));
        a.forget("everywhere-t");
        assert_eq!(b.check("everywhere-t", 1, 10), None, "reset through a");
        assert!(b.check("everywhere-u", 1, 10).is_some(), "another slot");
        // A denial Redis gives after the reset is cached as ever.
        b.record("everywhere-t", 1, &denial(500, 500, 0), 20);
        assert!(b.check("everywhere-t", 1, 30).is_some());
        // The same through the function a binding calls in each wasm instance.
        forget_tenant("everywhere-t");
        assert_eq!(b.check("everywhere-t", 1, 40), None);
        assert!(a.check("everywhere-u", 1, 40).is_some());
    }

    #[test]
    fn a_denial_a_reset_may_have_overtaken_is_not_cached() {
        // The tenants other tests reset are in other slots, or their resets
        // would make this test's last caching fail.
        for mine in ["inflight-t", "inflight-u"] {
            for theirs in ["reset-t", "everywhere-t", "inflight-v", "inflight-w"] {
                assert_ne!(reset_slot(mine), reset_slot(theirs));
            }
        }
        let mut c = DenyCache::new(4).unwrap();
        // Sent at 100; the reset (its forget before and after the DEL) ran
        // while it was in flight; Redis may have run it before the DEL.
        assert_eq!(c.check("inflight-t", 1, 100), None);
        forget_tenant("inflight-t");
        c.record("inflight-t", 1, &denial(500, 500, 0), 100);
        assert_eq!(c.check("inflight-t", 1, 101), None, "a stale denial");
        // One checked after the reset was seen is cached as ever, even
        // within the same millisecond as the first call after the reset.
        c.record("inflight-t", 1, &denial(500, 500, 0), 101);
        assert!(c.check("inflight-t", 1, 102).is_some());
        // Two in flight across a reset: both were checked before it was
        // seen (at 200 and 201), so neither is cached, whichever comes
        // back first, even after a later call of the tenant saw the reset.
        assert_eq!(c.check("inflight-u", 1, 200), None);
        assert_eq!(c.check("inflight-u", 1, 201), None);
        forget_tenant("inflight-u");
        assert_eq!(c.check("inflight-u", 1, 202), None);
        c.record("inflight-u", 1, &denial(500, 500, 0), 201);
        assert_eq!(c.check("inflight-u", 1, 203), None);
        c.record("inflight-u", 1, &denial(500, 500, 0), 200);
        assert_eq!(c.check("inflight-u", 1, 204), None);
        c.record("inflight-u", 1, &denial(500, 500, 0), 203);
        assert!(c.check("inflight-u", 1, 205).is_some());
        // A reset seen first by the record itself: not cached either.
        assert_eq!(c.check("inflight-v", 1, 300), None);
        forget_tenant("inflight-v");
        c.record("inflight-v", 1, &denial(500, 500, 0), 300);
        assert_eq!(c.check("inflight-v", 1, 301), None);
        // Another cache of the process, checked before the reset, also drops it.
        let mut other = DenyCache::new(4).unwrap();
        assert_eq!(other.check("inflight-w", 1, 7), None);
        c.forget("inflight-w");
        other.record("inflight-w", 1, &denial(500, 500, 0), 7);
        assert_eq!(other.check("inflight-w", 1, 8), None);
    }

    #[test]
    fn the_least_recently_used_goes_first() {
        let mut c = DenyCache::new(2).unwrap();
        c.record("a", 1, &denial(1000, 1000, 0), 0);
        c.record("b", 1, &denial(1000, 1000, 0), 0);
        assert!(c.check("a", 1, 1).is_some());
        c.record("c", 1, &denial(1000, 1000, 0), 2);
        assert_eq!(c.len(), 2);
        assert!(
            c.check("b", 1, 3).is_none(),
            "b was the least recently used"
        );
        assert!(c.check("a", 1, 3).is_some());
        assert!(c.check("c", 1, 3).is_some());
    }

    #[test]
    fn capacity_is_checked() {
        assert_eq!(
            DenyCache::new(0).unwrap_err().field(),
            Some("deny_cache_capacity")
        );
        assert!(DenyCache::new(MAX_DENY_CACHE_CAPACITY + 1).is_err());
        assert_eq!(
            DenyCache::new(DEFAULT_DENY_CACHE_CAPACITY)
                .unwrap()
                .capacity(),
            DEFAULT_DENY_CACHE_CAPACITY
        );
    }
}
