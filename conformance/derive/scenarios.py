"""The conformance scenarios: inputs only. generate.py fills in every
expectation from model.py.

Rules every decision scenario keeps (checked by generate.py):
- window_ms >= 1000 wherever a step can succeed: Redis expires keys on its own
  clock while steps use caller time, so a vector must never depend on a key
  expiring (or not) between two steps;
- now_ms never goes backwards, except in vectors marked clock_regression
  (sliding log and bucketed window only: the time rule, t = max(now, newest
  recorded admission));
- a bucketed policy names its buckets, except the vectors named
  `*default-buckets*`, which show that a binding's default is 60;
- a bucketed vector at g = 1 (buckets = window_ms) expects exactly what the
  sliding log's model gives for the same steps, and every sliding-log
  decision vector with window_ms <= 3600 has such a replay, `bucketed/g1/*`;
- `_field` (validation vectors) is the field the first step's error names in
  the model's order of the rules (the decision log carries only the code);
- `hits` names the denial cases of the contract a vector claims to pin; the
  model must actually reach each of them.
"""

from __future__ import annotations

P52 = 2**52
# 2025-11-30T04:00:00Z: a realistic caller clock, a multiple of 60,000.
T0 = 1_764_475_200_000
DAY = 86_400_000
# T0 rounded down to a multiple of 1024, for vectors that aim at exact offsets
# inside 1024 ms windows.
T0_1024 = T0 - T0 % 1024


def S(now_ms: int, cost: int = 1, tenant: str = "t-1") -> dict:
    return {"now_ms": now_ms, "tenant": tenant, "cost": cost}


def P(now_ms: int, cost: int = 1, tenant: str = "t-1") -> dict:
    """A peek: decides as an acquire would and records nothing."""
    return {**S(now_ms, cost, tenant), "peek": True}


def key(
    name,
    comment,
    tenant="tenant-17",
    namespace="rl",
    resource="geocode",
    algorithm="sliding_log",
    window_ms=60_000,
    buckets=None,
):
    v = {
        "name": name,
        "kind": "key",
        "comment": comment,
        "input": {
            "namespace": namespace,
            "resource": resource,
            "tenant": tenant,
            "algorithm": algorithm,
            "window_ms": window_ms,
        },
    }
    if buckets is not None:
        v["input"]["buckets"] = buckets
    return v


def decision(
    name,
    comment,
    algorithm,
    limit,
    window_ms,
    steps,
    namespace="rl",
    resource=None,
    hits=(),
    clock_regression=False,
    buckets=None,
    field=None,
):
    # Each vector gets its own resource, so vectors never share a key even if a
    # runner forgot to clear one.
    if resource is None:
        resource = name.replace("/", "-")
    v = {
        "name": name,
        "kind": "decision",
        "comment": comment,
        "policy": {
            "namespace": namespace,
            "resource": resource,
            "algorithm": algorithm,
            "limit": limit,
            "window_ms": window_ms,
        },
        "steps": steps,
        "_hits": set(hits),
        "_clock_regression": clock_regression,
        "_field": field,
    }
    if buckets is not None:
        v["policy"]["buckets"] = buckets
    return v


def log(name, comment, limit, window_ms, steps, **kw):
    return decision(name, comment, "sliding_log", limit, window_ms, steps, **kw)


def counter(name, comment, limit, window_ms, steps, **kw):
    return decision(name, comment, "sliding_counter", limit, window_ms, steps, **kw)


def bucketed(name, comment, limit, window_ms, buckets, steps, **kw):
    """buckets=None leaves the field out (the `*default-buckets*` vectors)."""
    return decision(
        name, comment, "bucketed_window", limit, window_ms, steps, buckets=buckets, **kw
    )


# ---------------------------------------------------------------------- keys

KEYS = [
    key(
        "key/plain",
        "The key format <namespace>:{<resource>:<tenant>}:<tag>:<window_ms>; tag `log` for the sliding log.",
    ),
    key(
        "key/counter-tag",
        "The sliding window counter uses the tag `counter`; same hash tag, so the same slot as key/plain.",
        algorithm="sliding_counter",
    ),
    key(
        "key/window-in-key",
        "window_ms is part of the key: the same tenant under another window is another key.",
        window_ms=1000,
    ),
    key(
        "key/window-one-day",
        "A one-day window is written as its full integer, never as 8.64e+07.",
        algorithm="sliding_counter",
        window_ms=DAY,
    ),
    key(
        "key/escape-percent",
        "`%` is percent-encoded as %25, so an encoded tenant can never collide with a plain one.",
        tenant="50%",
    ),
    key(
        "key/escape-open-brace",
        "`{` is percent-encoded as %7B: the hash tag must stay exactly {resource:tenant}.",
        tenant="a{b",
    ),
    key(
        "key/escape-close-brace",
        "`}` is percent-encoded as %7D: a raw `}` would end the hash tag early.",
        tenant="a}b",
    ),
    key(
        "key/escape-space",
        "Space (0x20, the last byte below 0x21) is percent-encoded as %20.",
        tenant="a b",
    ),
    key("key/escape-nul", "NUL (0x00) is percent-encoded as %00.", tenant="a\x00b"),
    key("key/escape-tab", "Tab (0x09) is percent-encoded as %09.", tenant="a\tb"),
    key(
        "key/escape-0x1f",
        "0x1F, the last control byte, is percent-encoded as %1F.",
        tenant="a\x1fb",
    ),
    key("key/escape-del", "DEL (0x7F) is percent-encoded as %7F.", tenant="a\x7fb"),
    key(
        "key/escape-every-control-byte",
        "Every byte 0x01..0x20 and 0x7F is percent-encoded with upper-case hex digits.",
        tenant="".join(chr(c) for c in range(0x01, 0x21)) + "\x7f",
    ),
    key(
        "key/keeps-printable-ascii",
        "Every byte 0x21..0x7E except % { } is kept as it is, quotes, backslash and colon included.",
        tenant="".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in "%{}"),
    ),
    key(
        "key/tenant-with-colons",
        "`:` in a tenant is kept: resource may not hold `:`, so (resource, tenant) still splits one way only.",
        tenant="org:42:user:7",
    ),
    key(
        "key/already-encoded-is-encoded-again",
        "A tenant that looks percent-encoded is encoded again (%7D -> %257D): distinct from the tenant `a}b`.",
        tenant="a%7Db",
    ),
    key(
        "key/encoded-space-is-encoded-again",
        "The tenant `a%20b` is not the tenant `a b`: %20 becomes %2520.",
        tenant="a%20b",
    ),
    key(
        "key/utf8-latin",
        "Non-ASCII UTF-8 is kept byte for byte, not percent-encoded.",
        tenant="zoë",
    ),
    key("key/utf8-cjk", "Three-byte UTF-8 characters are kept as they are.", tenant="東京"),
    key("key/utf8-emoji", "Four-byte UTF-8 characters are kept as they are.", tenant="🚀-launch"),
    key(
        "key/utf8-with-escapes",
        "Escaping works byte by byte next to multi-byte characters.",
        tenant="zoë {東京}%",
    ),
    key("key/tenant-512-bytes", "A tenant of exactly 512 bytes is accepted.", tenant="x" * 512),
    key("key/tenant-513-bytes", "A tenant of 513 bytes is invalid_argument.", tenant="x" * 513),
    key(
        "key/tenant-512-bytes-cjk",
        "The bound counts UTF-8 bytes: 170 three-byte characters + 2 = 512 bytes is accepted.",
        tenant="東" * 170 + "ab",
    ),
    key(
        "key/tenant-513-bytes-cjk",
        "171 three-byte characters are 513 bytes (only 171 characters): invalid_argument.",
        tenant="東" * 171,
    ),
    key(
        "key/tenant-512-bytes-emoji",
        "128 four-byte characters are 512 bytes (256 UTF-16 units): accepted.",
        tenant="🚀" * 128,
    ),
    key(
        "key/tenant-513-bytes-emoji",
        "128 four-byte characters and one ASCII byte are 513 bytes: invalid_argument.",
        tenant="🚀" * 128 + "x",
    ),
    key(
        "key/tenant-512-bytes-all-escaped",
        "The bound applies to the tenant, not to its encoding: 512 `%` become 1536 bytes in the key.",
        tenant="%" * 512,
    ),
    key("key/tenant-empty", "An empty tenant is invalid_argument.", tenant=""),
    key(
        "key/tenant-lone-surrogate",
        "A tenant holding an unpaired surrogate (JSON \\ud800, which no UTF-8 string can hold) is invalid_argument.",
        tenant="a\ud800b",
    ),
    key(
        "key/tenant-lone-trailing-surrogate",
        "An unpaired trailing surrogate (\\udc80) is no UTF-8 either: invalid_argument.",
        tenant="\udc80",
    ),
    key("key/namespace-64-chars", "A namespace of 64 characters is accepted.", namespace="n" * 64),
    key(
        "key/namespace-65-chars",
        "A namespace of 65 characters is invalid_argument.",
        namespace="n" * 65,
    ),
    key("key/namespace-empty", "An empty namespace is invalid_argument.", namespace=""),
    key("key/namespace-colon", "`:` is not allowed in a namespace.", namespace="rl:v2"),
    key(
        "key/namespace-brace",
        "`{` is not allowed in a namespace: it would move the hash tag.",
        namespace="rl{",
    ),
    key("key/namespace-space", "Space is not allowed in a namespace.", namespace="rl v2"),
    key(
        "key/namespace-charset",
        "A namespace may use A-Z a-z 0-9 _ . - and nothing else.",
        namespace="Rate_Limit.v2-EU",
    ),
    key("key/resource-64-chars", "A resource of 64 characters is accepted.", resource="r" * 64),
    key(
        "key/resource-65-chars",
        "A resource of 65 characters is invalid_argument.",
        resource="r" * 65,
    ),
    key("key/resource-empty", "An empty resource is invalid_argument.", resource=""),
    key(
        "key/resource-colon",
        "`:` is not allowed in a resource: it would make (resource, tenant) ambiguous.",
        resource="geo:code",
    ),
    key("key/resource-open-brace", "`{` is not allowed in a resource.", resource="{geocode"),
    key(
        "key/resource-close-brace",
        "`}` is not allowed in a resource: it would end the hash tag early.",
        resource="geo}code",
    ),
    key(
        "key/resource-non-ascii-letter",
        "Only ASCII letters: `é` is not in [A-Za-z0-9_.-].",
        resource="géocode",
    ),
    key(
        "key/resource-charset",
        "A resource may use A-Z a-z 0-9 _ . - and nothing else.",
        resource="Geo_code.v2-EU",
    ),
    key(
        "key/slot-tenant-1",
        "The slot is CRC16/XMODEM of `resource:tenant` (the hash tag) mod 16384.",
        tenant="tenant-1",
    ),
    key("key/slot-tenant-2", "A neighbouring tenant lands in another slot.", tenant="tenant-2"),
    key(
        "key/slot-user",
        "The slot of a tenant holding a colon.",
        resource="search",
        tenant="user:1000",
    ),
    key(
        "key/slot-escaped",
        "The slot is computed over the escaped tenant, as Redis sees the key.",
        resource="search",
        tenant="acme corp",
    ),
    key(
        "key/slot-utf8",
        "The slot is computed over the UTF-8 bytes of the key.",
        resource="search",
        tenant="東京",
    ),
    key(
        "key/bucketed-tag",
        "The bucketed window uses the tag `bucketed` and ends with its bucket count: "
        "<namespace>:{<resource>:<tenant>}:bucketed:<window_ms>:<buckets>; same hash tag, so the same slot as key/plain.",
        algorithm="bucketed_window",
        buckets=60,
    ),
    key(
        "key/bucketed-buckets-in-key",
        "buckets is part of the key: the same window bucketed otherwise is another key, "
        "so two policies never read each other's buckets.",
        algorithm="bucketed_window",
        buckets=600,
    ),
    key(
        "key/bucketed-one-bucket",
        "N = 1 (one bucket as wide as the window) is written :1.",
        algorithm="bucketed_window",
        window_ms=1000,
        buckets=1,
    ),
    key(
        "key/bucketed-default-buckets",
        "A bucketed policy that names no buckets takes the default 60, and the key says so "
        "(the one key vector that leaves buckets out).",
        algorithm="bucketed_window",
    ),
    key(
        "key/bucketed-escaped-tenant",
        "The tenant is escaped as for the other algorithms; the slot is the same as the "
        "log's key for that tenant.",
        algorithm="bucketed_window",
        tenant="a}b c",
        window_ms=3600,
        buckets=3600,
    ),
    key(
        "key/bucketed-buckets-not-dividing",
        "buckets must divide window_ms: no key for 7 buckets of a 60,000 ms window "
        "(invalid_argument).",
        algorithm="bucketed_window",
        buckets=7,
    ),
    key(
        "key/log-with-buckets",
        "Only the bucketed window has buckets: a sliding-log policy that names them is "
        "invalid_argument, so it has no key.",
        buckets=60,
    ),
]

