"""An independent model of the slidelimit contract, written from docs/protocol.md
(DESIGN.md, "The contract") and never from the Rust or Lua code.

Every expected value in conformance/vectors comes from here. Decisions are
found by brute force over the plain definitions (a sliding log is a list of
timestamps; "retry after" is the first future instant at which the same
acquire would pass; "remaining" is how many more acquires of cost 1 would pass
now), and each is then checked against the closed-form formulas of the
contract. Any disagreement raises ModelError: that is a finding about the
contract, not something to paper over.

Python 3 standard library only.
"""

from __future__ import annotations

import binascii
import bisect
import copy
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Union

MAX_LIMIT_TIMES_WINDOW = 2**52
MAX_NOW_MS = 2**52
# No reply field passes 2^53 (a double's exact integers): a bucketed check
# whose hints would is invalid_argument on now_ms (docs/protocol.md,
# "Bucketed window").
MAX_HINT_MS = 2**53
# The sliding log keeps one entry per permit; its limit is capped so that no
# check holds Redis for long (docs/protocol.md, "Policy and call validation").
MAX_LOG_LIMIT = 10_000
MAX_NAME_LEN = 64
MAX_TENANT_BYTES = 512
CLUSTER_SLOTS = 16384
NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
ALGORITHMS = {"sliding_log": "log", "sliding_counter": "counter", "bucketed_window": "bucketed"}
# The bucketed window: 1 <= buckets <= MAX_BUCKETS, buckets divides window_ms;
# a binding's caller that names no buckets gets DEFAULT_BUCKETS.
MAX_BUCKETS = 3600
DEFAULT_BUCKETS = 60
# A policy holds 1 to MAX_LIMITS limits (docs/protocol.md, "Several limits").
MAX_LIMITS = 8

# Brute-force searches walk millisecond by millisecond up to this many steps;
# past it (day-long windows) they use an exhaustive search over the instants
# where the state can change, which the linear walk cross-checks on every
# smaller case.
LINEAR_SCAN_LIMIT = 400_000
# "remaining" is found by really performing cost-1 acquires on a copy of the
# state, up to this many; beyond (limits near 2^42) only the formula is used.
SIMULATE_LIMIT = 5_000


class ModelError(AssertionError):
    """The brute force and the closed form of the contract disagree."""


class InvalidArgument(Exception):
    """The contract says: invalid_argument; args[0] is the field the error names."""

    @property
    def field(self) -> str:
        return self.args[0]


def agree(what: str, brute, formula) -> None:
    if brute != formula:
        raise ModelError(f"{what}: brute force gives {brute}, formula gives {formula}")


def agree_retry_is_exact(passes: Callable[[int], bool], first_pass: int) -> None:
    """A denial's retry hint names the first millisecond of the caller's
    clock at which the same check passes: it passes at `first_pass` (now +
    retry_after_ms) and not one millisecond earlier."""
    agree("retry: one ms earlier still denied", passes(first_pass - 1), False)
    agree("retry: passes at now + retry_after", passes(first_pass), True)


# ---------------------------------------------------------------- validation


def check_name(field: str, value: str) -> None:
    # Explicit character set: str.isalnum() would let "é" through.
    if not 1 <= len(value) <= MAX_NAME_LEN or any(c not in NAME_CHARS for c in value):
        raise InvalidArgument(field)


