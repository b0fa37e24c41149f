"""The conformance scenarios: inputs only. generate.py fills in every
expectation from model.py.

Rules every decision scenario keeps (checked by generate.py):
- window_ms >= 1000 wherever a step can succeed: Redis expires keys on its own
  clock while steps use caller time, so a vector must never depend on a key
  expiring (or not) between two steps;
- now_ms never goes backwards, except in vectors marked clock_regression
  (sliding log only: the time rule, t = max(now, newest recorded admission));
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


def key(name, comment, tenant="tenant-17", namespace="rl", resource="geocode",
        algorithm="sliding_log", window_ms=60_000):
    return {
        "name": name,
        "kind": "key",
        "comment": comment,
        "input": {"namespace": namespace, "resource": resource, "tenant": tenant,
                  "algorithm": algorithm, "window_ms": window_ms},
    }


def decision(name, comment, algorithm, limit, window_ms, steps, namespace="rl",
             resource=None, hits=(), clock_regression=False):
    # Each vector gets its own resource, so vectors never share a key even if a
    # runner forgot to clear one.
    if resource is None:
        resource = name.replace("/", "-")
    return {
        "name": name,
        "kind": "decision",
        "comment": comment,
        "policy": {"namespace": namespace, "resource": resource, "algorithm": algorithm,
                   "limit": limit, "window_ms": window_ms},
        "steps": steps,
        "_hits": set(hits),
        "_clock_regression": clock_regression,
    }


def log(name, comment, limit, window_ms, steps, **kw):
    return decision(name, comment, "sliding_log", limit, window_ms, steps, **kw)


def counter(name, comment, limit, window_ms, steps, **kw):
    return decision(name, comment, "sliding_counter", limit, window_ms, steps, **kw)


# ---------------------------------------------------------------------- keys

KEYS = [
    key("key/plain", "The key format <namespace>:{<resource>:<tenant>}:<tag>:<window_ms>; tag `log` for the sliding log."),
    key("key/counter-tag", "The sliding window counter uses the tag `counter`; same hash tag, so the same slot as key/plain.",
        algorithm="sliding_counter"),
    key("key/window-in-key", "window_ms is part of the key: the same tenant under another window is another key.",
        window_ms=1000),
    key("key/window-one-day", "A one-day window is written as its full integer, never as 8.64e+07.",
        algorithm="sliding_counter", window_ms=DAY),
    key("key/escape-percent", "`%` is percent-encoded as %25, so an encoded tenant can never collide with a plain one.",
        tenant="50%"),
    key("key/escape-open-brace", "`{` is percent-encoded as %7B: the hash tag must stay exactly {resource:tenant}.",
        tenant="a{b"),
    key("key/escape-close-brace", "`}` is percent-encoded as %7D: a raw `}` would end the hash tag early.",
        tenant="a}b"),
    key("key/escape-space", "Space (0x20, the last byte below 0x21) is percent-encoded as %20.",
        tenant="a b"),
    key("key/escape-nul", "NUL (0x00) is percent-encoded as %00.",
        tenant="a\x00b"),
    key("key/escape-tab", "Tab (0x09) is percent-encoded as %09.",
        tenant="a\tb"),
    key("key/escape-0x1f", "0x1F, the last control byte, is percent-encoded as %1F.",
        tenant="a\x1fb"),
    key("key/escape-del", "DEL (0x7F) is percent-encoded as %7F.",
        tenant="a\x7fb"),
    key("key/escape-every-control-byte", "Every byte 0x01..0x20 and 0x7F is percent-encoded with upper-case hex digits.",
        tenant="".join(chr(c) for c in range(0x01, 0x21)) + "\x7f"),
    key("key/keeps-printable-ascii", "Every byte 0x21..0x7E except % { } is kept as it is, quotes, backslash and colon included.",
        tenant="".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in "%{}")),
    key("key/tenant-with-colons", "`:` in a tenant is kept: resource may not hold `:`, so (resource, tenant) still splits one way only.",
        tenant="org:42:user:7"),
    key("key/already-encoded-is-encoded-again", "A tenant that looks percent-encoded is encoded again (%7D -> %257D): distinct from the tenant `a}b`.",
        tenant="a%7Db"),
    key("key/encoded-space-is-encoded-again", "The tenant `a%20b` is not the tenant `a b`: %20 becomes %2520.",
        tenant="a%20b"),
    key("key/utf8-latin", "Non-ASCII UTF-8 is kept byte for byte, not percent-encoded.",
        tenant="zoë"),
    key("key/utf8-cjk", "Three-byte UTF-8 characters are kept as they are.",
        tenant="東京"),
    key("key/utf8-emoji", "Four-byte UTF-8 characters are kept as they are.",
        tenant="🚀-launch"),
    key("key/utf8-with-escapes", "Escaping works byte by byte next to multi-byte characters.",
        tenant="zoë {東京}%"),
    key("key/tenant-512-bytes", "A tenant of exactly 512 bytes is accepted.",
        tenant="x" * 512),
    key("key/tenant-513-bytes", "A tenant of 513 bytes is invalid_argument.",
        tenant="x" * 513),
    key("key/tenant-512-bytes-cjk", "The bound counts UTF-8 bytes: 170 three-byte characters + 2 = 512 bytes is accepted.",
        tenant="東" * 170 + "ab"),
    key("key/tenant-513-bytes-cjk", "171 three-byte characters are 513 bytes (only 171 characters): invalid_argument.",
        tenant="東" * 171),
    key("key/tenant-512-bytes-emoji", "128 four-byte characters are 512 bytes (256 UTF-16 units): accepted.",
        tenant="🚀" * 128),
    key("key/tenant-513-bytes-emoji", "128 four-byte characters and one ASCII byte are 513 bytes: invalid_argument.",
        tenant="🚀" * 128 + "x"),
    key("key/tenant-512-bytes-all-escaped", "The bound applies to the tenant, not to its encoding: 512 `%` become 1536 bytes in the key.",
        tenant="%" * 512),
    key("key/tenant-empty", "An empty tenant is invalid_argument.", tenant=""),
    key("key/namespace-64-chars", "A namespace of 64 characters is accepted.", namespace="n" * 64),
    key("key/namespace-65-chars", "A namespace of 65 characters is invalid_argument.", namespace="n" * 65),
    key("key/namespace-empty", "An empty namespace is invalid_argument.", namespace=""),
    key("key/namespace-colon", "`:` is not allowed in a namespace.", namespace="rl:v2"),
    key("key/namespace-brace", "`{` is not allowed in a namespace: it would move the hash tag.", namespace="rl{"),
    key("key/namespace-space", "Space is not allowed in a namespace.", namespace="rl v2"),
    key("key/namespace-charset", "A namespace may use A-Z a-z 0-9 _ . - and nothing else.", namespace="Rate_Limit.v2-EU"),
    key("key/resource-64-chars", "A resource of 64 characters is accepted.", resource="r" * 64),
    key("key/resource-65-chars", "A resource of 65 characters is invalid_argument.", resource="r" * 65),
    key("key/resource-empty", "An empty resource is invalid_argument.", resource=""),
    key("key/resource-colon", "`:` is not allowed in a resource: it would make (resource, tenant) ambiguous.", resource="geo:code"),
    key("key/resource-open-brace", "`{` is not allowed in a resource.", resource="{geocode"),
    key("key/resource-close-brace", "`}` is not allowed in a resource: it would end the hash tag early.", resource="geo}code"),
    key("key/resource-non-ascii-letter", "Only ASCII letters: `é` is not in [A-Za-z0-9_.-].", resource="géocode"),
    key("key/resource-charset", "A resource may use A-Z a-z 0-9 _ . - and nothing else.", resource="Geo_code.v2-EU"),
    key("key/slot-tenant-1", "The slot is CRC16/XMODEM of `resource:tenant` (the hash tag) mod 16384.", tenant="tenant-1"),
    key("key/slot-tenant-2", "A neighbouring tenant lands in another slot.", tenant="tenant-2"),
    key("key/slot-user", "The slot of a tenant holding a colon.", resource="search", tenant="user:1000"),
    key("key/slot-escaped", "The slot is computed over the escaped tenant, as Redis sees the key.", resource="search", tenant="acme corp"),
    key("key/slot-utf8", "The slot is computed over the UTF-8 bytes of the key.", resource="search", tenant="東京"),
]

# --------------------------------------------------------------- sliding log

LOG = [
    log("log/fill-to-limit", "Permits are admitted while count + cost <= limit and remaining counts down; the first denial "
        "waits for the oldest entry (retry = s + W - now) and reset_after is newest + W - now.",
        3, 1000, [S(10_000), S(10_100), S(10_200), S(10_300), S(10_999), S(11_000)]),
    log("log/exact-boundary", "An entry at s counts for now in [s, s + W): at s + W - 1 it still blocks (retry 1), at s + W it is gone.",
        1, 1000, [S(10_000), S(10_999), S(11_000), S(11_999), S(12_000)]),
    log("log/exact-boundary-with-cost", "The boundary holds for a batch: cost 3 at s frees all three permits at exactly s + W.",
        3, 1000, [S(10_000, 3), S(10_999, 1), S(11_000, 3)]),
    log("log/cost-greater-than-one", "cost > 1 records cost entries; a request of cost 4 with 8 of 10 used is denied, "
        "but cost 2 still fits (denials are all or nothing, never partial).",
        10, 1000, [S(10_000, 4), S(10_100, 4), S(10_200, 4), S(10_200, 2), S(10_300, 1)], hits=["log-denied-k>1"]),
    log("log/kth-oldest-retry", "Denied with k = count + cost - limit: retry_after = s + W - now for the k-th oldest live entry s.",
        5, 1000, [S(10_000), S(10_100), S(10_200), S(10_300), S(10_400),
                  S(10_500, 3), S(10_500, 5), S(10_500, 1), S(11_199, 3), S(11_200, 3)],
        hits=["log-denied-k=1", "log-denied-k>1"]),
    log("log/kth-oldest-among-ties", "Entries recorded together count one by one: the k-th oldest may share a timestamp with others.",
        5, 1000, [S(10_000, 2), S(10_500, 3), S(10_600, 2), S(10_600, 3), S(10_600, 5), S(11_000, 2), S(11_000, 1)],
        hits=["log-denied-k>1"]),
    log("log/retry-hint-is-exact", "retry_after is exact with no other traffic: one ms earlier is still denied, at now + retry_after the same cost passes.",
        3, 1000, [S(10_000), S(10_250), S(10_500), S(10_600, 2), S(11_249, 2), S(11_250, 2)],
        hits=["log-denied-k>1"]),
    log("log/denied-is-not-recorded", "Denied requests are never recorded: after many denials the whole limit is free again at s + W.",
        2, 1000, [S(10_000), S(10_000), S(10_100), S(10_500, 2), S(10_900), S(10_999, 2), S(11_000, 2)]),
    log("log/remaining-on-denial", "On a denial remaining = max(0, limit - count): room may be left for a smaller request.",
        5, 1000, [S(10_000, 3), S(10_100, 3), S(10_100, 2), S(10_200, 1)]),
    log("log/cost-equals-limit", "cost = limit fits only an empty window; denied with k = limit, it waits for the newest entry.",
        4, 1000, [S(10_000, 4), S(10_500, 4), S(10_999, 1), S(11_000, 4), S(11_500, 1), S(11_600, 4)],
        hits=["log-denied-k>1"]),
    log("log/many-permits-one-ms", "Many permits in the same millisecond all count, and all leave together at s + W.",
        10, 1000, [S(10_000)] * 10 + [S(10_000), S(10_999), S(11_000, 10)]),
    log("log/large-batches-one-ms", "Batches of 250 entries in one millisecond (more than one write batch) fill a limit of 1000 exactly.",
        1000, 1000, [S(10_000, 250)] * 4 + [S(10_000, 1), S(10_500, 1000), S(11_000, 1000)],
        hits=["log-denied-k>1"]),
    log("log/tenant-isolation", "Two tenants under one policy have separate budgets: one tenant's fill never denies the other.",
        2, 1000, [S(10_000, 1, "t-a"), S(10_100, 1, "t-a"), S(10_200, 1, "t-a"), S(10_300, 1, "t-b"),
                  S(10_400, 1, "t-b"), S(10_500, 1, "t-b"), S(11_000, 1, "t-a"), S(11_100, 1, "t-a")]),
    log("log/escaped-tenants-are-distinct", "Tenants that differ only in escaping (`a b`/`a%20b`, `a}b`/`a%7Db`) never share a budget.",
        1, 1000, [S(10_000, 1, "a b"), S(10_001, 1, "a%20b"), S(10_002, 1, "a b"), S(10_003, 1, "a}b"),
                  S(10_004, 1, "a%7Db"), S(10_005, 1, "a%7Db")]),
    log("log/sliding-not-fixed", "A rolling window, not a fixed one: permits from the end of one window still block the start of the next.",
        4, 1000, [S(10_900, 2), S(11_100, 2), S(11_200), S(11_899, 2), S(11_900, 2), S(12_099), S(12_100, 2)]),
    log("log/partial-expiry", "Only entries with s <= now - W are dropped; the others still count.",
        5, 1000, [S(10_000), S(10_200), S(10_400), S(10_600), S(10_800), S(11_300, 3), S(11_300, 1)]),
    log("log/many-expired-after-idle", "After an idle gap more than eight old entries expire at once; the live ones are still found and counted.",
        20, 1000, [S(10_000 + 50 * i) for i in range(20)] + [S(11_500, 12), S(11_500, 11), S(11_500, 3)],
        hits=["log-denied-k>1"]),
    log("log/skipped-windows", "After a gap of several windows nothing counts: the full limit is available and reset_after is W.",
        3, 1000, [S(10_000, 3), S(10_500), S(15_250, 3), S(15_250), S(21_000, 1)]),
    log("log/first-window-of-epoch", "Times below W (now - W negative) work: an entry at 0 blocks until 999 and is gone at 1000.",
        2, 1000, [S(0), S(500), S(999), S(1000), S(1499), S(1500)]),
    log("log/realistic-timestamps", "The seed's case on a real clock: 600 per 60 s, 600 admitted at 12:00:59, the burst at 12:01:00 "
        "is denied until 12:01:59 (a fixed window would have let 1,200 through).",
        600, 60_000, [S(T0 + 59_000, 300), S(T0 + 59_000, 300), S(T0 + 60_000), S(T0 + 60_000, 600),
                      S(T0 + 118_999), S(T0 + 119_000, 600)], hits=["log-denied-k>1"]),
    log("log/big-window-one-day", "A one-day window with batches hours apart; the retry hint spans most of a day.",
        1000, DAY, [S(T0, 500), S(T0 + 3_600_000, 500), S(T0 + 7_200_000), S(T0 + 7_200_000, 600),
                    S(T0 + DAY, 500), S(T0 + DAY), S(T0 + DAY + 3_600_000, 500)], hits=["log-denied-k>1"]),
    log("log/limit-times-window-2p52", "limit * window_ms exactly 2^52 within the log's cap (2^13 * 2^39): a full log of 8,192 "
        "entries, retry and reset hints near 2^39 stay exact (the counter's vector covers 2^42 * 1024).",
        2**13, 2**39, [S(T0, 2**13 - 1), S(T0 + 1), S(T0 + 2), S(T0 + 2**39, 2**13), S(T0 + 2**39 + 1, 2**13)],
        hits=["log-denied-k=1"]),
    log("log/window-2p50", "A window of 2^50 ms (limit 4, product 2^52): retry and reset stay exact integers far beyond 2^32.",
        4, 2**50, [S(T0, 3), S(T0 + 1_000), S(T0 + 2_000), S(T0 + 3_000, 4)], hits=["log-denied-k>1"]),
    log("log/now-at-2p52", "now_ms = 2^52 is the largest valid caller time; s + W goes past it and stays exact.",
        2, 1000, [S(P52), S(P52), S(P52), S(P52, 2)], hits=["log-denied-k>1"]),
    log("log/clock-regression", "Caller time going back: entries are recorded at r = max(now, newest) and count from there, "
        "so reset_after = r + W - now and the retry hint waits for r + W.",
        3, 1000, [S(5_000), S(4_800), S(4_900), S(4_950), S(5_999), S(6_000, 3)], clock_regression=True),
    # The time rule (docs/protocol.md, "Time"): evaluated at t = max(now, newest recorded admission),
    # recorded at t, nothing dropped unless expired at the newest recorded time.
    log("log/skew-leading-denial-keeps-entries", "Issue 12's case: a leading caller's denial (cost 2 at 1,100,000) must not drop "
        "1,000,000, which is expired for its clock but not at the newest admission (1,000,001); the lagging caller at "
        "1,050,000 is then denied, never three permits in 100 s against a limit of 2.",
        2, 100_000, [S(1_000_000), S(1_000_001), S(1_100_000, 2), S(1_050_000), S(1_100_000), S(1_100_001)],
        hits=["log-leading-denied", "log-denied-k=1"], clock_regression=True),
    log("log/skew-lagging-caller-evaluated-at-newest", "A lagging caller is evaluated at the newest admission: entries expired "
        "there no longer count for it even though its own clock is earlier; its admission is recorded at the newest time.",
        2, 1000, [S(10_000), S(10_999), S(10_500), S(11_500), S(11_000), S(12_499)],
        hits=["log-lagging-caller", "log-denied-k=1"], clock_regression=True),
    log("log/skew-leading-allowed-then-lagging", "A leading caller admitted far ahead moves the newest time: lagging callers after "
        "it are evaluated there, wait for its entries to expire (retry and reset from their own clocks), and every admission is "
        "recorded at or after it.",
        3, 1000, [S(20_000), S(20_100), S(25_000), S(20_200, 2), S(20_300, 3), S(25_999, 3), S(26_000, 3)],
        hits=["log-lagging-caller", "log-denied-k>1"], clock_regression=True),
    log("log/skew-server-clock-steps-back", "The clock steps back (an NTP step, a failover to a replica behind): after a burst "
        "at 50,000-50,900 a check at 51,800 is denied and drops nothing, though three entries are expired for its clock; "
        "the clock steps back to 50,950 and the checks there are evaluated at the newest admission, 50,900: still full.",
        4, 1000, [S(50_000), S(50_300), S(50_600), S(50_900), S(51_800, 4), S(50_950), S(50_960, 2), S(51_300), S(51_600),
                  S(51_901), S(51_902, 2)],
        hits=["log-leading-denied", "log-denied-k=1", "log-denied-k>1"], clock_regression=True),
    log("log/skew-leading-denial-many-expired-heads", "A leading denial where more than two entries are expired for its clock (the scripts "
        "binary-search them): it drops none, since none has expired at the newest admission; a lagging caller still counts them.",
        6, 1000, [S(1_000), S(1_100), S(1_200), S(1_300), S(1_400), S(1_500), S(2_050), S(2_390, 6), S(2_000, 2),
                  S(2_101), S(2_060), S(2_501)],
        hits=["log-leading-denied", "log-lagging-caller", "log-denied-k=1", "log-denied-k>1"], clock_regression=True),
]

# ----------------------------------------------------- sliding window counter

COUNTER = [
    counter("counter/fill-to-limit", "Permits are admitted while a*W + b*(W-e) + cost*W <= limit*W; a full current window "
            "waits into the next one (retry = (W - e) + x').",
            3, 1000, [S(10_000), S(10_100), S(10_200), S(10_300), S(11_333), S(11_334)],
            hits=["counter-retry-next-window", "counter-retry-same-window"]),
    counter("counter/cost-greater-than-one", "cost > 1 adds cost to the current window; a request that would pass the limit is "
            "denied whole while a smaller one still fits.",
            10, 1000, [S(10_000, 4), S(10_100, 4), S(10_200, 4), S(10_200, 2), S(10_300)],
            hits=["counter-retry-next-window"]),
    counter("counter/retry-same-window", "Denied by the weighted previous window: x = W - floor((limit - cost - a)*W / b) < W, "
            "retry = max(x, e) - e; one ms earlier is still denied.",
            10, 1000, [S(10_500, 8), S(11_100, 3), S(11_124, 3), S(11_125, 3), S(11_125, 3)],
            hits=["counter-retry-same-window"]),
    counter("counter/retry-next-window-over-limit", "a + cost > limit: the current window can never pass, so wait into the next: "
            "x' = max(0, W - floor((limit - cost)*W / a)), retry = (W - e) + x'.",
            5, 1000, [S(10_000, 3), S(11_200, 1), S(11_300, 1), S(11_400, 4), S(12_499, 4), S(12_500, 4)],
            hits=["counter-retry-next-window-over-limit", "counter-retry-same-window"]),
    counter("counter/retry-next-window-weight-too-big", "a + cost <= limit but b's weight never drops enough in this window "
            "(x >= W): the hint waits for the next window, where x' = 0 when a = 0.",
            5, 1000, [S(10_000, 5), S(11_000, 5), S(11_999, 5), S(12_000, 5)],
            hits=["counter-retry-next-window-weight", "counter-retry-next-window-start"]),
    counter("counter/retry-window-after-next", "cost = limit with a > 0: x' = W, so the hint is the start of the window after next "
            "(2W - e), when both counts are gone.",
            4, 1000, [S(10_000, 1), S(10_200, 4), S(11_999, 4), S(12_000, 4)],
            hits=["counter-retry-window-after-next"]),
    counter("counter/window-transition-weighting", "The previous window weighs (W - e)/W: full at e = 0, then less each ms.",
            10, 1000, [S(10_000, 10), S(11_000), S(11_099), S(11_100), S(11_500), S(11_500, 4), S(11_999), S(12_000)],
            hits=["counter-retry-same-window"]),
    counter("counter/boundary-last-ms-of-window", "e = W - 1 is still the old window; e = 0 starts a new one where the old "
            "count becomes b at full weight.",
            2, 1000, [S(10_000, 2), S(10_999), S(11_000), S(11_499), S(11_500)],
            hits=["counter-retry-next-window", "counter-retry-same-window"]),
    counter("counter/skipped-windows", "After a gap of several windows a = b = 0: the full limit is free and reset_after is 2W - e.",
            3, 1000, [S(10_000, 3), S(15_500, 3), S(15_600), S(25_000, 2)],
            hits=["counter-retry-next-window"]),
    counter("counter/one-empty-window-between", "Counts two windows old never count, even while still stored: after one empty "
            "window the previous count b is 0.",
            3, 1000, [S(10_000, 3), S(11_000), S(12_000, 3), S(12_000)],
            hits=["counter-retry-same-window"]),
    counter("counter/many-permits-one-ms", "Many permits in the same millisecond all land in the current window.",
            10, 1000, [S(10_000)] * 10 + [S(10_000), S(10_999), S(11_000), S(11_100)],
            hits=["counter-retry-next-window", "counter-retry-same-window"]),
    counter("counter/large-batches-one-ms", "Batches of 250 in one millisecond fill a limit of 1000 exactly.",
            1000, 1000, [S(10_000, 250)] * 4 + [S(10_000, 1), S(11_000, 1), S(11_001, 1)],
            hits=["counter-retry-next-window", "counter-retry-same-window"]),
    counter("counter/tenant-isolation", "Two tenants under one policy have separate counters.",
            2, 1000, [S(10_000, 1, "t-a"), S(10_100, 1, "t-a"), S(10_200, 1, "t-a"), S(10_300, 1, "t-b"),
                      S(10_400, 1, "t-b"), S(10_500, 1, "t-b"), S(11_600, 1, "t-a")],
            hits=["counter-retry-next-window"]),
    counter("counter/denied-is-not-recorded", "Denials add nothing: the next window sees b = limit, not more.",
            2, 1000, [S(10_000, 2), S(10_100), S(10_500, 2), S(10_900), S(11_500), S(11_500)],
            hits=["counter-retry-next-window"]),
    counter("counter/remaining-floors-the-estimate", "remaining = max(0, floor((limit*W - a'*W - b*(W - e)) / W)): "
            "the weighted previous window is rounded in the caller's disfavour.",
            10, 1000, [S(10_000, 7), S(11_300), S(11_301), S(11_950)]),
    counter("counter/first-window-of-epoch", "Times below W: the previous window starts at -W and is empty; "
            "at W the first window becomes the previous one.",
            2, 1000, [S(0), S(500), S(999), S(1000), S(1500)],
            hits=["counter-retry-next-window", "counter-retry-same-window"]),
    counter("counter/windows-align-to-epoch", "Windows start at multiples of W since time 0, not at the first request: "
            "with W = 1500, now = 10000 lies in [9000, 10500).",
            2, 1500, [S(10_000, 2), S(10_499), S(10_500), S(10_500, 2), S(11_250)],
            hits=["counter-retry-next-window", "counter-retry-same-window"]),
    counter("counter/realistic-timestamps", "The seed's case on a real clock: 600 per 60 s, 600 at 12:00:59; at 12:01:00 the "
            "previous window weighs fully, then one permit frees up every 100 ms (the counter's approximation).",
            600, 60_000, [S(T0 + 59_000, 600), S(T0 + 60_000), S(T0 + 60_099), S(T0 + 60_100), S(T0 + 60_100),
                          S(T0 + 90_000, 300), S(T0 + 90_000, 1)],
            hits=["counter-retry-same-window"]),
    counter("counter/big-window-one-day", "A one-day window (windows start at UTC midnight); hints span hours.",
            1000, DAY, [S(T0, 600), S(T0 + 3_600_000, 400), S(T0 + 3_600_000), S(T0 + 9 * 3_600_000, 500),
                        S(T0 + 20 * 3_600_000, 900), S(T0 + 20 * 3_600_000, 1)],
            hits=["counter-retry-next-window", "counter-retry-same-window"]),
    counter("counter/limit-times-window-2p52", "limit * window_ms exactly 2^52 (2^42 * 1024); the estimate reaches 2^52 "
            "and stays exact.",
            2**42, 1024, [S(T0_1024 + 100, 2**42), S(T0_1024 + 100), S(T0_1024 + 1024 + 511, 2**41),
                          S(T0_1024 + 1024 + 512, 2**41), S(T0_1024 + 1024 + 512)],
            hits=["counter-retry-next-window", "counter-retry-same-window"]),
    counter("counter/limit-and-window-2p26", "limit = window_ms = 2^26 (product 2^52) with mid-size batches.",
            2**26, 2**26, [S(T0, 2**25), S(T0 + 1000, 2**25), S(T0 + 2000, 3), S(T0 + 2**26, 2**25)],
            hits=["counter-retry-next-window"]),
    counter("counter/now-at-2p52", "now_ms = 2^52 is the largest valid caller time.",
            2, 1000, [S(P52), S(P52), S(P52)],
            hits=["counter-retry-next-window"]),
]

# ---------------------------------------------------------------- validation


def both(name, comment, limit, window_ms, steps, **kw):
    """The same validation vector for each algorithm."""
    return [log(f"validation/log-{name}", comment, limit, window_ms, steps, **kw),
            counter(f"validation/counter-{name}", comment, limit, window_ms, steps, **kw)]


VALIDATION = [
    *both("limit-zero", "limit must be at least 1: every step is invalid_argument.", 0, 1000, [S(10_000)]),
    *both("window-zero", "window_ms must be at least 1: every step is invalid_argument.", 10, 0, [S(10_000)]),
    *both("limit-times-window-above-2p52", "limit * window_ms = (2^26 + 1) * 2^26 exceeds 2^52: invalid_argument.",
          2**26 + 1, 2**26, [S(10_000)]),
    *both("limit-times-window-wraps-64-bits", "limit * window_ms = 2^33 * 2^33 = 2^66, which wraps to 0 in 64-bit "
          "arithmetic: still invalid_argument.", 2**33, 2**33, [S(10_000)]),
    counter("validation/counter-limit-times-window-wraps-to-small", "(2^32 + 1) * 2^32 wraps to 2^32 in 64-bit arithmetic: "
            "invalid_argument all the same.", 2**32 + 1, 2**32, [S(10_000)]),
    log("validation/log-limit-above-2p52", "A limit of 2^53 - 1 with window_ms 1000 is far beyond 2^52: invalid_argument.",
        2**53 - 1, 1000, [S(10_000)]),
    log("validation/log-window-2p52", "limit 1 with window_ms = 2^52 (product exactly 2^52) is valid.",
        1, P52, [S(T0), S(T0 + 1)]),
    log("validation/log-limit-at-cap", "The sliding log accepts a limit of 10,000 (its cap): 10,000 permits in one acquire, "
        "a denial, and after the window all 10,000 expire at once and are replaced.",
        10_000, 60_000, [S(T0, 10_000), S(T0 + 59_999), S(T0 + 60_000, 10_000), S(T0 + 60_000, 1)],
        hits=["log-denied-k=1"]),
    log("validation/log-limit-above-cap", "A sliding-log limit of 10,001 is above the log's cap (one entry per permit, a check's "
        "work grows with it): invalid_argument for every step; the counter takes such limits.",
        10_001, 60_000, [S(T0), S(T0 + 1, 10_001)]),
    log("validation/log-limit-2p42", "A sliding-log limit of 2^42 with window 1024 (product exactly 2^52) is within the "
        "product bound but far above the log's cap: invalid_argument.",
        2**42, 1024, [S(T0)]),
    counter("validation/counter-limit-above-log-cap", "The cap is the log's alone: the counter accepts a limit of 10,001.",
            10_001, 60_000, [S(T0, 10_001), S(T0 + 1)], hits=["counter-retry-next-window"]),
    counter("validation/counter-limit-and-window-2p26", "limit = window_ms = 2^26, product exactly 2^52, is valid.",
            2**26, 2**26, [S(T0, 2**26), S(T0)], hits=["counter-retry-next-window"]),
    *both("cost-zero", "cost must be at least 1; the error records nothing, the next valid step sees an empty key.",
          3, 1000, [S(10_000, 0), S(10_000, 3)]),
    *both("cost-above-limit", "cost > limit could never pass: invalid_argument, never a denial; nothing is recorded.",
          3, 1000, [S(10_000, 4), S(10_000, 3), S(10_001, 4)]),
    *both("tenant-empty", "An empty tenant is invalid_argument; other tenants are unaffected.",
          2, 1000, [S(10_000, 1, ""), S(10_000, 1, "t-1")]),
    *both("tenant-length", "A 512-byte tenant is accepted; 513 bytes is invalid_argument (bytes, not characters).",
          2, 1000, [S(10_000, 1, "é" * 256), S(10_000, 1, "é" * 256 + "x"), S(10_000, 1, "é" * 256)]),
    *both("now-above-2p52", "now_ms may not exceed 2^52: 2^52 is valid, 2^52 + 1 is invalid_argument.",
          2, 1000, [S(P52 - 1), S(P52), S(P52 + 1)]),
    *both("namespace-bad-char", "A namespace outside [A-Za-z0-9_.-] is invalid_argument for every step.",
          3, 1000, [S(10_000)], namespace="rl:prod"),
    *both("namespace-too-long", "A namespace of 65 characters is invalid_argument.",
          3, 1000, [S(10_000)], namespace="n" * 65),
    *both("resource-empty", "An empty resource is invalid_argument.", 3, 1000, [S(10_000)], resource=""),
    *both("resource-bad-char", "A resource holding `{` is invalid_argument: it would move the hash tag.",
          3, 1000, [S(10_000)], resource="geo{code"),
]

FILES = {
    "keys.json": KEYS,
    "sliding_log.json": LOG,
    "sliding_counter.json": COUNTER,
    "validation.json": VALIDATION,
}