# --------------------------------------------------------------- sliding log

LOG = [
    log(
        "log/fill-to-limit",
        "Permits are admitted while count + cost <= limit and remaining counts down; the first denial "
        "waits for the oldest entry (retry = s + W - now) and reset_after is newest + W - now.",
        3,
        1000,
        [S(10_000), S(10_100), S(10_200), S(10_300), S(10_999), S(11_000)],
    ),
    log(
        "log/exact-boundary",
        "An entry at s counts for now in [s, s + W): at s + W - 1 it still blocks (retry 1), at s + W it is gone.",
        1,
        1000,
        [S(10_000), S(10_999), S(11_000), S(11_999), S(12_000)],
    ),
    log(
        "log/exact-boundary-with-cost",
        "The boundary holds for a batch: cost 3 at s frees all three permits at exactly s + W.",
        3,
        1000,
        [S(10_000, 3), S(10_999, 1), S(11_000, 3)],
    ),
    log(
        "log/cost-greater-than-one",
        "cost > 1 records cost entries; a request of cost 4 with 8 of 10 used is denied, "
        "but cost 2 still fits (denials are all or nothing, never partial).",
        10,
        1000,
        [S(10_000, 4), S(10_100, 4), S(10_200, 4), S(10_200, 2), S(10_300, 1)],
        hits=["log-denied-k>1"],
    ),
    log(
        "log/kth-oldest-retry",
        "Denied with k = count + cost - limit: retry_after = s + W - now for the k-th oldest live entry s.",
        5,
        1000,
        [
            S(10_000),
            S(10_100),
            S(10_200),
            S(10_300),
            S(10_400),
            S(10_500, 3),
            S(10_500, 5),
            S(10_500, 1),
            S(11_199, 3),
            S(11_200, 3),
        ],
        hits=["log-denied-k=1", "log-denied-k>1"],
    ),
    log(
        "log/kth-oldest-among-ties",
        "Entries recorded together count one by one: the k-th oldest may share a timestamp with others.",
        5,
        1000,
        [
            S(10_000, 2),
            S(10_500, 3),
            S(10_600, 2),
            S(10_600, 3),
            S(10_600, 5),
            S(11_000, 2),
            S(11_000, 1),
        ],
        hits=["log-denied-k>1"],
    ),
    log(
        "log/retry-hint-is-exact",
        "retry_after is exact with no other traffic: one ms earlier is still denied, at now + retry_after the same cost passes.",
        3,
        1000,
        [S(10_000), S(10_250), S(10_500), S(10_600, 2), S(11_249, 2), S(11_250, 2)],
        hits=["log-denied-k>1"],
    ),
    log(
        "log/denied-is-not-recorded",
        "Denied requests are never recorded: after many denials the whole limit is free again at s + W.",
        2,
        1000,
        [S(10_000), S(10_000), S(10_100), S(10_500, 2), S(10_900), S(10_999, 2), S(11_000, 2)],
    ),
    log(
        "log/remaining-on-denial",
        "On a denial remaining = max(0, limit - count): room may be left for a smaller request.",
        5,
        1000,
        [S(10_000, 3), S(10_100, 3), S(10_100, 2), S(10_200, 1)],
    ),
    log(
        "log/cost-equals-limit",
        "cost = limit fits only an empty window; denied with k = limit, it waits for the newest entry.",
        4,
        1000,
        [S(10_000, 4), S(10_500, 4), S(10_999, 1), S(11_000, 4), S(11_500, 1), S(11_600, 4)],
        hits=["log-denied-k>1"],
    ),
    log(
        "log/many-permits-one-ms",
        "Many permits in the same millisecond all count, and all leave together at s + W.",
        10,
        1000,
        [S(10_000)] * 10 + [S(10_000), S(10_999), S(11_000, 10)],
    ),
    log(
        "log/large-batches-one-ms",
        "Batches of 250 entries in one millisecond (more than one write batch) fill a limit of 1000 exactly.",
        1000,
        1000,
        [S(10_000, 250)] * 4 + [S(10_000, 1), S(10_500, 1000), S(11_000, 1000)],
        hits=["log-denied-k>1"],
    ),
    log(
        "log/tenant-isolation",
        "Two tenants under one policy have separate budgets: one tenant's fill never denies the other.",
        2,
        1000,
        [
            S(10_000, 1, "t-a"),
            S(10_100, 1, "t-a"),
            S(10_200, 1, "t-a"),
            S(10_300, 1, "t-b"),
            S(10_400, 1, "t-b"),
            S(10_500, 1, "t-b"),
            S(11_000, 1, "t-a"),
            S(11_100, 1, "t-a"),
        ],
    ),
    log(
        "log/escaped-tenants-are-distinct",
        "Tenants that differ only in escaping (`a b`/`a%20b`, `a}b`/`a%7Db`) never share a budget.",
        1,
        1000,
        [
            S(10_000, 1, "a b"),
            S(10_001, 1, "a%20b"),
            S(10_002, 1, "a b"),
            S(10_003, 1, "a}b"),
            S(10_004, 1, "a%7Db"),
            S(10_005, 1, "a%7Db"),
        ],
    ),
    log(
        "log/sliding-not-fixed",
        "A rolling window, not a fixed one: permits from the end of one window still block the start of the next.",
        4,
        1000,
        [
            S(10_900, 2),
            S(11_100, 2),
            S(11_200),
            S(11_899, 2),
            S(11_900, 2),
            S(12_099),
            S(12_100, 2),
        ],
    ),
    log(
        "log/partial-expiry",
        "Only entries with s <= now - W are dropped; the others still count.",
        5,
        1000,
        [S(10_000), S(10_200), S(10_400), S(10_600), S(10_800), S(11_300, 3), S(11_300, 1)],
    ),
    log(
        "log/many-expired-after-idle",
        "After an idle gap more than eight old entries expire at once; the live ones are still found and counted.",
        20,
        1000,
        [S(10_000 + 50 * i) for i in range(20)] + [S(11_500, 12), S(11_500, 11), S(11_500, 3)],
        hits=["log-denied-k>1"],
    ),
    log(
        "log/skipped-windows",
        "After a gap of several windows nothing counts: the full limit is available and reset_after is W.",
        3,
        1000,
        [S(10_000, 3), S(10_500), S(15_250, 3), S(15_250), S(21_000, 1)],
    ),
    log(
        "log/first-window-of-epoch",
        "Times below W (now - W negative) work: an entry at 0 blocks until 999 and is gone at 1000.",
        2,
        1000,
        [S(0), S(500), S(999), S(1000), S(1499), S(1500)],
    ),
    log(
        "log/realistic-timestamps",
        "The seed's case on a real clock: 600 per 60 s, 600 admitted at 12:00:59, the burst at 12:01:00 "
        "is denied until 12:01:59 (a fixed window would have let 1,200 through).",
        600,
        60_000,
        [
            S(T0 + 59_000, 300),
            S(T0 + 59_000, 300),
            S(T0 + 60_000),
            S(T0 + 60_000, 600),
            S(T0 + 118_999),
            S(T0 + 119_000, 600),
        ],
        hits=["log-denied-k>1"],
    ),
    log(
        "log/big-window-one-day",
        "A one-day window with batches hours apart; the retry hint spans most of a day.",
        1000,
        DAY,
        [
            S(T0, 500),
            S(T0 + 3_600_000, 500),
            S(T0 + 7_200_000),
            S(T0 + 7_200_000, 600),
            S(T0 + DAY, 500),
            S(T0 + DAY),
            S(T0 + DAY + 3_600_000, 500),
        ],
        hits=["log-denied-k>1"],
    ),
    log(
        "log/limit-times-window-2p52",
        "limit * window_ms exactly 2^52 within the log's cap (2^13 * 2^39): a full log of 8,192 "
        "entries, retry and reset hints near 2^39 stay exact (the counter's vector covers 2^42 * 1024).",
        2**13,
        2**39,
        [S(T0, 2**13 - 1), S(T0 + 1), S(T0 + 2), S(T0 + 2**39, 2**13), S(T0 + 2**39 + 1, 2**13)],
        hits=["log-denied-k=1"],
    ),
    log(
        "log/window-2p50",
        "A window of 2^50 ms (limit 4, product 2^52): retry and reset stay exact integers far beyond 2^32.",
        4,
        2**50,
        [S(T0, 3), S(T0 + 1_000), S(T0 + 2_000), S(T0 + 3_000, 4)],
        hits=["log-denied-k>1"],
    ),
    log(
        "log/now-at-2p52",
        "now_ms = 2^52 is the largest valid caller time; s + W goes past it and stays exact.",
        2,
        1000,
        [S(P52), S(P52), S(P52), S(P52, 2)],
        hits=["log-denied-k>1"],
    ),
    log(
        "log/clock-regression",
        "Caller time going back: entries are recorded at r = max(now, newest) and count from there, "
        "so reset_after = r + W - now and the retry hint waits for r + W.",
        3,
        1000,
        [S(5_000), S(4_800), S(4_900), S(4_950), S(5_999), S(6_000, 3)],
        clock_regression=True,
    ),
    # The time rule (docs/protocol.md, "Time"): evaluated at t = max(now, newest recorded admission),
    # recorded at t, nothing dropped unless expired at the newest recorded time.
    log(
        "log/skew-leading-denial-keeps-entries",
        "Issue 12's case: a leading caller's denial (cost 2 at 1,100,000) must not drop "
        "1,000,000, which is expired for its clock but not at the newest admission (1,000,001); the lagging caller at "
        "1,050,000 is then denied, never three permits in 100 s against a limit of 2.",
        2,
        100_000,
        [S(1_000_000), S(1_000_001), S(1_100_000, 2), S(1_050_000), S(1_100_000), S(1_100_001)],
        hits=["log-leading-denied", "log-denied-k=1"],
        clock_regression=True,
    ),
    log(
        "log/skew-lagging-caller-evaluated-at-newest",
        "A lagging caller is evaluated at the newest admission: entries expired "
        "there no longer count for it even though its own clock is earlier; its admission is recorded at the newest time.",
        2,
        1000,
        [S(10_000), S(10_999), S(10_500), S(11_500), S(11_000), S(12_499)],
        hits=["log-lagging-caller", "log-denied-k=1"],
        clock_regression=True,
    ),
    log(
        "log/skew-leading-allowed-then-lagging",
        "A leading caller admitted far ahead moves the newest time: lagging callers after "
        "it are evaluated there, wait for its entries to expire (retry and reset from their own clocks), and every admission is "
        "recorded at or after it.",
        3,
        1000,
        [S(20_000), S(20_100), S(25_000), S(20_200, 2), S(20_300, 3), S(25_999, 3), S(26_000, 3)],
        hits=["log-lagging-caller", "log-denied-k>1"],
        clock_regression=True,
    ),
    log(
        "log/skew-server-clock-steps-back",
        "The clock steps back (an NTP step, a failover to a replica behind): after a burst "
        "at 50,000-50,900 a check at 51,800 is denied and drops nothing, though three entries are expired for its clock; "
        "the clock steps back to 50,950, still after the newest admission (50,900), so the checks there are evaluated at 50,950, "
        "where all four entries still count: still full.",
        4,
        1000,
        [
            S(50_000),
            S(50_300),
            S(50_600),
            S(50_900),
            S(51_800, 4),
            S(50_950),
            S(50_960, 2),
            S(51_300),
            S(51_600),
            S(51_901),
            S(51_902, 2),
        ],
        hits=["log-leading-denied", "log-denied-k=1", "log-denied-k>1"],
        clock_regression=True,
    ),
    log(
        "log/skew-leading-denial-many-expired-heads",
        "A leading denial where more than two entries are expired for its clock (the scripts "
        "binary-search them): it drops none, since none has expired at the newest admission; a lagging caller still counts them.",
        6,
        1000,
        [
            S(1_000),
            S(1_100),
            S(1_200),
            S(1_300),
            S(1_400),
            S(1_500),
            S(2_050),
            S(2_390, 6),
            S(2_000, 2),
            S(2_101),
            S(2_060),
            S(2_501),
        ],
        hits=["log-leading-denied", "log-lagging-caller", "log-denied-k=1", "log-denied-k>1"],
        clock_regression=True,
    ),
]