def check_tenant(tenant: str) -> None:
    # A lone surrogate (JSON's \ud800) has no UTF-8 form: no tenant.
    try:
        size = len(tenant.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgument("tenant") from None
    # The bound is in UTF-8 bytes, not characters.
    if not 1 <= size <= MAX_TENANT_BYTES:
        raise InvalidArgument("tenant")


def buckets_of(p: dict) -> int | None:
    """The policy's bucket count: as given, DEFAULT_BUCKETS for a bucketed
    policy that names none, None for the other algorithms when absent."""
    if "buckets" in p or p["algorithm"] == "bucketed_window":
        return bucket_count(p)
    return None


def bucket_count(p: dict) -> int:
    """A bucketed policy's bucket count: as given, else DEFAULT_BUCKETS."""
    return p.get("buckets", DEFAULT_BUCKETS)


def check_policy(p: dict) -> None:
    """In the order of docs/protocol.md, "Policy and call validation": the
    first rule broken names the field."""
    check_name("namespace", p["namespace"])
    check_name("resource", p["resource"])
    if p["limit"] < 1:
        raise InvalidArgument("limit")
    if p["window_ms"] < 1:
        raise InvalidArgument("window_ms")
    # Python integers do not overflow: 2^33 * 2^33 really is 2^66 here.
    if p["limit"] * p["window_ms"] > MAX_LIMIT_TIMES_WINDOW:
        raise InvalidArgument("limit")
    if p["algorithm"] == "sliding_log" and p["limit"] > MAX_LOG_LIMIT:
        raise InvalidArgument("limit")
    if p["algorithm"] == "bucketed_window":
        buckets = bucket_count(p)
        if not 1 <= buckets <= MAX_BUCKETS or p["window_ms"] % buckets != 0:
            raise InvalidArgument("buckets")
    elif buckets_of(p) is not None:
        # Only the bucketed window has buckets; naming them elsewhere is a mistake.
        raise InvalidArgument("buckets")


def check_step(p: dict, now_ms: int, tenant: str, cost: int) -> None:
    check_tenant(tenant)
    if not 1 <= cost <= p["limit"]:
        raise InvalidArgument("cost")
    if not 0 <= now_ms <= MAX_NOW_MS:
        raise InvalidArgument("now_ms")


def first_error_field(p: dict, step: dict) -> str | None:
    """The field the contract's error names for this policy and step, or None."""
    if "limits" in p:
        return first_multi_error_field(p, step)
    try:
        check_policy(p)
        check_step(p, step["now_ms"], step["tenant"], step["cost"])
    except InvalidArgument as err:
        return err.field
    return None


# ---------------------------------------------------------------------- keys


def escape_tenant(tenant: str) -> str:
    """Percent-encode %, {, }, bytes below 0x21 and 0x7F, byte by byte."""
    out = bytearray()
    for b in tenant.encode("utf-8"):
        if b < 0x21 or b == 0x7F or b in b"%{}":
            out += b"%%%02X" % b
        else:
            out.append(b)
    return out.decode("utf-8")


def cluster_slot(key: str) -> int:
    """Redis Cluster's rule: hash what lies between the first '{' and the next
    '}' when that is non-empty, else the whole key; CRC16/XMODEM mod 16384."""
    data = key.encode("utf-8")
    hashed = data
    start = data.find(b"{")
    if start >= 0:
        end = data.find(b"}", start + 1)
        if end > start + 1:
            hashed = data[start + 1 : end]
    return binascii.crc_hqx(hashed, 0) % CLUSTER_SLOTS


def derive_key(
    namespace: str,
    resource: str,
    tenant: str,
    algorithm: str,
    window_ms: int,
    buckets: int | None = None,
):
    """Returns (key, slot); raises InvalidArgument. A bucketed window's key
    ends with its bucket count (`buckets` already defaulted by the caller)."""
    check_name("namespace", namespace)
    check_name("resource", resource)
    check_tenant(tenant)
    escaped = escape_tenant(tenant)
    key = f"{namespace}:{{{resource}:{escaped}}}:{ALGORITHMS[algorithm]}:{window_ms}"
    if algorithm == "bucketed_window":
        key += f":{buckets}"
    slot = cluster_slot(key)
    # The hash tag must be exactly {resource:tenant}: one slot per tenant.
    agree(
        "slot of the hash tag",
        slot,
        binascii.crc_hqx(f"{resource}:{escaped}".encode(), 0) % CLUSTER_SLOTS,
    )
    return key, slot


# --------------------------------------------------------------- decisions


@dataclass
class Decision:
    allowed: bool
    remaining: int
    retry_after_ms: int
    reset_after_ms: int
    now_ms: int

    def as_dict(self) -> dict:
        return {
            "allowed": self.allowed,
            "remaining": self.remaining,
            "retry_after_ms": self.retry_after_ms,
            "reset_after_ms": self.reset_after_ms,
            "now_ms": self.now_ms,
        }


class SlidingLog:
    """The exact log of one key: a plain list of every admitted permit's
    timestamp, never trimmed (the model keeps what an implementation may drop,
    so a drop that changes a later decision shows as a disagreement).

    The time rule (docs/protocol.md, "Time"): callers' clocks may disagree, so
    a check at caller time `now` is evaluated at t = max(now, newest recorded
    admission) and an admission is recorded at t. retry_after and reset_after
    are relative to the caller's now."""

    def __init__(self, limit: int, window: int):
        self.limit = limit
        self.window = window
        self.entries: list[int] = []
        self.hits: set[str] = set()

    def counts_at(self, s: int, t: int) -> bool:
        # An entry at s no longer counts once s <= t - W.
        return s > t - self.window

    def count_at(self, t: int) -> int:
        return sum(1 for s in self.entries if self.counts_at(s, t))

    def eval_time(self, now: int, entries: list[int] | None = None) -> int:
        entries = self.entries if entries is None else entries
        return max([now, *entries])

    def caller_count(self, now: int) -> int:
        """What a check at caller time `now` counts."""
        return self.count_at(self.eval_time(now))

    def passes(self, now: int, cost: int) -> bool:
        return self.caller_count(now) + cost <= self.limit

    def acquire(self, now: int, cost: int) -> Decision:
        W, L = self.window, self.limit
        t = self.eval_time(now)
        if t > now:
            self.hits.add("log-lagging-caller")
        live = sorted(s for s in self.entries if self.counts_at(s, t))
        count = len(live)
        allowed = count + cost <= L
        if allowed:
            self.entries += [t] * cost
        elif (
            self.entries
            and now > max(self.entries)
            and any(
                not self.counts_at(s, now) and self.counts_at(s, max(self.entries))
                for s in self.entries
            )
        ):
            # A leading caller denied while some entry is expired for its clock
            # but not at the newest admission (the case of issue 12).
            self.hits.add("log-leading-denied")

        remaining = self._brute_remaining(now)
        reset_after = self._brute_reset(now)
        retry_after = 0 if allowed else self._brute_retry(now, cost)

        # The closed forms of the contract.
        if allowed:
            agree("log remaining", remaining, L - count - cost)
            agree("log reset_after", reset_after, t + W - now)
        else:
            k = count + cost - L
            self.hits.add("log-denied-k=1" if k == 1 else "log-denied-k>1")
            agree("log remaining", remaining, max(0, L - count))
            agree("log retry_after (k-th oldest)", retry_after, live[k - 1] + W - now)
            agree("log reset_after", reset_after, max(self.entries) + W - now)
            if retry_after <= 0:
                raise ModelError("a denial must carry retry_after > 0")
        self.check_rolling_windows()
        return Decision(allowed, remaining, retry_after, reset_after, now)

    def check_rolling_windows(self) -> None:
        """The guarantee, by brute force over the recorded admissions: no
        window [x, x + W) holds more than limit of them (it suffices to start
        x at each admission)."""
        ordered = sorted(self.entries)
        for i, x in enumerate(ordered):
            inside = bisect.bisect_left(ordered, x + self.window) - i
            if inside > self.limit:
                raise ModelError(
                    f"{inside} admissions in [{x}, {x + self.window}) against a limit of {self.limit}"
                )

    def _brute_remaining(self, now: int) -> int:
        headroom_hint = self.limit - self.caller_count(now)
        if headroom_hint > SIMULATE_LIMIT:
            return max(0, headroom_hint)  # formula only; see SIMULATE_LIMIT
        copy = list(self.entries)
        n = 0
        # Really perform cost-1 acquires at the same caller instant until one fails.
        while True:
            t = self.eval_time(now, copy)
            if sum(1 for s in copy if self.counts_at(s, t)) + 1 > self.limit:
                return n
            copy.append(t)
            n += 1

    def _change_points(self, now: int) -> list[int]:
        # caller_count(now') only changes when max(now', newest) passes some s + W.
        return sorted({now} | {s + self.window for s in self.entries if s + self.window > now})

    def _first_instant(self, now: int, ok) -> int:
        """First caller time t >= now with ok(t), no other traffic: exhaustive
        over the change points, and walked ms by ms as well when that is
        affordable."""
        by_events = next(t for t in self._change_points(now) if ok(t))
        if by_events - now <= LINEAR_SCAN_LIMIT:
            ordered = sorted(self.entries)
            newest = ordered[-1] if ordered else now

            def fast_count(t: int) -> int:
                return len(ordered) - bisect.bisect_right(ordered, max(t, newest) - self.window)

            t = now
            while not ok(t, fast_count(t)):
                t += 1
            agree("first instant, ms walk vs change points", t, by_events)
        return by_events

    def _brute_retry(self, now: int, cost: int) -> int:
        def ok(t, count=None):
            count = self.caller_count(t) if count is None else count
            return count + cost <= self.limit

        return self._first_instant(now, ok) - now

    def _brute_reset(self, now: int) -> int:
        def ok(t, count=None):
            return (self.caller_count(t) if count is None else count) == 0

        return self._first_instant(now, ok) - now


class SlidingCounter:
    """The sliding window counter of one key: window start -> permits admitted."""

    def __init__(self, limit: int, window: int):
        self.limit = limit
        self.window = window
        self.counts: dict[int, int] = {}
        self.hits: set[str] = set()

    def window_of(self, t: int):
        start = t - t % self.window
        return start, t - start

    def ab(self, t: int):
        start, e = self.window_of(t)
        return self.counts.get(start, 0), self.counts.get(start - self.window, 0), e

    def passes(self, t: int, cost: int, extra_a: int = 0) -> bool:
        W, L = self.window, self.limit
        a, b, e = self.ab(t)
        a += extra_a
        # The estimate test, in integers.
        return a * W + b * (W - e) + cost * W <= L * W

    def weight_at(self, t: int) -> int:
        """What still counts at t, scaled by W (0 = nothing)."""
        a, b, e = self.ab(t)
        return a * self.window + b * (self.window - e)

    def acquire(self, now: int, cost: int) -> Decision:
        W, L = self.window, self.limit
        start, e = self.window_of(now)
        a, b, _ = self.ab(now)
        allowed = self.passes(now, cost)
        a_after = a
        if allowed:
            a_after = a + cost
            self.counts[start] = a_after
            # Drop windows older than the previous one.
            self.counts = {s: n for s, n in self.counts.items() if s >= start - W}

        remaining = self._brute_remaining(now)
        reset_after = self._first_instant(now, lambda t: self.weight_at(t) == 0) - now
        retry_after = (
            0 if allowed else self._first_instant(now, lambda t: self.passes(t, cost)) - now
        )

        # The closed forms of the contract.
        agree("counter remaining", remaining, max(0, (L * W - a_after * W - b * (W - e)) // W))
        if a_after > 0:
            want_reset = start + 2 * W - now
        elif b > 0:
            want_reset = start + W - now
        else:
            want_reset = 0
        agree("counter reset_after", reset_after, want_reset)
        if not allowed:
            want_retry = None
            if a + cost <= L and b > 0:
                x = W - (L - cost - a) * W // b
                if x < W:
                    want_retry = max(x, e) - e
                    self.hits.add("counter-retry-same-window")
            if want_retry is None:
                x_next = 0 if a == 0 else max(0, W - (L - cost) * W // a)
                want_retry = (W - e) + x_next
                self.hits.add("counter-retry-next-window")
                self.hits.add(
                    "counter-retry-next-window-over-limit"
                    if a + cost > L
                    else "counter-retry-next-window-weight"
                )
                if x_next == 0:
                    self.hits.add("counter-retry-next-window-start")
                if x_next == W:
                    self.hits.add("counter-retry-window-after-next")
            agree("counter retry_after", retry_after, want_retry)
            if retry_after <= 0:
                raise ModelError("a denial must carry retry_after > 0")
        return Decision(allowed, remaining, retry_after, reset_after, now)

    def _brute_remaining(self, now: int) -> int:
        a, b, e = self.ab(now)
        hint = (self.limit * self.window - a * self.window - b * (self.window - e)) // self.window
        if hint > SIMULATE_LIMIT:
            return hint  # formula only; see SIMULATE_LIMIT
        n = 0
        # Really perform cost-1 acquires at the same instant until one fails.
        while self.passes(now, 1, extra_a=n):
            n += 1
        return n

    def _first_instant(self, now: int, ok) -> int:
        """First t >= now with ok(t), no other traffic.

        Within one window a and b are fixed and the previous window's weight
        only falls as e grows, so ok is monotone there: binary-search each of
        the windows now's, the next and the one after (by then a = b = 0 and
        everything passes). Walked ms by ms as well when that is affordable."""
        W = self.window
        start, _e = self.window_of(now)
        found = None
        for lo in (now, start + W, start + 2 * W):
            hi = self.window_of(lo)[0] + W - 1
            if not ok(hi):
                continue
            while lo < hi:
                mid = (lo + hi) // 2
                if ok(mid):
                    hi = mid
                else:
                    lo = mid + 1
            found = lo
            break
        if found is None:
            raise ModelError("nothing passes within two windows")
        if found - now <= LINEAR_SCAN_LIMIT:
            t = now
            while not ok(t):
                t += 1
            agree("first instant, ms walk vs per-window search", t, found)
        return found


class BucketedWindow:
    """The bucketed window of one key (docs/protocol.md, "Bucketed window"),
    from its definitions: a plain list of every admission as recorded, (r,
    bucket of r, permits), never trimmed. With g = W / N, a permit recorded at
    r belongs to bucket b = floor(r / g) and counts for every now' with
    r <= now' < x_b = (b + 1)*g - 1 + W. Checks follow the time rule: a check
    at caller time `now` is evaluated at t = max(now, newest recorded
    admission) and an admission is recorded at t. Nothing here knows about
    the hash the scripts keep (t, n, o, bucket fields)."""

    def __init__(self, limit: int, window: int, buckets: int):
        if window % buckets:
            raise ModelError("buckets must divide window_ms")
        self.limit = limit
        self.window = window
        self.width = window // buckets
        self.admissions: list[tuple[int, int, int]] = []
        self.hits: set[str] = set()

    def bucket_of(self, r: int) -> int:
        return r // self.width

    def expiry(self, b: int) -> int:
        """x_b: the first instant at which a permit of bucket b no longer counts."""
        return (b + 1) * self.width - 1 + self.window

    def eval_time(self, now: int, admissions: list | None = None) -> int:
        admissions = self.admissions if admissions is None else admissions
        return max([now] + [r for r, _, _ in admissions])

    def live_at(self, t: int, admissions: list | None = None) -> list[tuple[int, int, int]]:
        admissions = self.admissions if admissions is None else admissions
        return [(r, b, n) for r, b, n in admissions if r <= t < self.expiry(b)]

    def count_at(self, t: int, admissions: list | None = None) -> int:
        return sum(n for _, _, n in self.live_at(t, admissions))

    def caller_count(self, now: int) -> int:
        return self.count_at(self.eval_time(now))

    def passes(self, now: int, cost: int) -> bool:
        return self.caller_count(now) + cost <= self.limit

    def log_count_at(self, t: int) -> int:
        """What the sliding log would count at t over the same admissions."""
        return sum(n for r, _, n in self.admissions if t - self.window < r <= t)

    def acquire(self, now: int, cost: int) -> Decision:
        L = self.limit
        t = self.eval_time(now)
        # The largest hint this check could give: the reset of an admission at t.
        if self.expiry(self.bucket_of(t)) - now > MAX_HINT_MS:
            raise InvalidArgument("now_ms")
        if t > now:
            self.hits.add("bucketed-lagging-caller")
        live = self.live_at(t)
        count = sum(n for _, _, n in live)
        allowed = count + cost <= L
        if not allowed:
            if self.log_count_at(t) + cost <= L:
                # Held to the end of its bucket: the log would have admitted.
                self.hits.add("bucketed-denied-where-log-allows")
            newest = max(r for r, _, _ in self.admissions)
            if now > newest and any(newest < self.expiry(b) <= now for _, b, _ in self.admissions):
                # A leading caller denied while a bucket is expired for its own
                # clock but not at the newest admission: nothing is dropped.
                self.hits.add("bucketed-leading-denied")
        if allowed:
            self.admissions.append((t, self.bucket_of(t), cost))

        remaining = self._brute_remaining(now)
        reset_after = self._first_instant(now, lambda c: c == 0) - now
        retry_after = 0 if allowed else self._first_instant(now, lambda c: c + cost <= L) - now

        # The closed forms of the contract.
        if allowed:
            agree("bucketed remaining", remaining, L - count - cost)
            agree("bucketed reset_after", reset_after, self.expiry(self.bucket_of(t)) - now)
        else:
            need = count + cost - L
            per_bucket: dict[int, int] = {}
            for _, b, n in live:
                per_bucket[b] = per_bucket.get(b, 0) + n
            summed, b_star = 0, None
            for b in sorted(per_bucket):
                summed += per_bucket[b]
                if summed >= need:
                    b_star = b
                    break
            if b_star is None:
                raise ModelError("denied, but the live buckets never sum to need")
            self.hits.add(
                "bucketed-denied-oldest-bucket"
                if b_star == min(per_bucket)
                else "bucketed-denied-later-bucket"
            )
            newest = max(r for r, _, _ in self.admissions)
            agree("bucketed remaining", remaining, max(0, L - count))
            agree("bucketed retry_after (bucket b*)", retry_after, self.expiry(b_star) - now)
            agree("bucketed reset_after", reset_after, self.expiry(self.bucket_of(newest)) - now)
            if retry_after <= 0:
                raise ModelError("a denial must carry retry_after > 0")
        self.check_rolling_windows()
        return Decision(allowed, remaining, retry_after, reset_after, now)

    def check_rolling_windows(self) -> None:
        """The guarantee, by brute force over the recorded admissions: no
        window [x, x + W) holds more than limit of them (x at each admission)."""
        ordered = sorted((r, n) for r, _, n in self.admissions)
        times = [r for r, _ in ordered]
        prefix = [0]
        for _, n in ordered:
            prefix.append(prefix[-1] + n)
        for i, x in enumerate(times):
            inside = prefix[bisect.bisect_left(times, x + self.window)] - prefix[i]
            if inside > self.limit:
                raise ModelError(
                    f"{inside} admissions in [{x}, {x + self.window}) against a limit of {self.limit}"
                )

    def _brute_remaining(self, now: int) -> int:
        headroom_hint = self.limit - self.caller_count(now)
        if headroom_hint > SIMULATE_LIMIT:
            return max(0, headroom_hint)  # formula only; see SIMULATE_LIMIT
        trial = list(self.admissions)
        n = 0
        # Really perform cost-1 acquires at the same caller instant until one fails.
        while True:
            t = self.eval_time(now, trial)
            if self.count_at(t, trial) + 1 > self.limit:
                return n
            trial.append((t, self.bucket_of(t), 1))
            n += 1

    def _first_instant(self, now: int, ok) -> int:
        """First caller time t >= now at which ok(count) holds, no other
        traffic: exhaustive over the instants where the count can change (now
        and each x_b), and walked ms by ms as well when that is affordable."""
        changes = sorted(
            {now} | {self.expiry(b) for _, b, _ in self.admissions if self.expiry(b) > now}
        )
        by_events = next(t for t in changes if ok(self.caller_count(t)))
        if by_events - now <= LINEAR_SCAN_LIMIT:
            newest = self.eval_time(0)
            ends = sorted((self.expiry(b), n) for _, b, n in self.admissions)
            keys = [x for x, _ in ends]
            suffix = [0] * (len(ends) + 1)
            for i in range(len(ends) - 1, -1, -1):
                suffix[i] = suffix[i + 1] + ends[i][1]

            def fast_count(t: int) -> int:
                return suffix[bisect.bisect_right(keys, max(t, newest))]

            t = now
            while not ok(fast_count(t)):
                t += 1
            agree("first instant, ms walk vs change points", t, by_events)
        return by_events


# The state of one key, whichever the algorithm.
Engine = Union[SlidingLog, SlidingCounter, BucketedWindow]


# ----------------------------------------------------------------- vectors


# ------------------------------------------------------------ several limits


def limit_policy(policy: dict, limit: dict) -> dict:
    """One limit of a policy of several, as a policy of its own."""
    return {"namespace": policy["namespace"], "resource": policy["resource"], **limit}


def check_multi_policy(p: dict) -> None:
    """Names first, then the count of limits, then each limit in order by the
    one-limit rules (named limits[i].<field> when there are several), then no
    two limits on one key (same algorithm, window and bucket count)."""
    check_name("namespace", p["namespace"])
    check_name("resource", p["resource"])
    limits = p["limits"]
    if not 1 <= len(limits) <= MAX_LIMITS:
        raise InvalidArgument("limits")
    for i, limit in enumerate(limits):
        try:
            check_policy(limit_policy(p, limit))
        except InvalidArgument as err:
            raise InvalidArgument(
                err.field if len(limits) == 1 else f"limits[{i}].{err.field}"
            ) from None
    seen = set()
    for limit in limits:
        where = (limit["algorithm"], limit["window_ms"], buckets_of(limit))
        if where in seen:
            raise InvalidArgument("limits")
        seen.add(where)


def check_multi_step(p: dict, now_ms: int, tenant: str, cost: int) -> None:
    check_tenant(tenant)
    if not 1 <= cost <= min(limit["limit"] for limit in p["limits"]):
        raise InvalidArgument("cost")
    if not 0 <= now_ms <= MAX_NOW_MS:
        raise InvalidArgument("now_ms")


def first_multi_error_field(p: dict, step: dict) -> str | None:
    try:
        check_multi_policy(p)
        check_multi_step(p, step["now_ms"], step["tenant"], step["cost"])
    except InvalidArgument as err:
        return err.field
    return None


def derive_multi_steps(policy: dict, steps: list[dict], hits: set | None = None) -> list[dict]:
    """A policy of several limits: each limit is its own engine on its own
    key; a step passes iff every limit would pass it, and only then records
    in each. The aggregate (remaining the smallest, reset the largest, retry
    the largest of the denying limits, denied_by the first limit giving it)
    is checked by brute force: at now + retry every limit passes, one ms
    earlier some limit does not."""
    try:
        check_multi_policy(policy)
    except InvalidArgument:
        return [{"error": "invalid_argument"} for _ in steps]
    limits = [limit_policy(policy, limit) for limit in policy["limits"]]
    state: dict[str, Engine] = {}
    out = []
    for step in steps:
        now, cost, tenant = step["now_ms"], step["cost"], step["tenant"]
        try:
            check_multi_step(policy, now, tenant, cost)
        except InvalidArgument:
            out.append({"error": "invalid_argument"})
            continue
        engines = []
        for lp in limits:
            key, _ = derive_key(
                lp["namespace"],
                lp["resource"],
                tenant,
                lp["algorithm"],
                lp["window_ms"],
                buckets_of(lp),
            )
            engines.append(state.setdefault(key, new_engine(lp)))
        trial_engines = [copy.deepcopy(e) for e in engines]
        try:
            trial = [te.acquire(now, cost) for te in trial_engines]
        except InvalidArgument:
            out.append({"error": "invalid_argument"})
            continue
        allowed = all(d.allowed for d in trial)
        if allowed and not step.get("peek"):
            for e, d in zip(engines, trial):
                agree("a recording limit decides as its trial", e.acquire(now, cost), d)

        result = {
            "allowed": allowed,
            "remaining": min(d.remaining for d in trial),
            "retry_after_ms": 0,
            "reset_after_ms": max(d.reset_after_ms for d in trial),
            "now_ms": now,
        }
        if not allowed:
            retry = max(d.retry_after_ms for d in trial)
            agree_retry_is_exact(partial(all_pass, engines, cost=cost), now + retry)
            result["retry_after_ms"] = retry
            if len(limits) > 1:
                result["denied_by"] = next(
                    i for i, d in enumerate(trial) if d.retry_after_ms == retry and not d.allowed
                )
        out.append(result)
        if hits is not None:
            for te in trial_engines:
                hits |= te.hits
            if not allowed and len(limits) > 1:
                denying = sum(1 for d in trial if not d.allowed)
                hits.add("multi-denied-by-one" if denying == 1 else "multi-denied-by-several")
    return out


def all_pass(engines: list[Engine], at: int, cost: int) -> bool:
    """Whether every limit would admit `cost` at `at`, recording nothing."""
    return all(copy.deepcopy(e).acquire(at, cost).allowed for e in engines)


def new_engine(policy: dict) -> Engine:
    if policy["algorithm"] == "sliding_log":
        return SlidingLog(policy["limit"], policy["window_ms"])
    if policy["algorithm"] == "sliding_counter":
        return SlidingCounter(policy["limit"], policy["window_ms"])
    return BucketedWindow(policy["limit"], policy["window_ms"], bucket_count(policy))


def derive_decision_steps(policy: dict, steps: list[dict], hits: set | None = None) -> list[dict]:
    """Expectations for each step of a decision vector, from empty state;
    `hits` collects which denial cases of the contract the vector reaches. A
    step with "peek": true decides as acquire would and writes nothing."""
    if "limits" in policy:
        return derive_multi_steps(policy, steps, hits)
    try:
        check_policy(policy)
    except InvalidArgument:
        return [{"error": "invalid_argument"} for _ in steps]
    state: dict[str, Engine] = {}
    out = []
    for step in steps:
        try:
            check_step(policy, step["now_ms"], step["tenant"], step["cost"])
        except InvalidArgument:
            out.append({"error": "invalid_argument"})
            continue
        # State lives per derived key: tenants that escape alike would share it.
        key, _ = derive_key(
            policy["namespace"],
            policy["resource"],
            step["tenant"],
            policy["algorithm"],
            policy["window_ms"],
            buckets_of(policy),
        )
        engine = state.setdefault(key, new_engine(policy))
        if step.get("peek"):
            # The same decision on a throwaway copy: peek writes nothing.
            engine = copy.deepcopy(engine)
        try:
            out.append(engine.acquire(step["now_ms"], step["cost"]).as_dict())
        except InvalidArgument:
            out.append({"error": "invalid_argument"})
            continue
        if hits is not None:
            hits |= engine.hits
    return out


def derive_key_expect(inp: dict) -> dict:
    # A key is asked of a policy built with limit 1 (conformance/check.py), so
    # the policy's own rules (window_ms, buckets) apply too.
    policy = {**{k: inp[k] for k in inp if k != "tenant"}, "limit": 1}
    try:
        check_policy(policy)
        key, slot = derive_key(
            inp["namespace"],
            inp["resource"],
            inp["tenant"],
            inp["algorithm"],
            inp["window_ms"],
            buckets_of(policy),
        )
    except InvalidArgument:
        return {"error": "invalid_argument"}
    return {"key": key, "slot": slot}


def self_test() -> None:
    # CRC16/XMODEM check value, and the example of the Redis Cluster specification.
    agree("crc16('123456789')", binascii.crc_hqx(b"123456789", 0), 0x31C3)
    agree(
        "slot of {user1000}",
        cluster_slot("{user1000}.following"),
        cluster_slot("{user1000}.followers"),
    )
    agree(
        "slot of foo{}{bar}", cluster_slot("foo{}{bar}"), binascii.crc_hqx(b"foo{}{bar}", 0) % 16384
    )
    agree("escape", escape_tenant("a}b{%\x00 \x7f!~é"), "a%7Db%7B%25%00%20%7F!~é")
    skewed_clocks_self_test()
    bucketed_self_test()


def skewed_clocks_self_test(runs: int = 40, steps: int = 30, seed: int = 12) -> None:
    """The time rule's guarantee over random sequences with skewed caller
    clocks (callers up to 1.5 W behind or ahead): every step's acquire checks
    that no window [x, x + W) of recorded admissions holds more than the
    limit, that the decision agrees with the closed forms, and that the retry
    hint is the first caller time at which the same check passes. Also shows
    the rule is needed: a log that drops what is expired at the caller's own
    now (issue 12) goes over the limit on some of these sequences."""
    rng = random.Random(seed)
    naive_over = 0
    for _ in range(runs):
        limit, window = rng.randint(1, 5), rng.choice([1000, 1500, 2000])
        log = SlidingLog(limit, window)
        naive: list[int] = []  # drops at the caller's now, records at max(now, newest live)
        naive_recorded: list[int] = []
        base = 1_000_000
        for _ in range(steps):
            base += rng.randrange(window // 2)
            now = base + rng.randrange(3 * window) - 3 * window // 2
            cost = rng.randint(1, limit)
            d = log.acquire(now, cost)
            if not d.allowed:
                probe = SlidingLog(limit, window)
                probe.entries = list(log.entries)
                agree_retry_is_exact(partial(probe.passes, cost=cost), now + d.retry_after_ms)
            naive = [s for s in naive if s > now - window]
            if len(naive) + cost <= limit:
                r = max([now, *naive])
                naive += [r] * cost
                naive_recorded += [r] * cost
        ordered = sorted(naive_recorded)
        if any(bisect.bisect_left(ordered, x + window) - i > limit for i, x in enumerate(ordered)):
            naive_over += 1
    if naive_over == 0:
        raise ModelError(
            "the skewed sequences never show the flaw the time rule fixes; make them harsher"
        )


def divisors(n: int) -> list[int]:
    return [d for d in range(1, min(n, MAX_BUCKETS) + 1) if n % d == 0]


def bucketed_self_test(runs: int = 60, steps: int = 30, seed: int = 13) -> None:
    """The bucketed window over random sequences with skewed caller clocks
    (callers up to 1.5 W behind or ahead), at random bucket counts: every
    acquire checks its rolling windows and closed forms (in acquire), the
    retry hint is exact for the caller's clock, and at g = 1 every decision
    equals the sliding log's; at g > 1 it never admits what the log denies
    (a permit is only ever held longer)."""
    rng = random.Random(seed)
    for run in range(runs):
        limit, window = rng.randint(1, 5), rng.choice([1000, 1200, 1500, 2000])
        buckets = window if run % 3 == 0 else rng.choice(divisors(window))
        engine = BucketedWindow(limit, window, buckets)
        log = SlidingLog(limit, window)
        base = 1_000_000
        for _ in range(steps):
            base += rng.randrange(window // 2)
            now = base + rng.randrange(3 * window) - 3 * window // 2
            cost = rng.randint(1, limit)
            log_would = log.passes(now, cost)
            d = engine.acquire(now, cost)
            if d.allowed and not log_would:
                raise ModelError(
                    f"bucketed admits at {now} what the log over the same admissions denies"
                )
            if buckets == window:
                agree("g = 1: the log's decision", log.acquire(now, cost), d)
            else:
                # Keep the log on the bucketed admissions, to compare the next step.
                log.entries = [r for r, _, n in engine.admissions for _ in range(n)]
            if not d.allowed:
                probe = copy.deepcopy(engine)
                agree_retry_is_exact(partial(probe.passes, cost=cost), now + d.retry_after_ms)
                agree(
                    "reset: something still counts one ms earlier",
                    probe.caller_count(now + d.reset_after_ms - 1) > 0,
                    True,
                )
                agree(
                    "reset: nothing counts at now + reset_after",
                    probe.caller_count(now + d.reset_after_ms),
                    0,
                )