# Windows of a few ms that record state: Redis expires keys on its own clock
# while the steps run on caller time, so these pass on Redis only because a
# caller-time key outlives its permits by at least a minute (docs/protocol.md,
# "Key expiry and caller clocks"); with the old margin of one window the key
# was often gone before the next step.
LOG += [
    log(
        "log/window-1ms",
        "A window of 1 ms: permits count only in their own millisecond; the key must not "
        "expire on the server's clock between steps while caller time says it counts.",
        2,
        1,
        [S(1000), S(1000), S(1000), S(1001), S(1001), S(1001), S(1003, 2), S(1003)],
        hits=["log-denied-k=1"],
    ),
    log(
        "log/window-10ms",
        "A window of 10 ms over a dozen steps, denials of cost 1 and 2 included.",
        3,
        10,
        [S(5000), S(5003), S(5006), S(5009), S(5010), S(5012), S(5013, 2), S(5016, 2), S(5019)],
        hits=["log-denied-k=1"],
    ),
]

# ----------------------------------------------------- sliding window counter

COUNTER = [
    counter(
        "counter/fill-to-limit",
        "Permits are admitted while a*W + b*(W-e) + cost*W <= limit*W; a full current window "
        "waits into the next one (retry = (W - e) + x').",
        3,
        1000,
        [S(10_000), S(10_100), S(10_200), S(10_300), S(11_333), S(11_334)],
        hits=["counter-retry-next-window", "counter-retry-same-window"],
    ),
    counter(
        "counter/cost-greater-than-one",
        "cost > 1 adds cost to the current window; a request that would pass the limit is "
        "denied whole while a smaller one still fits.",
        10,
        1000,
        [S(10_000, 4), S(10_100, 4), S(10_200, 4), S(10_200, 2), S(10_300)],
        hits=["counter-retry-next-window"],
    ),
    counter(
        "counter/retry-same-window",
        "Denied by the weighted previous window: x = W - floor((limit - cost - a)*W / b) < W, "
        "retry = max(x, e) - e; one ms earlier is still denied.",
        10,
        1000,
        [S(10_500, 8), S(11_100, 3), S(11_124, 3), S(11_125, 3), S(11_125, 3)],
        hits=["counter-retry-same-window"],
    ),
    counter(
        "counter/retry-next-window-over-limit",
        "a + cost > limit: the current window can never pass, so wait into the next: "
        "x' = max(0, W - floor((limit - cost)*W / a)), retry = (W - e) + x'.",
        5,
        1000,
        [S(10_000, 3), S(11_200, 1), S(11_300, 1), S(11_400, 4), S(12_499, 4), S(12_500, 4)],
        hits=["counter-retry-next-window-over-limit", "counter-retry-same-window"],
    ),
    counter(
        "counter/retry-next-window-weight-too-big",
        "a + cost <= limit but b's weight never drops enough in this window "
        "(x >= W): the hint waits for the next window, where x' = 0 when a = 0.",
        5,
        1000,
        [S(10_000, 5), S(11_000, 5), S(11_999, 5), S(12_000, 5)],
        hits=["counter-retry-next-window-weight", "counter-retry-next-window-start"],
    ),
    counter(
        "counter/retry-window-after-next",
        "cost = limit with a > 0: x' = W, so the hint is the start of the window after next "
        "(2W - e), when both counts are gone.",
        4,
        1000,
        [S(10_000, 1), S(10_200, 4), S(11_999, 4), S(12_000, 4)],
        hits=["counter-retry-window-after-next"],
    ),
    counter(
        "counter/window-transition-weighting",
        "The previous window weighs (W - e)/W: full at e = 0, then less each ms.",
        10,
        1000,
        [
            S(10_000, 10),
            S(11_000),
            S(11_099),
            S(11_100),
            S(11_500),
            S(11_500, 4),
            S(11_999),
            S(12_000),
        ],
        hits=["counter-retry-same-window"],
    ),
    counter(
        "counter/boundary-last-ms-of-window",
        "e = W - 1 is still the old window; e = 0 starts a new one where the old "
        "count becomes b at full weight.",
        2,
        1000,
        [S(10_000, 2), S(10_999), S(11_000), S(11_499), S(11_500)],
        hits=["counter-retry-next-window", "counter-retry-same-window"],
    ),
    counter(
        "counter/skipped-windows",
        "After a gap of several windows a = b = 0: the full limit is free and reset_after is 2W - e.",
        3,
        1000,
        [S(10_000, 3), S(15_500, 3), S(15_600), S(25_000, 2)],
        hits=["counter-retry-next-window"],
    ),
    counter(
        "counter/one-empty-window-between",
        "Counts two windows old never count, even while still stored: after one empty "
        "window the previous count b is 0.",
        3,
        1000,
        [S(10_000, 3), S(11_000), S(12_000, 3), S(12_000)],
        hits=["counter-retry-same-window"],
    ),
    counter(
        "counter/many-permits-one-ms",
        "Many permits in the same millisecond all land in the current window.",
        10,
        1000,
        [S(10_000)] * 10 + [S(10_000), S(10_999), S(11_000), S(11_100)],
        hits=["counter-retry-next-window", "counter-retry-same-window"],
    ),
    counter(
        "counter/large-batches-one-ms",
        "Batches of 250 in one millisecond fill a limit of 1000 exactly.",
        1000,
        1000,
        [S(10_000, 250)] * 4 + [S(10_000, 1), S(11_000, 1), S(11_001, 1)],
        hits=["counter-retry-next-window", "counter-retry-same-window"],
    ),
    counter(
        "counter/tenant-isolation",
        "Two tenants under one policy have separate counters.",
        2,
        1000,
        [
            S(10_000, 1, "t-a"),
            S(10_100, 1, "t-a"),
            S(10_200, 1, "t-a"),
            S(10_300, 1, "t-b"),
            S(10_400, 1, "t-b"),
            S(10_500, 1, "t-b"),
            S(11_600, 1, "t-a"),
        ],
        hits=["counter-retry-next-window"],
    ),
    counter(
        "counter/denied-is-not-recorded",
        "Denials add nothing: the next window sees b = limit, not more.",
        2,
        1000,
        [S(10_000, 2), S(10_100), S(10_500, 2), S(10_900), S(11_500), S(11_500)],
        hits=["counter-retry-next-window"],
    ),
    counter(
        "counter/remaining-floors-the-estimate",
        "remaining = max(0, floor((limit*W - a'*W - b*(W - e)) / W)): "
        "the weighted previous window is rounded in the caller's disfavour.",
        10,
        1000,
        [S(10_000, 7), S(11_300), S(11_301), S(11_950)],
    ),
    counter(
        "counter/first-window-of-epoch",
        "Times below W: the previous window starts at -W and is empty; "
        "at W the first window becomes the previous one.",
        2,
        1000,
        [S(0), S(500), S(999), S(1000), S(1500)],
        hits=["counter-retry-next-window", "counter-retry-same-window"],
    ),
    counter(
        "counter/windows-align-to-epoch",
        "Windows start at multiples of W since time 0, not at the first request: "
        "with W = 1500, now = 10000 lies in [9000, 10500).",
        2,
        1500,
        [S(10_000, 2), S(10_499), S(10_500), S(10_500, 2), S(11_250)],
        hits=["counter-retry-next-window", "counter-retry-same-window"],
    ),
    counter(
        "counter/realistic-timestamps",
        "The seed's case on a real clock: 600 per 60 s, 600 at 12:00:59; at 12:01:00 the "
        "previous window weighs fully, then one permit frees up every 100 ms (the counter's approximation).",
        600,
        60_000,
        [
            S(T0 + 59_000, 600),
            S(T0 + 60_000),
            S(T0 + 60_099),
            S(T0 + 60_100),
            S(T0 + 60_100),
            S(T0 + 90_000, 300),
            S(T0 + 90_000, 1),
        ],
        hits=["counter-retry-same-window"],
    ),
    counter(
        "counter/big-window-one-day",
        "A one-day window (windows start at UTC midnight); hints span hours.",
        1000,
        DAY,
        [
            S(T0, 600),
            S(T0 + 3_600_000, 400),
            S(T0 + 3_600_000),
            S(T0 + 9 * 3_600_000, 500),
            S(T0 + 20 * 3_600_000, 900),
            S(T0 + 20 * 3_600_000, 1),
        ],
        hits=["counter-retry-next-window", "counter-retry-same-window"],
    ),
    counter(
        "counter/limit-times-window-2p52",
        "limit * window_ms exactly 2^52 (2^42 * 1024); the estimate reaches 2^52 and stays exact.",
        2**42,
        1024,
        [
            S(T0_1024 + 100, 2**42),
            S(T0_1024 + 100),
            S(T0_1024 + 1024 + 511, 2**41),
            S(T0_1024 + 1024 + 512, 2**41),
            S(T0_1024 + 1024 + 512),
        ],
        hits=["counter-retry-next-window", "counter-retry-same-window"],
    ),
    counter(
        "counter/limit-and-window-2p26",
        "limit = window_ms = 2^26 (product 2^52) with mid-size batches.",
        2**26,
        2**26,
        [S(T0, 2**25), S(T0 + 1000, 2**25), S(T0 + 2000, 3), S(T0 + 2**26, 2**25)],
        hits=["counter-retry-next-window"],
    ),
    counter(
        "counter/now-at-2p52",
        "now_ms = 2^52 is the largest valid caller time.",
        2,
        1000,
        [S(P52), S(P52), S(P52)],
        hits=["counter-retry-next-window"],
    ),
]

# Windows of a few ms on the counter (see LOG's, above).
COUNTER += [
    counter(
        "counter/window-1ms",
        "A window of 1 ms: the previous millisecond weighs fully (e is always 0); the key "
        "must not expire on the server's clock between steps.",
        2,
        1,
        [S(1000), S(1000), S(1000), S(1001), S(1002), S(1002), S(1002)],
    ),
    counter(
        "counter/window-4ms",
        "A window of 4 ms, the previous window's weight falling each millisecond.",
        4,
        4,
        [S(2000, 3), S(2001), S(2002), S(2004), S(2005), S(2006), S(2007), S(2009, 2)],
    ),
]

# ----------------------------------------------------------- bucketed window
# g = W / N; a permit recorded at r goes to bucket b = floor(r / g) and counts
# while now' < x_b = (b + 1)*g - 1 + W (docs/protocol.md, "Bucketed window").

BUCKETED = [
    bucketed(
        "bucketed/fill-to-limit",
        "Permits are admitted while live + cost <= limit (g = 100); the first denial waits "
        "for the oldest live bucket (retry = x_b - now, x_b = (b+1)*g - 1 + W) and reset_after is x_b - now for the "
        "newest admission's bucket.",
        3,
        1000,
        10,
        [S(10_000), S(10_050), S(10_150), S(10_199), S(11_098), S(11_099), S(11_099), S(11_100)],
        hits=["bucketed-denied-oldest-bucket"],
    ),
    bucketed(
        "bucketed/boundary-last-ms-of-bucket",
        "A permit counts while now < x_b: at x_b - 1 it still blocks "
        "(retry 1), at x_b it is gone. A permit at the first ms of a bucket is held W + g - 1 (reset 1099), one at "
        "its last ms exactly W (reset 1000).",
        1,
        1000,
        10,
        [S(10_000), S(11_098), S(11_099), S(12_098), S(12_099)],
        hits=["bucketed-denied-oldest-bucket", "bucketed-denied-where-log-allows"],
    ),
    bucketed(
        "bucketed/held-to-end-of-bucket",
        "A permit is held as if admitted at the last ms of its bucket: at 11,000 "
        "the log would have let 10,000 go, the bucketed window counts it until it is gone at 11,249 (at most "
        "g - 1 ms more than the log).",
        2,
        1000,
        4,
        [S(10_000), S(10_249), S(11_000), S(11_248), S(11_249, 2), S(11_250)],
        hits=["bucketed-denied-oldest-bucket", "bucketed-denied-where-log-allows"],
    ),
    bucketed(
        "bucketed/cost-spans-buckets",
        "cost > 1 with need = live + cost - limit: b* is the first live bucket at "
        "which the count summed from the oldest reaches need, here the second (retry = x_b* - now); a denial is "
        "all or nothing.",
        10,
        1000,
        10,
        [
            S(10_000, 2),
            S(10_150, 3),
            S(10_250, 4),
            S(10_300, 6),
            S(10_300, 1),
            S(11_198, 6),
            S(11_199, 6),
            S(11_199, 1),
        ],
        hits=["bucketed-denied-later-bucket", "bucketed-denied-oldest-bucket"],
    ),
    bucketed(
        "bucketed/cost-spans-many-buckets",
        "40 buckets of one permit each: a denial of cost 40 waits for the newest "
        "bucket, of cost 25 for the 25th oldest (an implementation that reads 8, 16, 32 buckets at a time needs "
        "every batch); remaining is 0 throughout.",
        40,
        10_000,
        100,
        [S(10_000 + 100 * i) for i in range(40)] + [S(14_000, 40), S(14_000, 25), S(14_000, 1)],
        hits=["bucketed-denied-later-bucket", "bucketed-denied-oldest-bucket"],
    ),
    bucketed(
        "bucketed/cost-equals-limit",
        "cost = limit fits only when nothing counts: denied with need = limit, it "
        "waits for the newest bucket.",
        4,
        1000,
        10,
        [S(10_000, 2), S(10_500, 2), S(10_600, 4), S(11_099, 4), S(11_599, 4), S(11_600, 4)],
        hits=["bucketed-denied-later-bucket"],
    ),
    bucketed(
        "bucketed/denied-is-not-recorded",
        "Denied requests are never recorded: after many denials the whole limit is "
        "free again at x_b.",
        2,
        1000,
        10,
        [S(10_000, 2), S(10_100), S(10_500, 2), S(10_900), S(11_098, 2), S(11_099, 2)],
        hits=["bucketed-denied-oldest-bucket"],
    ),
    bucketed(
        "bucketed/remaining-on-denial",
        "On a denial remaining = max(0, limit - live): room may be left for a smaller request.",
        5,
        1000,
        10,
        [S(10_000, 3), S(10_100, 3), S(10_100, 2), S(10_200, 1)],
        hits=["bucketed-denied-oldest-bucket"],
    ),
    bucketed(
        "bucketed/idle-gap-everything-expired",
        "After an idle gap of several windows every bucket has expired: the "
        "full limit is free and reset_after is x_b - now of the new permit's bucket.",
        3,
        1000,
        10,
        [S(10_000, 3), S(10_500), S(15_050, 3), S(15_050), S(30_999, 1)],
        hits=["bucketed-denied-oldest-bucket"],
    ),
    bucketed(
        "bucketed/partial-expiry",
        "Only buckets with x_b <= t have expired; the others still count (g = 200).",
        5,
        1000,
        5,
        [
            S(10_000),
            S(10_210),
            S(10_420),
            S(10_630),
            S(10_840),
            S(11_500, 3),
            S(11_599, 3),
            S(11_599, 1),
        ],
        hits=["bucketed-denied-oldest-bucket"],
    ),
    bucketed(
        "bucketed/many-buckets-expire-after-idle",
        "25 buckets of 2 permits; after a pause the six oldest have "
        "expired at once and the rest still count; a denial then waits for the fourth live bucket; later all "
        "but the newest have expired.",
        50,
        10_000,
        100,
        [S(10_000 + 100 * i, 2) for i in range(25)]
        + [S(20_650, 10), S(20_650, 10), S(25_000, 30), S(25_000, 11)],
        hits=["bucketed-denied-later-bucket", "bucketed-denied-oldest-bucket"],
    ),
    bucketed(
        "bucketed/first-window-of-epoch",
        "Times below W (t + 1 - W negative, the first live bucket below 0): a "
        "permit at 0 (bucket 0, g = 250) still blocks at 1,248 and is gone at 1,249.",
        2,
        1000,
        4,
        [S(0), S(300), S(999), S(1_248), S(1_249), S(1_300)],
        hits=["bucketed-denied-oldest-bucket", "bucketed-denied-where-log-allows"],
    ),
    bucketed(
        "bucketed/one-bucket-fixed-window",
        "N = 1: one bucket as wide as the window, i.e. a fixed window whose "
        "permits are held W - 1 ms past its end (a permit of [10,000, 11,000) is gone at 11,999).",
        3,
        1000,
        1,
        [
            S(10_000),
            S(10_999),
            S(11_000),
            S(11_500),
            S(11_998),
            S(11_999, 2),
            S(12_998),
            S(12_999, 3),
        ],
        hits=["bucketed-denied-oldest-bucket", "bucketed-denied-where-log-allows"],
    ),
    bucketed(
        "bucketed/one-bucket-minute",
        "N = 1 over a minute on a real clock: a burst at the last second of a "
        "minute holds the next minute too, until x_b.",
        100,
        60_000,
        1,
        [S(T0 + 59_000, 100), S(T0 + 60_000), S(T0 + 119_998, 100), S(T0 + 119_999, 100)],
        hits=["bucketed-denied-oldest-bucket", "bucketed-denied-where-log-allows"],
    ),
    bucketed(
        "bucketed/peek-vs-acquire",
        "Peek decides exactly as acquire and records nothing: an allowed peek shows "
        "remaining as if recorded, yet the next acquire sees the state before it; a denied peek gives the same "
        "hints as the acquire.",
        2,
        1000,
        10,
        [
            S(10_000),
            P(10_050),
            P(10_050, 2),
            S(10_060),
            P(10_070),
            S(10_070),
            P(11_098),
            P(11_099, 2),
            S(11_099, 2),
            P(11_099),
        ],
        hits=["bucketed-denied-oldest-bucket"],
    ),
    bucketed(
        "bucketed/sliding-not-fixed",
        "A rolling window of buckets, not a fixed one: permits from the end of one "
        "window still block the start of the next.",
        4,
        1000,
        10,
        [
            S(10_900, 2),
            S(11_100, 2),
            S(11_200),
            S(11_999, 2),
            S(12_000, 2),
            S(12_099),
            S(12_199, 2),
        ],
        hits=["bucketed-denied-oldest-bucket"],
    ),
    bucketed(
        "bucketed/tenant-isolation",
        "Two tenants under one policy have separate buckets.",
        2,
        1000,
        10,
        [
            S(10_000, 1, "t-a"),
            S(10_100, 1, "t-a"),
            S(10_200, 1, "t-a"),
            S(10_300, 1, "t-b"),
            S(10_400, 1, "t-b"),
            S(10_500, 1, "t-b"),
            S(11_099, 1, "t-a"),
            S(11_199, 1, "t-a"),
        ],
        hits=["bucketed-denied-oldest-bucket"],
    ),
    bucketed(
        "bucketed/realistic-timestamps",
        "The seed's case at N = 60 (one-second buckets): 600 at 12:00:59 are gone at "
        "12:01:59.999, 999 ms after the log would let them go; the burst at 12:01:00 waits 59,999 ms.",
        600,
        60_000,
        60,
        [
            S(T0 + 59_000, 300),
            S(T0 + 59_000, 300),
            S(T0 + 60_000),
            S(T0 + 60_000, 600),
            S(T0 + 119_000),
            S(T0 + 119_998),
            S(T0 + 119_999, 600),
        ],
        hits=["bucketed-denied-oldest-bucket", "bucketed-denied-where-log-allows"],
    ),
    bucketed(
        "bucketed/limit-100000",
        "A limit of 100,000 (ten times the log's cap) at N = 60: big batches over several "
        "buckets; need = 30,000 is met by the oldest bucket, need = 50,001 only by the second.",
        100_000,
        60_000,
        60,
        [
            S(T0, 40_000),
            S(T0 + 10_500, 50_000),
            S(T0 + 30_999, 10_000),
            S(T0 + 31_000, 30_000),
            S(T0 + 59_999, 50_001),
            S(T0 + 60_998, 1),
            S(T0 + 60_999, 40_000),
            S(T0 + 60_999, 1),
            S(T0 + 71_499, 100_000),
            S(T0 + 120_998, 100_000),
            S(T0 + 120_999, 100_000),
        ],
        hits=["bucketed-denied-oldest-bucket", "bucketed-denied-later-bucket"],
    ),
    bucketed(
        "bucketed/limit-times-window-2p52",
        "limit * window_ms exactly 2^52 (2^22 * 2^30, N = 2^11, g = 2^19): "
        "counts near 2^22 and hints near 2^30 stay exact.",
        2**22,
        2**30,
        2**11,
        [
            S(T0, 2**21),
            S(T0 + 2**20, 2**21 - 1),
            S(T0 + 2**21, 2),
            S(T0 + 2**21, 1),
            S(T0 + 2**30 + 2**19, 2**21),
            S(T0 + 2**31, 2**22),
        ],
        hits=["bucketed-denied-oldest-bucket"],
    ),
    bucketed(
        "bucketed/big-window-one-day-hourly",
        "A one-day window of 24 hourly buckets; hints span most of a day.",
        1000,
        DAY,
        24,
        [
            S(T0, 500),
            S(T0 + 3_600_000, 500),
            S(T0 + 7_200_000),
            S(T0 + 7_200_000, 600),
            S(T0 + DAY + 3_599_999),
            S(T0 + DAY + 3_600_000, 500),
            S(T0 + DAY + 3_600_000, 1),
        ],
        hits=["bucketed-denied-oldest-bucket", "bucketed-denied-later-bucket"],
    ),
    bucketed(
        "bucketed/max-buckets-3600",
        "N = 3,600 (the cap) over an hour: one-second buckets.",
        5,
        3_600_000,
        3600,
        [
            S(T0 + 500, 3),
            S(T0 + 1_000, 2),
            S(T0 + 1_000),
            S(T0 + 3_600_999),
            S(T0 + 3_601_000, 4),
            S(T0 + 3_601_999, 5),
        ],
        hits=["bucketed-denied-oldest-bucket", "bucketed-denied-where-log-allows"],
    ),
    bucketed(
        "bucketed/now-at-2p52",
        "now_ms = 2^52, the largest valid caller time: the bucket index and x_b go past it "
        "and stay exact.",
        2,
        1000,
        10,
        [S(P52 - 1), S(P52), S(P52), S(P52, 2)],
        hits=["bucketed-denied-oldest-bucket"],
    ),
    bucketed(
        "bucketed/window-2p52-one-bucket",
        "limit 1, W = 2^52, N = 1 at now = 2^52: x_b = 3*2^52 - 1 is not a double "
        "(above 2^53), the hints x_b - now = 2^53 - 1 are: an implementation must not form x_b first in doubles.",
        1,
        P52,
        1,
        [S(P52), S(P52)],
        hits=["bucketed-denied-oldest-bucket"],
    ),
    bucketed(
        "bucketed/window-2p50",
        "A window of 2^50 ms in 2^10 buckets (g = 2^40, limit 4): hints far beyond 2^32 stay "
        "exact.",
        4,
        2**50,
        2**10,
        [S(T0, 3), S(T0 + 1_000), S(T0 + 2_000), S(T0 + 3_000, 4)],
        hits=["bucketed-denied-oldest-bucket"],
    ),
    bucketed(
        "bucketed/default-buckets",
        "A bucketed policy that names no buckets takes 60 (the one decision vector "
        "that leaves buckets out): over 60,000 ms that is g = 1,000, so a permit at T0 + 500 still counts at "
        "T0 + 60,998 and is gone at T0 + 60,999.",
        5,
        60_000,
        None,
        [S(T0 + 500, 5), S(T0 + 60_500), S(T0 + 60_998, 5), S(T0 + 60_999, 5)],
        hits=["bucketed-denied-oldest-bucket", "bucketed-denied-where-log-allows"],
    ),
    # The time rule: evaluated at t = max(now, newest recorded admission), recorded at t (in t's bucket),
    # nothing dropped unless expired at the newest recorded time.
    bucketed(
        "bucketed/skew-lagging-caller-records-in-newest-bucket",
        "A lagging caller is recorded at the newest "
        "admission, hence in its bucket (not its own clock's): at 11,249 the oldest bucket has expired, yet the "
        "lagging permit still counts, until x of the newest bucket.",
        3,
        1000,
        4,
        [S(10_240), S(10_260), S(10_200), S(11_249, 2), S(11_499, 3)],
        hits=["bucketed-lagging-caller", "bucketed-denied-oldest-bucket"],
        clock_regression=True,
    ),
    bucketed(
        "bucketed/skew-lagging-caller-evaluated-at-newest",
        "A lagging caller is evaluated at the newest admission: "
        "buckets expired there no longer count for it even though its own clock is earlier; retry and reset are "
        "relative to its own clock.",
        2,
        1000,
        10,
        [S(10_000), S(10_999), S(10_500), S(11_500), S(11_000), S(12_599)],
        hits=["bucketed-lagging-caller", "bucketed-denied-oldest-bucket"],
        clock_regression=True,
    ),
    bucketed(
        "bucketed/skew-leading-denial-keeps-buckets",
        "Issue 12's case with buckets (N = 60): a leading caller's "
        "denial at 1,065,000 must not drop the bucket of 1,000,000, expired for its clock but not at the newest "
        "admission (1,030,500); the lagging caller at 1,040,000 is then denied, never three permits in 60 s "
        "against a limit of 2.",
        2,
        60_000,
        60,
        [S(1_000_000), S(1_030_500), S(1_065_000, 2), S(1_040_000), S(1_065_000), S(1_065_001)],
        hits=["bucketed-leading-denied", "bucketed-denied-oldest-bucket"],
        clock_regression=True,
    ),
    bucketed(
        "bucketed/skew-leading-allowed-then-lagging",
        "A leading caller admitted far ahead moves the newest time: "
        "lagging callers after it are evaluated and recorded there, in its bucket.",
        3,
        1000,
        10,
        [S(20_000), S(20_100), S(25_000), S(20_200, 2), S(20_300, 3), S(26_098, 3), S(26_099, 3)],
        hits=["bucketed-lagging-caller", "bucketed-denied-oldest-bucket"],
        clock_regression=True,
    ),
    bucketed(
        "bucketed/skew-server-clock-steps-back",
        "The clock steps back after a burst: a check at 51,800 is denied "
        "and drops nothing though buckets are expired for its clock; after the step back to 50,950 every bucket "
        "still counts, and a caller at 51,399 sees only what has expired at its own time.",
        4,
        1000,
        10,
        [
            S(50_000),
            S(50_300),
            S(50_600),
            S(50_900),
            S(51_800, 4),
            S(50_950),
            S(50_960, 2),
            S(51_399),
            S(51_699),
            S(51_999),
            S(51_999, 2),
        ],
        hits=[
            "bucketed-leading-denied",
            "bucketed-denied-oldest-bucket",
            "bucketed-denied-later-bucket",
        ],
        clock_regression=True,
    ),
    # g = 1 (buckets = window_ms) is the sliding log; these and the replays below are compared with
    # the log's model step by step by generate.py.
    bucketed(
        "bucketed/g1/skew-leading-denial-keeps-entries-3600",
        "g = 1 is exactly the sliding log: issue 12's case at "
        "W = 3,600 (the log's own vector uses 100,000, beyond N's cap): the leading denial drops nothing and the "
        "lagging caller is denied.",
        2,
        3600,
        3600,
        [S(1_000_000), S(1_000_001), S(1_003_600, 2), S(1_001_800), S(1_003_600), S(1_003_601)],
        hits=["bucketed-leading-denied", "bucketed-denied-oldest-bucket"],
        clock_regression=True,
    ),
    bucketed(
        "bucketed/g1/peek-3600",
        "g = 1 with peeks, N = 3,600 at the cap: peeks and acquires decide as the log does.",
        3,
        3600,
        3600,
        [S(10_000), P(10_001, 3), S(10_002, 2), P(13_599), P(13_600), S(13_600, 2), P(13_602, 2)],
        hits=["bucketed-denied-oldest-bucket"],
    ),
]


def g1_replay(v: dict) -> dict:
    """A sliding-log vector replayed as a bucketed window with buckets = window_ms."""
    return bucketed(
        "bucketed/g1/" + v["name"].removeprefix("log/"),
        f"g = 1 (buckets = window_ms) is exactly the sliding log; replays {v['name']}: {v['comment']}",
        v["policy"]["limit"],
        v["policy"]["window_ms"],
        v["policy"]["window_ms"],
        [dict(s) for s in v["steps"]],
        clock_regression=v["_clock_regression"],
    )


BUCKETED += [g1_replay(v) for v in LOG if v["policy"]["window_ms"] <= 3600]

# A window of a few ms in buckets of 2 (see LOG's windows of a few ms).
BUCKETED.append(
    bucketed(
        "bucketed/window-10ms",
        "A window of 10 ms in 5 buckets of 2 ms over a dozen steps; the key must not expire on "
        "the server's clock between steps.",
        3,
        10,
        5,
        [S(5000), S(5003), S(5006), S(5009), S(5010), S(5012), S(5013, 2), S(5016, 2), S(5019)],
    )
)

# ---------------------------------------------------------------- validation


def both(name, comment, limit, window_ms, steps, buckets=10, **kw):
    """The same validation vector for each algorithm (the bucketed one with
    `buckets`, valid for the window unless the window itself is invalid)."""
    return [
        log(f"validation/log-{name}", comment, limit, window_ms, steps, **kw),
        counter(f"validation/counter-{name}", comment, limit, window_ms, steps, **kw),
        bucketed(f"validation/bucketed-{name}", comment, limit, window_ms, buckets, steps, **kw),
    ]


VALIDATION = [
    *both(
        "limit-zero",
        "limit must be at least 1: every step is invalid_argument.",
        0,
        1000,
        [S(10_000)],
    ),
    *both(
        "window-zero",
        "window_ms must be at least 1: every step is invalid_argument.",
        10,
        0,
        [S(10_000)],
    ),
    *both(
        "limit-times-window-above-2p52",
        "limit * window_ms = (2^26 + 1) * 2^26 exceeds 2^52: invalid_argument.",
        2**26 + 1,
        2**26,
        [S(10_000)],
        buckets=64,
    ),
    *both(
        "limit-times-window-wraps-64-bits",
        "limit * window_ms = 2^33 * 2^33 = 2^66, which wraps to 0 in 64-bit "
        "arithmetic: still invalid_argument.",
        2**33,
        2**33,
        [S(10_000)],
        buckets=64,
    ),
    counter(
        "validation/counter-limit-times-window-wraps-to-small",
        "(2^32 + 1) * 2^32 wraps to 2^32 in 64-bit arithmetic: invalid_argument all the same.",
        2**32 + 1,
        2**32,
        [S(10_000)],
    ),
    log(
        "validation/log-limit-above-2p52",
        "A limit of 2^53 - 1 with window_ms 1000 is far beyond 2^52: invalid_argument.",
        2**53 - 1,
        1000,
        [S(10_000)],
    ),
    log(
        "validation/log-window-2p52",
        "limit 1 with window_ms = 2^52 (product exactly 2^52) is valid.",
        1,
        P52,
        [S(T0), S(T0 + 1)],
    ),
    log(
        "validation/log-limit-at-cap",
        "The sliding log accepts a limit of 10,000 (its cap): 10,000 permits in one acquire, "
        "a denial, and after the window all 10,000 expire at once and are replaced.",
        10_000,
        60_000,
        [S(T0, 10_000), S(T0 + 59_999), S(T0 + 60_000, 10_000), S(T0 + 60_000, 1)],
        hits=["log-denied-k=1"],
    ),
    log(
        "validation/log-limit-above-cap",
        "A sliding-log limit of 10,001 is above the log's cap (one entry per permit, a check's "
        "work grows with it): invalid_argument for every step; the counter takes such limits.",
        10_001,
        60_000,
        [S(T0), S(T0 + 1, 10_001)],
    ),
    log(
        "validation/log-limit-2p42",
        "A sliding-log limit of 2^42 with window 1024 (product exactly 2^52) is within the "
        "product bound but far above the log's cap: invalid_argument.",
        2**42,
        1024,
        [S(T0)],
    ),
    counter(
        "validation/counter-limit-above-log-cap",
        "The cap is the log's alone: the counter accepts a limit of 10,001.",
        10_001,
        60_000,
        [S(T0, 10_001), S(T0 + 1)],
        hits=["counter-retry-next-window"],
    ),
    counter(
        "validation/counter-limit-and-window-2p26",
        "limit = window_ms = 2^26, product exactly 2^52, is valid.",
        2**26,
        2**26,
        [S(T0, 2**26), S(T0)],
        hits=["counter-retry-next-window"],
    ),
    *both(
        "cost-zero",
        "cost must be at least 1; the error records nothing, the next valid step sees an empty key.",
        3,
        1000,
        [S(10_000, 0), S(10_000, 3)],
    ),
    *both(
        "cost-above-limit",
        "cost > limit could never pass: invalid_argument, never a denial; nothing is recorded.",
        3,
        1000,
        [S(10_000, 4), S(10_000, 3), S(10_001, 4)],
    ),
    *both(
        "tenant-empty",
        "An empty tenant is invalid_argument; other tenants are unaffected.",
        2,
        1000,
        [S(10_000, 1, ""), S(10_000, 1, "t-1")],
    ),
    *both(
        "tenant-lone-surrogate",
        "A tenant with an unpaired surrogate (\\ud83d without its pair, or \\ude80 alone) is no UTF-8 string: invalid_argument; the pair is the tenant `a🚀`.",
        2,
        1000,
        [S(10_000, 1, "a\ud83d"), S(10_000, 1, "\ude80a"), S(10_000, 1, "a🚀")],
    ),
    *both(
        "tenant-length",
        "A 512-byte tenant is accepted; 513 bytes is invalid_argument (bytes, not characters).",
        2,
        1000,
        [S(10_000, 1, "é" * 256), S(10_000, 1, "é" * 256 + "x"), S(10_000, 1, "é" * 256)],
    ),
    *both(
        "now-above-2p52",
        "now_ms may not exceed 2^52: 2^52 is valid, 2^52 + 1 is invalid_argument.",
        2,
        1000,
        [S(P52 - 1), S(P52), S(P52 + 1)],
    ),
    # Negative numbers: docs/driver.md says how a binding whose API types
    # cannot even hold one (Rust's u64, Go's uint64) reports it.
    *both(
        "limit-negative",
        "A negative limit is invalid_argument for every step, in every binding.",
        -1,
        1000,
        [S(10_000)],
        field="limit",
    ),
    *both(
        "window-negative",
        "A negative window_ms is invalid_argument for every step, in every binding.",
        10,
        -1000,
        [S(10_000)],
        field="window_ms",
    ),
    *both(
        "cost-negative",
        "A negative cost is invalid_argument and records nothing; the next valid step sees "
        "an empty key.",
        3,
        1000,
        [S(10_000, -1), S(10_000, 3)],
    ),
    *both(
        "now-negative",
        "A negative now_ms is invalid_argument; now_ms 0 is valid.",
        2,
        1000,
        [S(-5000), S(-1), S(0)],
    ),
    *both(
        "namespace-bad-char",
        "A namespace outside [A-Za-z0-9_.-] is invalid_argument for every step.",
        3,
        1000,
        [S(10_000)],
        namespace="rl:prod",
    ),
    *both(
        "namespace-too-long",
        "A namespace of 65 characters is invalid_argument.",
        3,
        1000,
        [S(10_000)],
        namespace="n" * 65,
    ),
    *both(
        "resource-empty",
        "An empty resource is invalid_argument.",
        3,
        1000,
        [S(10_000)],
        resource="",
    ),
    *both(
        "resource-bad-char",
        "A resource holding `{` is invalid_argument: it would move the hash tag.",
        3,
        1000,
        [S(10_000)],
        resource="geo{code",
    ),
    # buckets (docs/protocol.md, "Bucketed window"): 1 <= buckets <= 3600, buckets divides window_ms,
    # and only the bucketed window takes buckets. Checked after limit, window_ms, their product and
    # the log's cap, before cost and now_ms; `field` is the field the error names.
    bucketed(
        "validation/bucketed-buckets-zero",
        "buckets must be at least 1: every step is invalid_argument.",
        3,
        1000,
        0,
        [S(10_000)],
        field="buckets",
    ),
    bucketed(
        "validation/bucketed-buckets-negative",
        "A negative bucket count is invalid_argument for every step, in every binding.",
        3,
        1000,
        -10,
        [S(10_000)],
        field="buckets",
    ),
    bucketed(
        "validation/bucketed-buckets-one",
        "buckets = 1 is valid (one bucket as wide as the window).",
        3,
        1000,
        1,
        [S(10_000), S(10_001, 3)],
        hits=["bucketed-denied-oldest-bucket"],
    ),
    bucketed(
        "validation/bucketed-buckets-3600",
        "buckets = 3,600 (the cap) is valid where it divides the window.",
        3,
        3_600_000,
        3600,
        [S(T0), S(T0 + 1, 3)],
        hits=["bucketed-denied-oldest-bucket"],
    ),
    bucketed(
        "validation/bucketed-buckets-3601",
        "buckets = 3,601 is above the cap even though it divides the window "
        "(3,601,000 ms): invalid_argument.",
        3,
        3_601_000,
        3601,
        [S(T0)],
        field="buckets",
    ),
    bucketed(
        "validation/bucketed-buckets-2p32",
        "buckets = 2^32 divides a window of 2^32 but is far above the cap "
        "(and would wrap a 32-bit count to 0): invalid_argument.",
        1,
        2**32,
        2**32,
        [S(T0)],
        field="buckets",
    ),
    bucketed(
        "validation/bucketed-buckets-not-dividing",
        "buckets must divide window_ms: 7 buckets of 1,000 ms are "
        "invalid_argument (never rounded).",
        3,
        1000,
        7,
        [S(10_000)],
        field="buckets",
    ),
    bucketed(
        "validation/bucketed-buckets-above-window",
        "buckets above window_ms cannot divide it (a bucket narrower than 1 ms): invalid_argument.",
        3,
        1000,
        2000,
        [S(10_000)],
        field="buckets",
    ),
    bucketed(
        "validation/bucketed-buckets-equal-window",
        "buckets = window_ms is valid: 1 ms buckets, the sliding log.",
        3,
        1000,
        1000,
        [S(10_000, 3), S(10_999), S(11_000, 3)],
        hits=["bucketed-denied-oldest-bucket"],
    ),
    bucketed(
        "validation/bucketed-default-buckets-must-divide",
        "A bucketed policy that names no buckets takes 60, which "
        "must divide window_ms like any other count: 60 does not divide 1,000, so invalid_argument (the one "
        "validation vector that leaves buckets out).",
        3,
        1000,
        None,
        [S(10_000)],
        field="buckets",
    ),
    log(
        "validation/log-buckets-given",
        "Only the bucketed window takes buckets: a sliding-log policy that names them, "
        "even a count that divides its window, is invalid_argument on buckets.",
        3,
        60_000,
        [S(T0)],
        buckets=60,
        field="buckets",
    ),
    counter(
        "validation/counter-buckets-given",
        "Only the bucketed window takes buckets: a sliding-counter policy that "
        "names them is invalid_argument on buckets.",
        3,
        60_000,
        [S(T0)],
        buckets=60,
        field="buckets",
    ),
    log(
        "validation/log-buckets-one",
        "Not even buckets = 1 is accepted on the sliding log.",
        3,
        1000,
        [S(10_000)],
        buckets=1,
        field="buckets",
    ),
    bucketed(
        "validation/bucketed-limit-before-buckets",
        "limit 0 and buckets 0: the error names limit (limit is checked first).",
        0,
        1000,
        0,
        [S(10_000)],
        field="limit",
    ),
    bucketed(
        "validation/bucketed-window-before-buckets",
        "window_ms 0 and buckets 7: the error names window_ms.",
        3,
        0,
        7,
        [S(10_000)],
        field="window_ms",
    ),
    bucketed(
        "validation/bucketed-product-before-buckets",
        "limit * window_ms above 2^52 and buckets not dividing the window: the error names limit.",
        2**26 + 1,
        2**26,
        3,
        [S(10_000)],
        field="limit",
    ),
    log(
        "validation/log-cap-before-buckets",
        "A sliding-log limit above the cap and buckets given: the error names limit.",
        10_001,
        60_000,
        [S(T0)],
        buckets=60,
        field="limit",
    ),
    bucketed(
        "validation/bucketed-buckets-before-cost",
        "buckets not dividing the window and cost 0: the error names "
        "buckets, for every step (a policy error), before any cost is looked at.",
        3,
        1000,
        7,
        [S(10_000, 0), S(10_000, 1)],
        field="buckets",
    ),
    log(
        "validation/log-buckets-before-cost",
        "buckets on the sliding log and cost above the limit: the error names "
        "buckets, for every step.",
        3,
        1000,
        [S(10_000, 4), S(10_000, 1)],
        buckets=10,
        field="buckets",
    ),
    bucketed(
        "validation/bucketed-cost-after-valid-buckets",
        "Valid buckets and cost above the limit: that step alone "
        "is invalid_argument (cost); the next valid step decides.",
        3,
        1000,
        10,
        [S(10_000, 4), S(10_000, 3)],
        field="cost",
    ),
    bucketed(
        "validation/bucketed-limit-above-log-cap",
        "The log's cap is the log's alone: the bucketed window accepts a limit of 10,001.",
        10_001,
        60_000,
        60,
        [S(T0, 10_001), S(T0 + 1)],
        hits=["bucketed-denied-oldest-bucket"],
    ),
    bucketed(
        "validation/bucketed-hint-past-2p53",
        "limit 1, W = 2^52, N = 1, the permit at 2^52 held until x_1 = 3*2^52 - 1: a caller "
        "at 2^52 - 2 or at 0 would be owed a hint above 2^53, which no double holds: "
        "invalid_argument (now_ms), peek too, and nothing is recorded or dropped: the "
        "owner's clock still sees the permit, with hints of 2^53 - 1. (At 2^52 - 1 the hint "
        "is exactly 2^53, an answer; the vectors' integers stay below 2^53.)",
        1,
        P52,
        1,
        [S(P52), S(P52 - 2), P(P52 - 2), S(0), P(P52)],
        clock_regression=True,
    ),
]

# ------------------------------------------------------------ several limits


def L(algorithm: str, limit: int, window_ms: int, buckets: int | None = None) -> dict:
    limit_ = {"algorithm": algorithm, "limit": limit, "window_ms": window_ms}
    if buckets is not None:
        limit_["buckets"] = buckets
    return limit_


def multi(
    name,
    comment,
    limits,
    steps,
    namespace="rl",
    resource=None,
    hits=(),
    clock_regression=False,
    field=None,
):
    """A policy of several limits (docs/protocol.md, "Several limits")."""
    if resource is None:
        resource = name.replace("/", "-")
    return {
        "name": name,
        "kind": "decision",
        "comment": comment,
        "policy": {"namespace": namespace, "resource": resource, "limits": limits},
        "steps": steps,
        "_hits": set(hits),
        "_clock_regression": clock_regression,
        "_field": field,
    }


SECOND_AND_TEN = [L("sliding_log", 2, 1000), L("sliding_log", 3, 10_000)]

MULTI = [
    multi(
        "multi/second-then-ten-seconds",
        "2 per second and 3 per 10 s, both logs: the second limit allows a third "
        "permit the first denies (denied_by 0, nothing recorded anywhere, so the 10 s limit still has room a "
        "second later), then the 10 s limit denies alone (denied_by 1) with its own, longer retry.",
        SECOND_AND_TEN,
        [S(T0), S(T0 + 1), S(T0 + 2), S(T0 + 1000), S(T0 + 1001), S(T0 + 2500)],
        hits=["multi-denied-by-one", "log-denied-k=1"],
    ),
    multi(
        "multi/both-deny-longest-retry",
        "Both limits deny at once: the retry is the longer one (the 10 s "
        "limit's), remaining the smaller, reset the larger, and denied_by names the 10 s limit.",
        SECOND_AND_TEN,
        [S(T0), S(T0 + 1), S(T0 + 1000), S(T0 + 1000), S(T0 + 1001)],
        hits=["multi-denied-by-several"],
    ),
    multi(
        "multi/all-or-none-cost",
        "A cost of 2 that the bucketed limit allows and the log denies records in "
        "neither: the bucketed limit later admits exactly 2 + 1 + 2 = 5 of its 6, which it could not had the "
        "denied 2 been recorded.",
        [L("sliding_log", 3, 1000), L("bucketed_window", 6, 10_000, 10)],
        [S(T0, 2), S(T0 + 100, 2), S(T0 + 200), S(T0 + 1000, 2), S(T0 + 1100), S(T0 + 2000, 2)],
        hits=["multi-denied-by-one"],
    ),
    multi(
        "multi/equal-retries-first-named",
        "Two limits deny with the same retry: denied_by names the first of them.",
        [L("sliding_log", 1, 1000), L("bucketed_window", 1, 1000, 1000)],
        [S(T0), S(T0 + 400)],
        hits=["multi-denied-by-several"],
    ),
    multi(
        "multi/three-algorithms",
        "A log, a counter and a bucketed window in one policy: each decides as it would "
        "alone, the call passes only when all three do, and a denial names the one with the longest wait.",
        [
            L("sliding_log", 4, 1000),
            L("sliding_counter", 6, 5000),
            L("bucketed_window", 8, 20_000, 20),
        ],
        [
            S(T0),
            S(T0 + 10, 3),
            S(T0 + 20),
            S(T0 + 1200, 2),
            S(T0 + 1300),
            S(T0 + 2500),
            S(T0 + 5600, 2),
            S(T0 + 7000),
            S(T0 + 9000, 4),
            S(T0 + 21_000, 4),
        ],
        hits=["multi-denied-by-one"],
    ),
    multi(
        "multi/peek-records-nothing",
        "Peeks decide as acquires would and record in no limit.",
        SECOND_AND_TEN,
        [P(T0), P(T0, 2), S(T0), P(T0 + 1, 2), S(T0 + 1), P(T0 + 2), S(T0 + 1000), P(T0 + 1001)],
        hits=["multi-denied-by-one"],
    ),
    multi(
        "multi/tenants-apart",
        "Each tenant has its own keys for every limit; one tenant's denial does not touch "
        "another's budget.",
        SECOND_AND_TEN,
        [
            S(T0, 1, "a"),
            S(T0, 1, "a"),
            S(T0, 1, "b"),
            S(T0 + 1, 1, "a"),
            S(T0 + 1, 1, "b"),
            S(T0 + 2, 1, "b"),
        ],
        hits=["multi-denied-by-one"],
    ),
    multi(
        "multi/lagging-caller",
        "Clocks that disagree: a lagging caller is evaluated at the newest admission of "
        "each exact limit (the time rule), in every limit.",
        [L("sliding_log", 2, 1000), L("bucketed_window", 3, 10_000, 10)],
        [S(T0 + 5000), S(T0 + 5000), S(T0 + 4200), S(T0 + 6000), S(T0 + 5500)],
        clock_regression=True,
        hits=["multi-denied-by-one"],
    ),
    multi(
        "multi/eight-limits",
        "Eight limits, the most a policy holds: windows of 1 s to 128 s, each allowing "
        "a little more than the last.",
        [L("sliding_log", 2 + i, 1000 * 2**i) for i in range(8)],
        [S(T0), S(T0 + 1), S(T0 + 2), S(T0 + 1000), S(T0 + 2000), S(T0 + 3000), S(T0 + 4000)],
        hits=["multi-denied-by-one"],
    ),
    multi(
        "multi/one-limit-is-the-policy",
        "A list of one limit is that limit's plain policy: the same decisions, and no denied_by.",
        [L("sliding_log", 2, 1000)],
        [S(T0), S(T0 + 1), S(T0 + 2), S(T0 + 1000)],
        hits=["log-denied-k=1"],
    ),
    # Validation of several limits; `field` is the field the first step's error names.
    multi(
        "validation/multi-empty",
        "A policy with no limits is invalid_argument on limits.",
        [],
        [S(T0)],
        field="limits",
    ),
    multi(
        "validation/multi-nine-limits",
        "Nine limits are one more than a policy holds: invalid_argument on limits.",
        [L("sliding_log", 2, 1000 * (i + 1)) for i in range(9)],
        [S(T0)],
        field="limits",
    ),
    multi(
        "validation/multi-same-key",
        "Two limits of one algorithm and window would count in one key: "
        "invalid_argument on limits, whatever their limits.",
        [L("sliding_log", 2, 1000), L("sliding_log", 5, 1000)],
        [S(T0)],
        field="limits",
    ),
    multi(
        "validation/multi-same-window-other-algorithms",
        "One window under two algorithms is two keys: valid.",
        [L("sliding_log", 2, 1000), L("sliding_counter", 5, 1000)],
        [S(T0), S(T0 + 1), S(T0 + 2)],
        hits=["multi-denied-by-one"],
    ),
    multi(
        "validation/multi-bad-window",
        "A bad field of one limit names that limit: limits[1].window_ms.",
        [L("sliding_log", 2, 1000), L("sliding_log", 3, 0)],
        [S(T0)],
        field="limits[1].window_ms",
    ),
    multi(
        "validation/multi-buckets-on-log",
        "buckets on a limit that is not a bucketed window: limits[0].buckets.",
        [L("sliding_log", 2, 1000, 10), L("bucketed_window", 3, 10_000, 10)],
        [S(T0)],
        field="limits[0].buckets",
    ),
    multi(
        "validation/multi-default-buckets-must-divide",
        "A bucketed limit naming no buckets takes 60, which must "
        "divide its window: limits[1].buckets.",
        [L("sliding_log", 2, 1000), L("bucketed_window", 3, 1000)],
        [S(T0)],
        field="limits[1].buckets",
    ),
    multi(
        "validation/multi-cost-above-smallest-limit",
        "cost must fit every limit: 3 exceeds the first limit's 2 "
        "(invalid_argument on cost for that step alone), 2 passes.",
        SECOND_AND_TEN,
        [S(T0, 3), S(T0, 2)],
        field="cost",
    ),
    multi(
        "validation/multi-one-bad-limit-keeps-its-name",
        "A list of one limit names its fields as the plain policy does: window_ms.",
        [L("sliding_log", 2, 0)],
        [S(T0)],
        field="window_ms",
    ),
    multi(
        "validation/multi-hint-past-2p53",
        "A bucketed limit of 1 per 2^52 ms (N = 1) beside a log of 2 per second: a caller "
        "lagging its admission at 2^52 by 2^52 ms would be owed a hint above 2^53 by the "
        "bucketed limit: the whole call is invalid_argument (now_ms), though the log alone "
        "would allow; at 2^52 the bucketed limit denies with a retry of 2^53 - 1.",
        [L("bucketed_window", 1, P52, 1), L("sliding_log", 2, 1000)],
        [S(P52), S(0), S(P52)],
        clock_regression=True,
    ),
]

FILES = {
    "keys.json": KEYS,
    "sliding_log.json": LOG,
    "sliding_counter.json": COUNTER,
    "validation.json": VALIDATION,
    "bucketed_window.json": BUCKETED,
    "multi_limit.json": MULTI,
}
