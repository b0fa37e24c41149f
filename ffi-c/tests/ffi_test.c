/*
 * Exercises every function of the slidelimit C ABI, with good input, NULL
 * pointers, zero lengths and invalid values. `make test-ffi` runs it under
 * valgrind (--leak-check=full --error-exitcode=1), so a leak or an invalid
 * read fails the build as surely as a wrong answer.
 */
#include "slidelimit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (cond) {                                                            \
      passed++;                                                            \
    } else {                                                               \
      failed++;                                                            \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                      \
  } while (0)

#define S(lit) (const uint8_t *)(lit), (sizeof(lit) - 1)

static int bytes_eq(const uint8_t *p, size_t n, const char *want) {
  return n == strlen(want) && memcmp(p, want, n) == 0;
}

static int starts_with(const uint8_t *p, size_t n, const char *prefix) {
  size_t k = strlen(prefix);
  return n >= k && memcmp(p, prefix, k) == 0;
}

/* The field core blamed: `want` NULL means none. */
static int field_is(slidelimit_field f, const char *want) {
  if (want == NULL) {
    return f.name == NULL && f.len == 0;
  }
  return f.name != NULL && bytes_eq(f.name, f.len, want);
}

/* A field no failure names, to prove that a failure overwrites it. */
static const slidelimit_field STALE = {(const uint8_t *)"stale", 5};

static void test_names(void) {
  CHECK(strlen(slidelimit_version()) > 0);
  /* Core's policy defaults (defaults.rs), for bindings with optional arguments. */
  CHECK(strcmp(slidelimit_default_namespace(), "rl") == 0);
  CHECK(strcmp(slidelimit_default_algorithm(), "sliding_log") == 0);
  CHECK(slidelimit_default_timeout_ms() == 1000);
  CHECK(strcmp(slidelimit_result_name(SLIDELIMIT_RESULT_OK), "ok") == 0);
  CHECK(strcmp(slidelimit_result_name(SLIDELIMIT_RESULT_INVALID_ARGUMENT), "invalid_argument") == 0);
  CHECK(strcmp(slidelimit_result_name(SLIDELIMIT_RESULT_UNAVAILABLE), "unavailable") == 0);
  CHECK(strcmp(slidelimit_result_name(SLIDELIMIT_RESULT_INTERNAL), "internal") == 0);
  CHECK(strcmp(slidelimit_result_name(SLIDELIMIT_RESULT_NULL_POINTER), "null_pointer") == 0);
  CHECK(strcmp(slidelimit_result_name(SLIDELIMIT_RESULT_BUFFER_TOO_SMALL), "buffer_too_small") == 0);
  CHECK(strcmp(slidelimit_result_name(8), "unknown") == 0);
  CHECK(strcmp(slidelimit_result_name(0xFFFFFFFFu), "unknown") == 0);

  uint32_t alg = 0;
  CHECK(slidelimit_algorithm_parse(S("sliding_counter"), &alg, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(alg == SLIDELIMIT_ALGORITHM_SLIDING_COUNTER);
  CHECK(slidelimit_algorithm_parse(S("bucketed_window"), &alg, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(alg == SLIDELIMIT_ALGORITHM_BUCKETED_WINDOW && alg == 3);
  uint8_t msg[128];
  size_t msg_len = 0;
  slidelimit_field field = STALE;
  alg = 42;
  CHECK(slidelimit_algorithm_parse(S("fixed"), &alg, msg, sizeof msg, &msg_len, &field) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(alg == 42); /* untouched on failure */
  CHECK(starts_with(msg, msg_len, "algorithm:"));
  CHECK(msg[msg_len] == 0);
  CHECK(field_is(field, "algorithm"));
  /* Success leaves the field alone. */
  CHECK(slidelimit_algorithm_parse(S("sliding_log"), &alg, NULL, 0, NULL, &field) == SLIDELIMIT_RESULT_OK);
  CHECK(field_is(field, "algorithm"));
  CHECK(slidelimit_algorithm_parse(NULL, 0, &alg, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(slidelimit_algorithm_parse(NULL, 3, &alg, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_algorithm_parse(S("sliding_log"), NULL, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
}

static void test_policy(slidelimit_policy **out) {
  uint8_t msg[256];
  size_t msg_len = 0;
  slidelimit_policy *p = NULL;
  slidelimit_field field = STALE;

  /* Each invalid field is named in the message; the out-param stays NULL. */
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), 1, 0, 1000, NULL, &p, msg, sizeof msg, &msg_len, &field) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(p == NULL);
  CHECK(starts_with(msg, msg_len, "limit:"));
  CHECK(field_is(field, "limit"));
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), 1, 1, 0, NULL, &p, msg, sizeof msg, &msg_len, &field) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "window_ms:"));
  CHECK(field_is(field, "window_ms"));
  CHECK(slidelimit_policy_new(NULL, 0, S("geo"), 1, 1, 1, NULL, &p, msg, sizeof msg, &msg_len, &field) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "namespace:"));
  CHECK(field_is(field, "namespace"));
  CHECK(slidelimit_policy_new(S("rl"), S("ge:o"), 1, 1, 1, NULL, &p, msg, sizeof msg, &msg_len, &field) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "resource:"));
  CHECK(field_is(field, "resource"));
  CHECK(slidelimit_policy_new(S("rl"), S("\xff"), 1, 1, 1, NULL, &p, msg, sizeof msg, &msg_len, &field) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "resource: is not valid UTF-8"));
  CHECK(field_is(field, "resource"));
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), 9, 1, 1, NULL, &p, msg, sizeof msg, &msg_len, &field) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "algorithm:"));
  CHECK(field_is(field, "algorithm"));
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), 1, UINT64_MAX, 2, NULL, &p, msg, sizeof msg, &msg_len, &field) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "limit:"));
  CHECK(field_is(field, "limit"));
  CHECK(slidelimit_policy_new(NULL, 2, S("geo"), 1, 1, 1, NULL, &p, msg, sizeof msg, &msg_len, &field) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(starts_with(msg, msg_len, "namespace:"));
  CHECK(field_is(field, NULL)); /* a NULL pointer is the caller's misuse, no field */
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), 1, 1, 1, NULL, NULL, msg, sizeof msg, &msg_len, &field) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(p == NULL);

  /* A message buffer that is too small is cut, NUL-terminated; none at all is fine. */
  uint8_t tiny[6];
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), 1, 0, 1, NULL, &p, tiny, sizeof tiny, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(msg_len == 5 && memcmp(tiny, "limit", 5) == 0 && tiny[5] == 0);
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), 1, 0, 1, NULL, &p, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  /* The field comes without any message buffer, and whole when the message is cut. */
  field = STALE;
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), 1, 1, 0, NULL, &p, NULL, 0, NULL, &field) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(field_is(field, "window_ms"));
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), 1, 1, 0, NULL, &p, tiny, sizeof tiny, &msg_len, &field) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(field_is(field, "window_ms") && msg_len == 5);
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), 1, 0, 1, NULL, &p, msg, 0, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(msg_len == 0);

  CHECK(slidelimit_policy_new(S("rl"), S("geocode"), SLIDELIMIT_ALGORITHM_SLIDING_LOG, 3, 1000, NULL, &p,
                              NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(p != NULL);
  slidelimit_policy_free(NULL);
  *out = p;
}

static void test_keys(const slidelimit_policy *p) {
  uint8_t key[SLIDELIMIT_KEY_MAX];
  uint8_t msg[256];
  size_t len = 0, msg_len = 0;
  slidelimit_field field = STALE;
  uint16_t slot = 0xFFFF;

  CHECK(slidelimit_policy_key(p, S("a}b"), key, sizeof key, &len, &slot, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(bytes_eq(key, len, "rl:{geocode:a%7Db}:log:1000"));
  uint16_t again = 0;
  CHECK(slidelimit_key_slot(key, len, &again) == SLIDELIMIT_RESULT_OK);
  CHECK(slot == again && slot < 16384);
  /* The slot is optional. */
  CHECK(slidelimit_policy_key(p, S("t"), key, sizeof key, &len, NULL, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(bytes_eq(key, len, "rl:{geocode:t}:log:1000"));
  /* Redis Cluster's own examples: foo -> 12182, hash tags share a slot. */
  CHECK(slidelimit_key_slot(S("foo"), &slot) == SLIDELIMIT_RESULT_OK && slot == 12182);
  CHECK(slidelimit_key_slot(S("{user1000}.following"), &slot) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_key_slot(S("{user1000}.followers"), &again) == SLIDELIMIT_RESULT_OK);
  CHECK(slot == again);
  CHECK(slidelimit_key_slot(NULL, 0, &slot) == SLIDELIMIT_RESULT_OK && slot == 0);
  CHECK(slidelimit_key_slot(NULL, 1, &slot) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_key_slot(S("\xc3"), &slot) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(slidelimit_key_slot(S("foo"), NULL) == SLIDELIMIT_RESULT_NULL_POINTER);

  /* Too small: nothing written. */
  uint8_t small[8];
  memset(small, 'x', sizeof small);
  len = 77;
  CHECK(slidelimit_policy_key(p, S("t"), small, sizeof small, &len, NULL, msg, sizeof msg,
                              &msg_len, NULL) == SLIDELIMIT_RESULT_BUFFER_TOO_SMALL);
  CHECK(len == 77 && small[0] == 'x');
  CHECK(starts_with(msg, msg_len, "buf: the key needs 23 bytes"));
  CHECK(slidelimit_policy_key(p, S("t"), NULL, 0, &len, NULL, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_BUFFER_TOO_SMALL);
  CHECK(slidelimit_policy_key(p, S("t"), NULL, 64, &len, NULL, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);

  /* Bad tenants. */
  CHECK(slidelimit_policy_key(p, NULL, 0, key, sizeof key, &len, NULL, msg, sizeof msg,
                              &msg_len, &field) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "tenant: must not be empty"));
  CHECK(field_is(field, "tenant"));
  CHECK(slidelimit_policy_key(p, S("\xff\xfe"), key, sizeof key, &len, NULL, msg, sizeof msg,
                              &msg_len, &field) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "tenant: is not valid UTF-8"));
  CHECK(field_is(field, "tenant"));
  static uint8_t big[513];
  memset(big, 'x', sizeof big);
  CHECK(slidelimit_policy_key(p, big, sizeof big, key, sizeof key, &len, NULL, msg, sizeof msg,
                              &msg_len, NULL) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(slidelimit_policy_key(p, big, 512, key, sizeof key, &len, NULL, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_policy_key(p, NULL, 3, key, sizeof key, &len, NULL, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_policy_key(NULL, S("t"), key, sizeof key, &len, NULL, msg, sizeof msg,
                              &msg_len, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(starts_with(msg, msg_len, "policy: must not be NULL"));
  CHECK(slidelimit_policy_key(p, S("t"), key, sizeof key, NULL, NULL, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
}

static void test_scripts(void) {
  const uint8_t *text = NULL, *sha = NULL, *sha_peek = NULL;
  size_t text_len = 0, sha_len = 0, peek_len = 0;
  for (uint32_t a = 1; a <= 3; a++) {
    for (uint32_t m = 1; m <= 2; m++) {
      CHECK(slidelimit_script_text(a, m, &text, &text_len) == SLIDELIMIT_RESULT_OK);
      CHECK(text_len > 100);
      CHECK(starts_with(text, text_len, m == SLIDELIMIT_MODE_PEEK ? "local read_only = true"
                                                                  : "local read_only = false"));
      CHECK(slidelimit_script_sha1(a, m, &sha, &sha_len) == SLIDELIMIT_RESULT_OK);
      CHECK(sha_len == 40);
    }
  }
  CHECK(slidelimit_script_sha1(1, 1, &sha, &sha_len) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_script_sha1(1, 2, &sha_peek, &peek_len) == SLIDELIMIT_RESULT_OK);
  CHECK(memcmp(sha, sha_peek, 40) != 0);
  text = NULL;
  CHECK(slidelimit_script_text(0, 1, &text, &text_len) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(text == NULL);
  CHECK(slidelimit_script_text(1, 3, &text, &text_len) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(slidelimit_script_text(1, 1, NULL, &text_len) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_script_sha1(1, 1, &sha, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_script_sha1(4, 1, &sha, &sha_len) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
}

static void test_calls(const slidelimit_policy *p) {
  uint8_t msg[256];
  size_t msg_len = 0, n = 0, len = 0;
  slidelimit_field field = STALE;
  const uint8_t *ptr = NULL;
  slidelimit_call *call = NULL;
  uint64_t now = 100000000000000ULL;

  CHECK(slidelimit_policy_build_call(p, S("tenant-17"), 2, &now, SLIDELIMIT_MODE_ACQUIRE, &call,
                                     NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(call != NULL);
  CHECK(slidelimit_call_key_count(call, &n) == SLIDELIMIT_RESULT_OK && n == 1);
  CHECK(slidelimit_call_key(call, 0, &ptr, &len) == SLIDELIMIT_RESULT_OK);
  CHECK(bytes_eq(ptr, len, "rl:{geocode:tenant-17}:log:1000"));
  CHECK(slidelimit_call_key(call, 1, &ptr, &len) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(slidelimit_call_arg_count(call, &n) == SLIDELIMIT_RESULT_OK && n == 4);
  const char *want[] = {"3", "1000", "2", "100000000000000"};
  for (size_t i = 0; i < 4; i++) {
    CHECK(slidelimit_call_arg(call, i, &ptr, &len) == SLIDELIMIT_RESULT_OK);
    CHECK(bytes_eq(ptr, len, want[i]));
  }
  CHECK(slidelimit_call_arg(call, 4, &ptr, &len) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  const uint8_t *sha = NULL, *static_sha = NULL;
  size_t sha_len = 0, static_len = 0;
  CHECK(slidelimit_call_sha1(call, &sha, &sha_len) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_script_sha1(1, 1, &static_sha, &static_len) == SLIDELIMIT_RESULT_OK);
  CHECK(sha_len == 40 && memcmp(sha, static_sha, 40) == 0);
  CHECK(slidelimit_call_script_text(call, &ptr, &len) == SLIDELIMIT_RESULT_OK);
  CHECK(starts_with(ptr, len, "local read_only = false"));
  uint16_t slot = 0, key_slot = 1;
  bool ro = true;
  CHECK(slidelimit_call_info(call, &slot, &ro) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_key_slot(S("rl:{geocode:tenant-17}:log:1000"), &key_slot) == SLIDELIMIT_RESULT_OK);
  CHECK(slot == key_slot && !ro);
  /* NULLs on the accessors. */
  CHECK(slidelimit_call_key_count(NULL, &n) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_call_key_count(call, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_call_key(NULL, 0, &ptr, &len) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_call_key(call, 0, NULL, &len) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_call_arg_count(NULL, &n) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_call_arg(NULL, 0, &ptr, &len) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_call_arg(call, 0, &ptr, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_call_sha1(NULL, &ptr, &len) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_call_script_text(NULL, &ptr, &len) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_call_info(NULL, &slot, &ro) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_call_info(call, NULL, &ro) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_call_info(call, &slot, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  slidelimit_call_free(call);
  slidelimit_call_free(NULL);

  /* Server time: empty now_ms argument; peek mode is read-only. */
  call = NULL;
  CHECK(slidelimit_policy_build_call(p, S("t"), 1, NULL, SLIDELIMIT_MODE_PEEK, &call, NULL, 0,
                                     NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_call_arg(call, 3, &ptr, &len) == SLIDELIMIT_RESULT_OK && len == 0);
  CHECK(slidelimit_call_info(call, &slot, &ro) == SLIDELIMIT_RESULT_OK && ro);
  slidelimit_call_free(call);

  /* Invalid cost, time, tenant, mode; NULLs. */
  call = NULL;
  CHECK(slidelimit_policy_build_call(p, S("t"), 4, NULL, 1, &call, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "cost:"));
  CHECK(slidelimit_policy_build_call(p, S("t"), 0, NULL, 1, &call, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "cost:"));
  uint64_t too_late = (1ULL << 52) + 1;
  CHECK(slidelimit_policy_build_call(p, S("t"), 1, &too_late, 1, &call, msg, sizeof msg,
                                     &msg_len, &field) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "now_ms:"));
  CHECK(field_is(field, "now_ms"));
  CHECK(slidelimit_policy_build_call(p, NULL, 0, 1, NULL, 1, &call, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "tenant:"));
  CHECK(slidelimit_policy_build_call(p, S("t"), 1, NULL, 0, &call, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "mode:"));
  /* Invalid UTF-8 tenants (C hands over bytes): stray, cut, overlong,
   * surrogate, above U+10FFFF. No call is made, the message names the field. */
  static const char *const not_utf8[] = {"\xff", "ok\x80", "ab\xc3", "\xc0\xaf", "\xed\xa0\x80",
                                         "\xf4\x90\x80\x80"};
  for (size_t i = 0; i < sizeof not_utf8 / sizeof not_utf8[0]; i++) {
    const uint8_t *bytes = (const uint8_t *)not_utf8[i];
    size_t n = strlen(not_utf8[i]);
    msg_len = 0;
    CHECK(slidelimit_policy_build_call(p, bytes, n, 1, NULL, SLIDELIMIT_MODE_ACQUIRE, &call, msg,
                                       sizeof msg, &msg_len, NULL) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
    CHECK(starts_with(msg, msg_len, "tenant: is not valid UTF-8"));
    CHECK(call == NULL);
  }
  CHECK(slidelimit_policy_build_call(NULL, S("t"), 1, NULL, 1, &call, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_policy_build_call(p, S("t"), 1, NULL, 1, NULL, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(call == NULL);
}

/* One call built into caller buffers: the same parts as the handle's, sizes
 * asked for first, exact-size buffers (malloc'd, so valgrind sees a byte
 * written past them), one byte or one part short, NULLs and invalid input. */
static void test_build_into(const slidelimit_policy *p) {
  uint8_t msg[256];
  size_t msg_len = 0;
  slidelimit_field field = STALE;
  uint64_t now = 100000000000000ULL;
  uint8_t buf[SLIDELIMIT_CALL_BUF_MAX];
  size_t lens[SLIDELIMIT_CALL_PARTS_MAX];
  size_t keys = 0, parts = 0, used = 0;

  CHECK(slidelimit_policy_build_call_into(p, S("tenant-17"), 2, &now, SLIDELIMIT_MODE_ACQUIRE, buf,
                                          sizeof buf, lens, SLIDELIMIT_CALL_PARTS_MAX, &keys, &parts,
                                          &used, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(keys == 1 && parts == 5);
  /* The same parts, in the same order, as the call handle's accessors. */
  slidelimit_call *call = NULL;
  CHECK(slidelimit_policy_build_call(p, S("tenant-17"), 2, &now, SLIDELIMIT_MODE_ACQUIRE, &call, NULL,
                                     0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  size_t at = 0;
  for (size_t i = 0; i < parts; i++) {
    const uint8_t *ptr = NULL;
    size_t len = 0;
    CHECK((i < keys ? slidelimit_call_key(call, i, &ptr, &len)
                    : slidelimit_call_arg(call, i - keys, &ptr, &len)) == SLIDELIMIT_RESULT_OK);
    CHECK(lens[i] == len && memcmp(buf + at, ptr, len) == 0);
    at += lens[i];
  }
  CHECK(at == used);
  CHECK(bytes_eq(buf, lens[0], "rl:{geocode:tenant-17}:log:1000"));
  CHECK(bytes_eq(buf + used - lens[4], lens[4], "100000000000000"));
  slidelimit_call_free(call);

  /* Server time: the last part (now_ms) is empty. Peek builds too. */
  CHECK(slidelimit_policy_build_call_into(p, S("t"), 1, NULL, SLIDELIMIT_MODE_PEEK, buf, sizeof buf,
                                          lens, SLIDELIMIT_CALL_PARTS_MAX, &keys, &parts, &used, NULL,
                                          0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(parts == 5 && lens[4] == 0);
  CHECK(used == lens[0] + lens[1] + lens[2] + lens[3]);
  CHECK(bytes_eq(buf + lens[0], lens[1] + lens[2] + lens[3], "310001"));

  /* Ask for the sizes (NULL buffers, capacity 0), then build into buffers of
   * exactly those sizes. */
  keys = 77;
  parts = used = 0;
  CHECK(slidelimit_policy_build_call_into(p, S("a}b"), 1, &now, SLIDELIMIT_MODE_ACQUIRE, NULL, 0, NULL,
                                          0, &keys, &parts, &used, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_BUFFER_TOO_SMALL);
  CHECK(keys == 77); /* untouched */
  CHECK(parts == 5 && used == strlen("rl:{geocode:a%7Db}:log:1000") + strlen("31000") + 1 + 15);
  CHECK(starts_with(msg, msg_len, "buf: the call needs 48 bytes, buf_cap is 0"));
  size_t need_bytes = used, need_parts = parts;
  uint8_t *exact = malloc(need_bytes);
  size_t *exact_lens = malloc(need_parts * sizeof *exact_lens);
  CHECK(exact != NULL && exact_lens != NULL);
  CHECK(slidelimit_policy_build_call_into(p, S("a}b"), 1, &now, SLIDELIMIT_MODE_ACQUIRE, exact,
                                          need_bytes, exact_lens, need_parts, &keys, &parts, &used,
                                          NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(keys == 1 && parts == need_parts && used == need_bytes);
  CHECK(bytes_eq(exact, exact_lens[0], "rl:{geocode:a%7Db}:log:1000"));

  /* One byte short, one part short: nothing written but the sizes needed. */
  memset(exact, 'x', need_bytes);
  exact_lens[0] = 999;
  keys = 77;
  parts = used = 0;
  CHECK(slidelimit_policy_build_call_into(p, S("a}b"), 1, &now, SLIDELIMIT_MODE_ACQUIRE, exact,
                                          need_bytes - 1, exact_lens, need_parts, &keys, &parts, &used,
                                          msg, sizeof msg, &msg_len, NULL) == SLIDELIMIT_RESULT_BUFFER_TOO_SMALL);
  CHECK(starts_with(msg, msg_len, "buf: the call needs 48 bytes, buf_cap is 47"));
  CHECK(exact[0] == 'x' && exact[need_bytes - 1] == 'x' && exact_lens[0] == 999 && keys == 77);
  CHECK(parts == need_parts && used == need_bytes);
  parts = used = 0;
  CHECK(slidelimit_policy_build_call_into(p, S("a}b"), 1, &now, SLIDELIMIT_MODE_ACQUIRE, exact,
                                          need_bytes, exact_lens, need_parts - 1, &keys, &parts, &used,
                                          msg, sizeof msg, &msg_len, NULL) == SLIDELIMIT_RESULT_BUFFER_TOO_SMALL);
  CHECK(starts_with(msg, msg_len, "part_lens: the call needs 5 parts, part_lens_cap is 4"));
  CHECK(exact[0] == 'x' && exact_lens[0] == 999 && keys == 77);
  CHECK(parts == need_parts && used == need_bytes);
  free(exact);
  free(exact_lens);

  /* The longest tenant fits SLIDELIMIT_CALL_BUF_MAX (a 512-byte tenant of
   * escaped bytes triples). */
  static uint8_t braces[512];
  memset(braces, '{', sizeof braces);
  CHECK(slidelimit_policy_build_call_into(p, braces, sizeof braces, 1, &now, SLIDELIMIT_MODE_ACQUIRE,
                                          buf, sizeof buf, lens, SLIDELIMIT_CALL_PARTS_MAX, &keys,
                                          &parts, &used, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(lens[0] == strlen("rl:{geocode:}:log:1000") + 3 * 512);

  /* NULLs: each required pointer, and a buffer NULL with a capacity. */
  keys = parts = used = 77;
  CHECK(slidelimit_policy_build_call_into(NULL, S("t"), 1, NULL, 1, buf, sizeof buf, lens, 8, &keys,
                                          &parts, &used, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(starts_with(msg, msg_len, "policy: must not be NULL"));
  CHECK(slidelimit_policy_build_call_into(p, NULL, 1, 1, NULL, 1, buf, sizeof buf, lens, 8, &keys,
                                          &parts, &used, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_policy_build_call_into(p, S("t"), 1, NULL, 1, NULL, sizeof buf, lens, 8, &keys,
                                          &parts, &used, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(starts_with(msg, msg_len, "buf: must not be NULL"));
  CHECK(slidelimit_policy_build_call_into(p, S("t"), 1, NULL, 1, buf, sizeof buf, NULL, 8, &keys,
                                          &parts, &used, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(starts_with(msg, msg_len, "part_lens: must not be NULL"));
  CHECK(slidelimit_policy_build_call_into(p, S("t"), 1, NULL, 1, buf, sizeof buf, lens, 8, NULL,
                                          &parts, &used, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_policy_build_call_into(p, S("t"), 1, NULL, 1, buf, sizeof buf, lens, 8, &keys, NULL,
                                          &used, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_policy_build_call_into(p, S("t"), 1, NULL, 1, buf, sizeof buf, lens, 8, &keys,
                                          &parts, NULL, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(keys == 77 && parts == 77 && used == 77);

  /* Invalid input fails before any size is checked (even with no buffers)
   * and names the field; nothing is written. */
  uint64_t too_late = (1ULL << 52) + 1;
  CHECK(slidelimit_policy_build_call_into(p, S("t"), 0, NULL, 1, NULL, 0, NULL, 0, &keys, &parts, &used,
                                          msg, sizeof msg, &msg_len, &field) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "cost:"));
  CHECK(field_is(field, "cost"));
  CHECK(slidelimit_policy_build_call_into(p, S("t"), 4, NULL, 1, buf, sizeof buf, lens, 8, &keys,
                                          &parts, &used, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "cost:"));
  CHECK(slidelimit_policy_build_call_into(p, S("t"), 1, &too_late, 1, buf, sizeof buf, lens, 8, &keys,
                                          &parts, &used, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "now_ms:"));
  CHECK(slidelimit_policy_build_call_into(p, NULL, 0, 1, NULL, 1, buf, sizeof buf, lens, 8, &keys,
                                          &parts, &used, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "tenant: must not be empty"));
  CHECK(slidelimit_policy_build_call_into(p, S("ab\xc3"), 1, NULL, 1, buf, sizeof buf, lens, 8, &keys,
                                          &parts, &used, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "tenant: is not valid UTF-8"));
  static uint8_t big[513];
  memset(big, 'x', sizeof big);
  CHECK(slidelimit_policy_build_call_into(p, big, sizeof big, 1, NULL, 1, buf, sizeof buf, lens, 8,
                                          &keys, &parts, &used, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "tenant:"));
  CHECK(slidelimit_policy_build_call_into(p, S("t"), 1, NULL, 3, buf, sizeof buf, lens, 8, &keys,
                                          &parts, &used, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "mode:"));
  CHECK(keys == 77 && parts == 77 && used == 77);
}

static void test_replies(void) {
  slidelimit_decision d;
  uint8_t msg[256];
  size_t msg_len = 0;
  const int64_t allowed[5] = {1, 2, 0, 1000, 5000};
  CHECK(slidelimit_decision_from_reply(allowed, 5, 1, &d, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(d.allowed && d.remaining == 2 && d.retry_after_ms == 0 && d.reset_after_ms == 1000 &&
        d.now_ms == 5000 && d.denied_by == -1);
  const int64_t denied[5] = {0, 0, 250, 900, 5000};
  CHECK(slidelimit_decision_from_reply(denied, 5, 1, &d, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(!d.allowed && d.retry_after_ms == 250 && d.denied_by == -1);
  /* A multi-limit reply: the sixth integer is denied_by + 1. */
  const int64_t denied_by_second[6] = {0, 0, 250, 900, 5000, 2};
  CHECK(slidelimit_decision_from_reply(denied_by_second, 6, 2, &d, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(!d.allowed && d.retry_after_ms == 250 && d.denied_by == 1);
  /* Parsed against the policy that asked: six integers are no reply of one
     limit, and a second limit is not in a policy of one. */
  CHECK(slidelimit_decision_from_reply(denied_by_second, 6, 1, &d, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_MALFORMED_REPLY);
  CHECK(starts_with(msg, msg_len, "script reply has 6 elements where a policy of 1 limit replies with 5"));
  CHECK(slidelimit_decision_words_from_reply(denied_by_second, 6, 1, (uint64_t[SLIDELIMIT_DECISION_WORDS]){0}) ==
        SLIDELIMIT_RESULT_MALFORMED_REPLY);
  slidelimit_field field = {0};
  CHECK(slidelimit_decision_from_reply(denied, 5, 0, &d, NULL, 0, NULL, &field) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(field.len == 6 && memcmp(field.name, "limits", 6) == 0);

  memset(&d, 0x5A, sizeof d);
  slidelimit_decision before = d;
  const int64_t bad_allowed[5] = {2, 0, 0, 0, 0};
  const int64_t negative[5] = {1, -1, 0, 0, 0};
  const int64_t zero_retry[5] = {0, 0, 0, 0, 0};
  CHECK(slidelimit_decision_from_reply(bad_allowed, 5, 1, &d, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_MALFORMED_REPLY);
  CHECK(starts_with(msg, msg_len, "script reply has allowed = 2"));
  CHECK(slidelimit_decision_from_reply(negative, 5, 1, &d, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_MALFORMED_REPLY);
  CHECK(slidelimit_decision_from_reply(zero_retry, 5, 1, &d, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_MALFORMED_REPLY);
  CHECK(slidelimit_decision_from_reply(allowed, 4, 1, &d, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_MALFORMED_REPLY);
  CHECK(slidelimit_decision_from_reply(NULL, 0, 1, &d, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_MALFORMED_REPLY);
  CHECK(starts_with(msg, msg_len, "script reply has 0 elements"));
  CHECK(memcmp(&d, &before, sizeof d) == 0); /* out-param untouched on failure */
  CHECK(slidelimit_decision_from_reply(NULL, 5, 1, &d, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_decision_from_reply(allowed, 5, 1, NULL, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);

  /* The same decisions as plain words; refusals leave the words alone. */
  uint64_t words[SLIDELIMIT_DECISION_WORDS];
  CHECK(slidelimit_decision_words_from_reply(allowed, 5, 1, words) == SLIDELIMIT_RESULT_OK);
  CHECK(words[0] == 1 && words[1] == 2 && words[2] == 0 && words[3] == 1000 && words[4] == 5000);
  CHECK(slidelimit_decision_words_from_reply(denied, 5, 1, words) == SLIDELIMIT_RESULT_OK);
  CHECK(words[0] == 0 && words[1] == 0 && words[2] == 250 && words[3] == 900 && words[4] == 5000);
  memset(words, 0x5A, sizeof words);
  uint64_t words_before[SLIDELIMIT_DECISION_WORDS];
  memcpy(words_before, words, sizeof words);
  CHECK(slidelimit_decision_words_from_reply(bad_allowed, 5, 1, words) == SLIDELIMIT_RESULT_MALFORMED_REPLY);
  CHECK(slidelimit_decision_words_from_reply(negative, 5, 1, words) == SLIDELIMIT_RESULT_MALFORMED_REPLY);
  CHECK(slidelimit_decision_words_from_reply(zero_retry, 5, 1, words) == SLIDELIMIT_RESULT_MALFORMED_REPLY);
  CHECK(slidelimit_decision_words_from_reply(allowed, 4, 1, words) == SLIDELIMIT_RESULT_MALFORMED_REPLY);
  CHECK(slidelimit_decision_words_from_reply(NULL, 0, 1, words) == SLIDELIMIT_RESULT_MALFORMED_REPLY);
  CHECK(memcmp(words, words_before, sizeof words) == 0);
  CHECK(slidelimit_decision_words_from_reply(NULL, 5, 1, words) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_decision_words_from_reply(allowed, 5, 1, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);

  /* TRYAGAIN (a slot migrating under a call's keys) is resent after a
     growing pause; nothing else is. */
  uint64_t pause = 7;
  CHECK(slidelimit_server_error_resend_pause_ms(S("TRYAGAIN Multiple keys request during rehashing of slot"), 0,
                                                &pause) == SLIDELIMIT_RESULT_OK &&
        pause == 5);
  CHECK(slidelimit_server_error_resend_pause_ms(S("TRYAGAIN Multiple keys request during rehashing of slot"), 30,
                                                &pause) == SLIDELIMIT_RESULT_OK &&
        pause == 100);
  CHECK(slidelimit_server_error_resend_pause_ms(S("NOSCRIPT No matching script."), 0, &pause) ==
            SLIDELIMIT_RESULT_OK &&
        pause == 0);
  CHECK(slidelimit_server_error_resend_pause_ms(NULL, 0, 0, &pause) == SLIDELIMIT_RESULT_OK && pause == 0);
  CHECK(slidelimit_server_error_resend_pause_ms(S("TRYAGAIN"), 0, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);

  slidelimit_server_error kind = 0;
  slidelimit_result code = SLIDELIMIT_RESULT_OK;
  CHECK(slidelimit_server_error_classify(S("NOSCRIPT No matching script."), &kind, &code) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(kind == SLIDELIMIT_SERVER_ERROR_NO_SCRIPT);
  CHECK(slidelimit_server_error_classify(S("MOVED 3999 127.0.0.1:7001"), &kind, &code) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(kind == SLIDELIMIT_SERVER_ERROR_REDIRECT && code == SLIDELIMIT_RESULT_UNAVAILABLE);
  CHECK(slidelimit_server_error_classify(S("LOADING Redis is loading"), &kind, &code) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(kind == SLIDELIMIT_SERVER_ERROR_TRANSIENT && code == SLIDELIMIT_RESULT_UNAVAILABLE);
  CHECK(slidelimit_server_error_classify(S("WRONGTYPE Operation against a key"), &kind, &code) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(kind == SLIDELIMIT_SERVER_ERROR_FINAL && code == SLIDELIMIT_RESULT_WRONG_TYPE);
  CHECK(slidelimit_server_error_classify(S("NOPERM no"), &kind, &code) == SLIDELIMIT_RESULT_OK);
  CHECK(code == SLIDELIMIT_RESULT_PERMISSION_DENIED);
  CHECK(slidelimit_server_error_classify(S("ERR \xff odd"), &kind, &code) == SLIDELIMIT_RESULT_OK);
  CHECK(kind == SLIDELIMIT_SERVER_ERROR_FINAL && code == SLIDELIMIT_RESULT_SCRIPT_ERROR);
  CHECK(slidelimit_server_error_classify(NULL, 0, &kind, &code) == SLIDELIMIT_RESULT_OK);
  CHECK(code == SLIDELIMIT_RESULT_SCRIPT_ERROR);
  CHECK(slidelimit_server_error_classify(NULL, 4, &kind, &code) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_server_error_classify(S("ERR"), NULL, &code) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_server_error_classify(S("ERR"), &kind, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
}

/* Server errors by core's one table, with its messages. */
static void test_server_error_map(void) {
  static const char key[] = "rl:{geocode:t}:counter:1000";
  slidelimit_server_error_action action = 0;
  slidelimit_result code = SLIDELIMIT_RESULT_INTERNAL;
  uint8_t out[512];
  size_t out_len = 99;
  uint8_t msg[128];
  size_t msg_len = 0;
  slidelimit_field field = STALE;
  slidelimit_field out_field = STALE;
#define MAP(reply, after_retry)                                                                      \
  slidelimit_server_error_map(S(reply), S(key), SLIDELIMIT_ALGORITHM_SLIDING_COUNTER, (after_retry), \
                              &action, &code, out, sizeof out, &out_len, &out_field, msg, sizeof msg,  \
                              &msg_len, NULL)

  /* NOSCRIPT: retry with EVAL once; after the retry, a script error. */
  CHECK(MAP("NOSCRIPT No matching script. Please use EVAL.", false) == SLIDELIMIT_RESULT_OK);
  CHECK(action == SLIDELIMIT_SERVER_ERROR_ACTION_RETRY_WITH_EVAL && code == SLIDELIMIT_RESULT_OK);
  CHECK(out_len == 0 && out[0] == 0);
  CHECK(field_is(out_field, NULL));
  CHECK(MAP("NOSCRIPT No matching script. Please use EVAL.", true) == SLIDELIMIT_RESULT_OK);
  CHECK(action == SLIDELIMIT_SERVER_ERROR_ACTION_FAIL && code == SLIDELIMIT_RESULT_SCRIPT_ERROR);
  CHECK(bytes_eq(out, out_len, "NOSCRIPT No matching script. Please use EVAL."));
  /* A redirect that surfaces and a transient state are unavailable. */
  CHECK(MAP("MOVED 3999 127.0.0.1:7001", false) == SLIDELIMIT_RESULT_OK);
  CHECK(action == SLIDELIMIT_SERVER_ERROR_ACTION_FAIL && code == SLIDELIMIT_RESULT_UNAVAILABLE);
  CHECK(starts_with(out, out_len, "redis unavailable: the cluster's slot map is changing"));
  CHECK(MAP("LOADING Redis is loading", false) == SLIDELIMIT_RESULT_OK);
  CHECK(code == SLIDELIMIT_RESULT_UNAVAILABLE);
  CHECK(bytes_eq(out, out_len, "redis unavailable: LOADING Redis is loading"));
  /* WRONGTYPE names the key and the algorithm and keeps Redis's text. */
  CHECK(MAP("WRONGTYPE Operation against a key", false) == SLIDELIMIT_RESULT_OK);
  CHECK(action == SLIDELIMIT_SERVER_ERROR_ACTION_FAIL && code == SLIDELIMIT_RESULT_WRONG_TYPE);
  CHECK(starts_with(out, out_len,
                    "key rl:{geocode:t}:counter:1000 holds a value the sliding_counter algorithm"));
  CHECK(out_len > 33 && memcmp(out + out_len - 33, "WRONGTYPE Operation against a key", 33) == 0);
  CHECK(out[out_len] == 0);
  CHECK(MAP("NOPERM User rl has no permissions", true) == SLIDELIMIT_RESULT_OK);
  CHECK(code == SLIDELIMIT_RESULT_PERMISSION_DENIED);
  CHECK(MAP("ERR slidelimit invalid_argument cost: must be at least 1", false) == SLIDELIMIT_RESULT_OK);
  CHECK(code == SLIDELIMIT_RESULT_INVALID_ARGUMENT && bytes_eq(out, out_len, "cost: must be at least 1"));
  /* Core names the field of a script's invalid_argument; a name it does not
   * know is no field. */
  CHECK(field_is(out_field, "cost"));
  CHECK(MAP("ERR slidelimit invalid_argument speed: too fast", false) == SLIDELIMIT_RESULT_OK);
  CHECK(code == SLIDELIMIT_RESULT_INVALID_ARGUMENT && field_is(out_field, NULL));
  out_field = STALE;
  CHECK(MAP("WRONGPASS invalid username-password pair or user is disabled.", false) == SLIDELIMIT_RESULT_OK);
  CHECK(code == SLIDELIMIT_RESULT_PERMISSION_DENIED && field_is(out_field, NULL));
  CHECK(MAP("ERR \xff odd", false) == SLIDELIMIT_RESULT_OK); /* invalid UTF-8 is replaced */
  CHECK(code == SLIDELIMIT_RESULT_SCRIPT_ERROR && bytes_eq(out, out_len, "ERR \xef\xbf\xbd odd"));
  CHECK(slidelimit_server_error_map(NULL, 0, S(key), 1, false, &action, &code, out, sizeof out, &out_len, NULL,
                                    NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(code == SLIDELIMIT_RESULT_SCRIPT_ERROR && out_len == 0);

  /* reply_len + key_len + SLIDELIMIT_SERVER_ERROR_MESSAGE_EXTRA bytes hold
   * the whole message (malloc'd: valgrind sees a byte past it); a smaller
   * buffer gets it cut and NUL-terminated; none at all is fine. */
  static const char wrongtype[] = "WRONGTYPE Operation against a key holding the wrong kind of value";
  size_t cap = strlen(wrongtype) + strlen(key) + SLIDELIMIT_SERVER_ERROR_MESSAGE_EXTRA;
  uint8_t *whole = malloc(cap);
  CHECK(whole != NULL);
  CHECK(slidelimit_server_error_map(S(wrongtype), S(key), 1, false, &action, &code, whole, cap, &out_len, NULL,
                                    NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(out_len < cap && whole[out_len] == 0);
  CHECK(memcmp(whole + out_len - strlen(wrongtype), wrongtype, strlen(wrongtype)) == 0);
  free(whole);
  uint8_t tiny[5];
  CHECK(slidelimit_server_error_map(S(wrongtype), S(key), 1, false, &action, &code, tiny, sizeof tiny,
                                    &out_len, NULL, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(out_len == 4 && memcmp(tiny, "key ", 4) == 0 && tiny[4] == 0);
  CHECK(slidelimit_server_error_map(S(wrongtype), S(key), 1, false, &action, &code, NULL, 0, NULL, NULL, NULL,
                                    0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(code == SLIDELIMIT_RESULT_WRONG_TYPE);

  /* A command that is no script call (a reset's DEL): the same table, never
   * a retry, a WRONGTYPE message without a key. */
  CHECK(slidelimit_server_error_map_command(S("WRONGTYPE Operation against a key"), &code, out,
                                            sizeof out, &out_len, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(code == SLIDELIMIT_RESULT_WRONG_TYPE);
  CHECK(bytes_eq(out, out_len, "WRONGTYPE Operation against a key"));
  CHECK(slidelimit_server_error_map_command(S("NOSCRIPT No matching script."), &code, out, sizeof out,
                                            &out_len, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(code == SLIDELIMIT_RESULT_SCRIPT_ERROR);
  CHECK(slidelimit_server_error_map_command(S("NOPERM no"), &code, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(code == SLIDELIMIT_RESULT_PERMISSION_DENIED);
  CHECK(slidelimit_server_error_map_command(S("ERR slidelimit invalid_argument tenant: must not be empty"), &code,
                                            NULL, 0, NULL, &out_field) == SLIDELIMIT_RESULT_OK);
  CHECK(code == SLIDELIMIT_RESULT_INVALID_ARGUMENT && field_is(out_field, "tenant"));
  CHECK(slidelimit_server_error_map_command(S("WRONGPASS invalid username-password pair"), &code, NULL, 0, NULL,
                                            &out_field) == SLIDELIMIT_RESULT_OK);
  CHECK(code == SLIDELIMIT_RESULT_PERMISSION_DENIED && field_is(out_field, NULL));
  CHECK(slidelimit_server_error_map_command(S("MOVED 1 a:1"), &code, tiny, sizeof tiny, &out_len, NULL) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(code == SLIDELIMIT_RESULT_UNAVAILABLE && out_len == 4 && memcmp(tiny, "redi", 5) == 0);
  code = 42;
  out_len = 42;
  CHECK(slidelimit_server_error_map_command(NULL, 1, &code, out, sizeof out, &out_len, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_server_error_map_command(S("ERR"), NULL, out, sizeof out, &out_len, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_server_error_map_command(S("ERR"), &code, NULL, 1, &out_len, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(code == 42 && out_len == 42);

  /* Its own failures: NULLs, an unknown algorithm, a key that is not UTF-8;
   * out-params untouched. */
  action = 42;
  code = 42;
  out_len = 42;
  CHECK(slidelimit_server_error_map(S("ERR"), S(key), 4, false, &action, &code, out, sizeof out, &out_len, NULL,
                                    msg, sizeof msg, &msg_len, &field) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "algorithm:"));
  CHECK(field_is(field, "algorithm"));
  CHECK(slidelimit_server_error_map(S("ERR"), S("k\xff"), 1, false, &action, &code, out, sizeof out,
                                    &out_len, NULL, msg, sizeof msg,
                                    &msg_len, &field) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "key: is not valid UTF-8"));
  CHECK(field_is(field, "key"));
  CHECK(slidelimit_server_error_map(NULL, 3, S(key), 1, false, &action, &code, out, sizeof out, &out_len, NULL,
                                    msg, sizeof msg, &msg_len, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(starts_with(msg, msg_len, "reply: must not be NULL"));
  CHECK(slidelimit_server_error_map(S("ERR"), NULL, 3, 1, false, &action, &code, out, sizeof out,
                                    &out_len, NULL, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_server_error_map(S("ERR"), S(key), 1, false, NULL, &code, out, sizeof out, &out_len, NULL,
                                    NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_server_error_map(S("ERR"), S(key), 1, false, &action, NULL, out, sizeof out, &out_len, NULL,
                                    NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_server_error_map(S("ERR"), S(key), 1, false, &action, &code, NULL, 8, &out_len, NULL, msg,
                                    sizeof msg, &msg_len, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(starts_with(msg, msg_len, "out_message: must not be NULL"));
  CHECK(action == 42 && code == 42 && out_len == 42);
#undef MAP
}

/* A real clock far from every caller time below, and a caller's now_ms. */
#define CLOCK 1800000000000ULL
#define AT(ms) (&(const uint64_t){(ms)})

static void test_memory(const slidelimit_policy *p) {
  slidelimit_memory *m = NULL;
  slidelimit_decision d;
  uint8_t msg[256];
  size_t msg_len = 0, count = 99;
  slidelimit_field field = STALE;
  bool removed = false;

  CHECK(slidelimit_memory_new(NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_memory_new(&m) == SLIDELIMIT_RESULT_OK && m != NULL);
  CHECK(slidelimit_memory_key_count(m, &count) == SLIDELIMIT_RESULT_OK && count == 0);

  /* The contract's first example: limit 3 per 1000 ms. */
  CHECK(slidelimit_memory_acquire(m, p, S("t-1"), 1, AT(1000), CLOCK, &d, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(d.allowed && d.remaining == 2 && d.retry_after_ms == 0 && d.reset_after_ms == 1000 &&
        d.now_ms == 1000);
  CHECK(slidelimit_memory_acquire(m, p, S("t-1"), 2, AT(1100), CLOCK, &d, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(d.allowed && d.remaining == 0);
  CHECK(slidelimit_memory_peek(m, p, S("t-1"), 1, AT(1200), CLOCK, &d, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(!d.allowed && d.retry_after_ms == 800);
  CHECK(slidelimit_memory_acquire(m, p, S("t-1"), 1, AT(1200), CLOCK, &d, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(!d.allowed && d.retry_after_ms == 800 && d.reset_after_ms == 900);
  CHECK(slidelimit_memory_acquire(m, p, S("t-1"), 1, AT(2000), CLOCK, &d, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(d.allowed && d.remaining == 0);
  CHECK(slidelimit_memory_key_count(m, &count) == SLIDELIMIT_RESULT_OK && count == 1);

  CHECK(slidelimit_memory_acquire(m, p, S("t-1"), 4, AT(2000), CLOCK,
                                  &d, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "cost:"));
  CHECK(slidelimit_memory_peek(m, p, NULL, 0, 1, AT(2000), CLOCK, &d, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "tenant:"));
  CHECK(slidelimit_memory_acquire(NULL, p, S("t"), 1, AT(0), CLOCK, &d, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_memory_acquire(m, NULL, S("t"), 1, AT(0), CLOCK, &d, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_memory_peek(m, p, S("t"), 1, AT(0), CLOCK, NULL, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_memory_acquire(m, p, S("t"), 1, AT((1ULL << 52) + 1), CLOCK, &d, msg, sizeof msg,
                                  &msg_len, &field) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "now_ms:"));
  CHECK(field_is(field, "now_ms"));
  /* Invalid UTF-8 tenants record nothing, in any call. */
  CHECK(slidelimit_memory_acquire(m, p, S("t\xff"), 1, AT(2000), CLOCK,
                                  &d, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "tenant: is not valid UTF-8"));
  CHECK(slidelimit_memory_peek(m, p, S("\xed\xa0\x80"), 1, AT(2000), CLOCK,
                               &d, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "tenant: is not valid UTF-8"));
  CHECK(slidelimit_memory_reset(m, p, S("\xc0\xaf"), &removed, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "tenant: is not valid UTF-8"));
  CHECK(slidelimit_memory_key_count(m, &count) == SLIDELIMIT_RESULT_OK && count == 1);

  /* Keys expire on clock_ms alone (Redis's PEXPIRE runs on the server's clock),
   * never on the caller's now_ms: limit 1 per 60 s, in an engine of its own. */
  slidelimit_memory *m2 = NULL;
  slidelimit_policy *one = NULL;
  CHECK(slidelimit_memory_new(&m2) == SLIDELIMIT_RESULT_OK && m2 != NULL);
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), SLIDELIMIT_ALGORITHM_SLIDING_LOG, 1, 60000, NULL, &one,
                              NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_memory_acquire(m2, one, S("A"), 1, AT(1000), CLOCK, &d, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(d.allowed && d.now_ms == 1000 && d.reset_after_ms == 60000);
  CHECK(slidelimit_memory_peek(m2, one, S("A"), 1, AT(1000000), CLOCK, &d, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(d.allowed && d.now_ms == 1000000);
  for (int i = 0; i < 5000; i++) {
    char other[32];
    int n = snprintf(other, sizeof other, "other-%d", i);
    CHECK(slidelimit_memory_peek(m2, one, (const uint8_t *)other, (size_t)n, 1, AT(5000000), CLOCK,
                                 &d, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  }
  CHECK(slidelimit_memory_acquire(m2, one, S("A"), 1, AT(1001), CLOCK, &d, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(!d.allowed && d.retry_after_ms == 59999 && d.reset_after_ms == 59999 && d.now_ms == 1001);
  /* NULL now_ms decides at the clock. Written with caller time, the key lives
   * through CLOCK + 120000: 60000 until nothing counts, plus one window
   * (docs/protocol.md, "Key expiry and caller clocks"). */
  CHECK(slidelimit_memory_peek(m2, one, S("A"), 1, NULL, CLOCK, &d, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(d.allowed && d.now_ms == CLOCK);
  CHECK(slidelimit_memory_peek(m2, one, S("A"), 1, AT(1001), CLOCK + 120000, &d, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(!d.allowed);
  CHECK(slidelimit_memory_peek(m2, one, S("A"), 1, AT(1001), CLOCK + 120001, &d, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(d.allowed);
  CHECK(slidelimit_memory_reset(m2, one, S("A"), &removed, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(!removed); /* expired on the clock by the peek above */
  CHECK(slidelimit_memory_key_count(m2, &count) == SLIDELIMIT_RESULT_OK && count == 0);
  slidelimit_policy_free(one);
  slidelimit_memory_free(m2);

  CHECK(slidelimit_memory_reset(m, p, S("t-1"), &removed, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(removed);
  CHECK(slidelimit_memory_reset(m, p, S("t-1"), &removed, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(!removed);
  CHECK(slidelimit_memory_reset(m, p, NULL, 0, &removed, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(slidelimit_memory_reset(m, p, S("t"), NULL, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_memory_reset(NULL, p, S("t"), &removed, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_memory_key_count(NULL, &count) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_memory_key_count(m, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  slidelimit_memory_free(m);
  slidelimit_memory_free(NULL);
}

static void test_timeout(void) {
  uint8_t msg[128];
  size_t msg_len = 0;
  slidelimit_field field = STALE;
  CHECK(slidelimit_check_timeout_ms(0, msg, sizeof msg, &msg_len, &field) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "timeout_ms:"));
  CHECK(field_is(field, "timeout_ms"));
  CHECK(msg[msg_len] == 0);
  CHECK(slidelimit_check_timeout_ms(1, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_check_timeout_ms(2147483647u, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_check_timeout_ms(2147483648u, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
}

static void test_cost(void) {
  uint8_t msg[128];
  size_t msg_len = 0;
  slidelimit_field field = STALE;
  slidelimit_policy *p = NULL;
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), 1, 3, 1000, NULL, &p, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_policy_check_cost(p, 0, msg, sizeof msg, &msg_len, &field) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "cost: must be at least 1"));
  CHECK(field_is(field, "cost"));
  field = STALE;
  CHECK(slidelimit_policy_check_cost(p, 4, msg, sizeof msg, &msg_len, &field) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "cost: 4 exceeds the limit 3"));
  CHECK(field_is(field, "cost"));
  CHECK(msg[msg_len] == 0);
  CHECK(slidelimit_policy_check_cost(p, 1, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_policy_check_cost(p, 3, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_policy_check_cost(NULL, 1, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  slidelimit_policy_free(p);
}

static void test_metrics(void) {
  const uint8_t *p = NULL;
  size_t n = 0;
  /* The table as docs/protocol.md states it. */
  CHECK(slidelimit_metric_name(SLIDELIMIT_METRIC_ALLOWED_TOTAL, &p, &n) == SLIDELIMIT_RESULT_OK);
  CHECK(bytes_eq(p, n, "ratelimit_allowed_total"));
  CHECK(slidelimit_metric_help(SLIDELIMIT_METRIC_DENIED_TOTAL, &p, &n) == SLIDELIMIT_RESULT_OK);
  CHECK(bytes_eq(p, n, "Acquires denied by the rate limiter."));
  CHECK(slidelimit_metric_name(SLIDELIMIT_METRIC_WAIT_SECONDS, &p, &n) == SLIDELIMIT_RESULT_OK);
  CHECK(bytes_eq(p, n, "ratelimit_wait_seconds"));
  size_t count = 99;
  CHECK(slidelimit_metric_label_count(SLIDELIMIT_METRIC_ALLOWED_TOTAL, true, &count) == SLIDELIMIT_RESULT_OK);
  CHECK(count == 2);
  CHECK(slidelimit_metric_label_count(SLIDELIMIT_METRIC_WAIT_SECONDS, true, &count) == SLIDELIMIT_RESULT_OK);
  CHECK(count == 1);
  CHECK(slidelimit_metric_label(SLIDELIMIT_METRIC_DENIED_TOTAL, true, 1, &p, &n, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(bytes_eq(p, n, "tenant"));
  uint8_t msg[64];
  size_t msg_len = 0;
  CHECK(slidelimit_metric_label(SLIDELIMIT_METRIC_WAIT_SECONDS, true, 1, &p, &n, msg, sizeof msg, &msg_len, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "index:"));
  const double *b = NULL;
  CHECK(slidelimit_metric_buckets(SLIDELIMIT_METRIC_WAIT_SECONDS, &b, &n) == SLIDELIMIT_RESULT_OK);
  CHECK(n == 12 && b[0] == 0.001 && b[11] == 600.0);
  CHECK(slidelimit_metric_buckets(SLIDELIMIT_METRIC_ALLOWED_TOTAL, &b, &n) == SLIDELIMIT_RESULT_OK);
  CHECK(n == 0);
  CHECK(slidelimit_metric_wait_seconds(1500) == 1.5);
  /* Bad ids and NULL out-pointers. */
  CHECK(slidelimit_metric_name(0, &p, &n) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(slidelimit_metric_name(SLIDELIMIT_METRIC_LOCAL_DENIED_TOTAL, &p, &n) == SLIDELIMIT_RESULT_OK);
  CHECK(bytes_eq(p, n, "ratelimit_local_denied_total"));
  CHECK(slidelimit_metric_help(5, &p, &n) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(slidelimit_metric_name(1, NULL, &n) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_metric_help(1, &p, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_metric_label_count(1, false, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_metric_label_count(9, false, &count) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(slidelimit_metric_label(1, false, 0, NULL, &n, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_metric_buckets(3, NULL, &n) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_metric_buckets(3, &b, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
}

/* The bucketed window: `buckets` NULL is core's default (60), a count (even
 * 0) reaches core as given, every bad count is invalid_argument on
 * `buckets`, and slidelimit_policy_buckets reports the effective count. */
static void test_bucketed(void) {
  uint8_t msg[256];
  size_t msg_len = 0;
  slidelimit_field field = STALE;
  slidelimit_policy *p = NULL;
  const uint32_t bw = SLIDELIMIT_ALGORITHM_BUCKETED_WINDOW;
  const uint64_t zero = 0, one = 1, three = 3, ten = 10, sixty = 60, too_many = 3601;
  uint64_t count = 0;

  /* A count for another algorithm is core's error, never ignored, 0 too. */
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), SLIDELIMIT_ALGORITHM_SLIDING_LOG, 3, 1000, &ten, &p, msg,
                              sizeof msg, &msg_len, &field) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(p == NULL);
  CHECK(starts_with(msg, msg_len, "buckets:"));
  CHECK(field_is(field, "buckets"));
  field = STALE;
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), SLIDELIMIT_ALGORITHM_SLIDING_COUNTER, 3, 1000, &one, &p, NULL,
                              0, NULL, &field) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(p == NULL && field_is(field, "buckets"));
  field = STALE;
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), SLIDELIMIT_ALGORITHM_SLIDING_LOG, 3, 1000, &zero, &p, NULL, 0,
                              NULL, &field) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(p == NULL && field_is(field, "buckets"));
  /* Not dividing the window; above the cap; the default not dividing it. */
  field = STALE;
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), bw, 3, 1000, &three, &p, msg, sizeof msg, &msg_len, &field) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(p == NULL && field_is(field, "buckets") && starts_with(msg, msg_len, "buckets:"));
  field = STALE;
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), bw, 3, 7200, &too_many, &p, NULL, 0, NULL, &field) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(p == NULL && field_is(field, "buckets"));
  field = STALE;
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), bw, 3, 1000, NULL, &p, NULL, 0, NULL, &field) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(p == NULL && field_is(field, "buckets"));
  /* &0 is a count of 0, core's error, even where the default would fit. */
  field = STALE;
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), bw, 3, 60000, &zero, &p, msg, sizeof msg, &msg_len, &field) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(p == NULL && field_is(field, "buckets") && starts_with(msg, msg_len, "buckets: must be at least 1"));
  /* Earlier fields are still checked first. */
  field = STALE;
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), bw, 0, 1000, &three, &p, NULL, 0, NULL, &field) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(p == NULL && field_is(field, "limit"));

  /* The getter: 0 for an algorithm without buckets; NULL pointers reported. */
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), SLIDELIMIT_ALGORITHM_SLIDING_COUNTER, 3, 1000, NULL, &p, NULL, 0,
                              NULL, NULL) == SLIDELIMIT_RESULT_OK);
  count = 99;
  CHECK(slidelimit_policy_buckets(p, &count) == SLIDELIMIT_RESULT_OK && count == 0);
  CHECK(slidelimit_policy_buckets(p, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  count = 99;
  CHECK(slidelimit_policy_buckets(NULL, &count) == SLIDELIMIT_RESULT_NULL_POINTER && count == 99);
  slidelimit_policy_free(p);
  p = NULL;

  uint8_t key[SLIDELIMIT_KEY_MAX];
  size_t len = 0;
  /* NULL and &60 are the same policy: core's default, in the key and the getter. */
  const uint64_t *given[] = {NULL, &sixty};
  for (size_t i = 0; i < 2; i++) {
    CHECK(slidelimit_policy_new(S("rl"), S("geo"), bw, 3, 60000, given[i], &p, NULL, 0, NULL, NULL) ==
          SLIDELIMIT_RESULT_OK);
    CHECK(slidelimit_policy_key(p, S("a}b"), key, sizeof key, &len, NULL, NULL, 0, NULL, NULL) ==
          SLIDELIMIT_RESULT_OK);
    CHECK(bytes_eq(key, len, "rl:{geo:a%7Db}:bucketed:60000:60"));
    count = 0;
    CHECK(slidelimit_policy_buckets(p, &count) == SLIDELIMIT_RESULT_OK && count == 60);
    slidelimit_policy_free(p);
    p = NULL;
  }

  /* A given count: in the key and as the fifth ARGV. */
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), bw, 3, 1000, &ten, &p, NULL, 0, NULL, NULL) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_policy_buckets(p, &count) == SLIDELIMIT_RESULT_OK && count == 10);
  uint8_t buf[SLIDELIMIT_CALL_BUF_MAX];
  size_t lens[SLIDELIMIT_CALL_PARTS_MAX];
  size_t keys = 0, parts = 0, used = 0;
  uint64_t now = 5000;
  CHECK(slidelimit_policy_build_call_into(p, S("t"), 1, &now, SLIDELIMIT_MODE_ACQUIRE, buf, sizeof buf, lens,
                                          SLIDELIMIT_CALL_PARTS_MAX, &keys, &parts, &used, NULL, 0, NULL,
                                          NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(keys == 1 && parts == 6);
  CHECK(bytes_eq(buf, lens[0], "rl:{geo:t}:bucketed:1000:10"));
  CHECK(bytes_eq(buf + used - lens[5], lens[5], "10"));
  CHECK(bytes_eq(buf + used - lens[5] - lens[4], lens[4], "5000"));

  /* The memory engine runs it: 3 per second, then denied. */
  slidelimit_memory *m = NULL;
  slidelimit_decision d;
  CHECK(slidelimit_memory_new(&m) == SLIDELIMIT_RESULT_OK);
  for (int i = 0; i < 3; i++) {
    CHECK(slidelimit_memory_acquire(m, p, S("t"), 1, &now, now, &d, NULL, 0, NULL, NULL) ==
          SLIDELIMIT_RESULT_OK);
    CHECK(d.allowed && d.remaining == (uint64_t)(2 - i));
  }
  CHECK(slidelimit_memory_acquire(m, p, S("t"), 1, &now, now, &d, NULL, 0, NULL, NULL) == SLIDELIMIT_RESULT_OK);
  /* Held to the bucket's last millisecond plus the window: 5099 + 1000. */
  CHECK(!d.allowed && d.retry_after_ms == 1099);
  slidelimit_memory_free(m);
  slidelimit_policy_free(p);
}

/* The deny cache's two makers: _new reads 0 as core's default, while
 * _with_capacity hands the capacity to core as given, so 0 is core's
 * invalid_argument on `deny_cache_capacity`, like one above the maximum. */
static void test_deny_cache_capacity(void) {
  slidelimit_deny_cache *c = NULL;
  uint8_t msg[128];
  size_t msg_len = 0;
  slidelimit_field field = STALE;
  CHECK(slidelimit_deny_cache_new(0, &c, msg, sizeof msg, &msg_len, &field) == SLIDELIMIT_RESULT_OK);
  CHECK(c != NULL);
  slidelimit_deny_cache_free(c);
  c = NULL;
  CHECK(slidelimit_deny_cache_with_capacity(0, &c, msg, sizeof msg, &msg_len, &field) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(c == NULL && field_is(field, "deny_cache_capacity"));
  CHECK(starts_with(msg, msg_len, "deny_cache_capacity: must be at least 1"));
  field = STALE;
  CHECK(slidelimit_deny_cache_with_capacity((size_t)1 << 25, &c, msg, sizeof msg, &msg_len, &field) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(c == NULL && field_is(field, "deny_cache_capacity"));
  CHECK(slidelimit_deny_cache_with_capacity(1, &c, msg, sizeof msg, &msg_len, &field) == SLIDELIMIT_RESULT_OK);
  size_t len = 99;
  CHECK(c != NULL && slidelimit_deny_cache_len(c, &len) == SLIDELIMIT_RESULT_OK && len == 0);
  slidelimit_deny_cache_free(c);
  CHECK(slidelimit_deny_cache_with_capacity(1, NULL, msg, sizeof msg, &msg_len, &field) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
}

/* A reset through one limiter's cache reaches every cache of the process;
 * slidelimit_deny_caches_forget_tenant does it without a cache at hand; a
 * denial in flight across a reset is not cached. */
static void test_deny_cache_reset_reaches_every_cache(void) {
  slidelimit_deny_cache *a = NULL, *b = NULL;
  uint8_t msg[128];
  size_t msg_len = 0;
  slidelimit_field field = STALE;
  const uint8_t *t = (const uint8_t *)"ffi-reset-t";
  const size_t t_len = strlen("ffi-reset-t");
  bool hit = false;
  slidelimit_decision d;
  CHECK(slidelimit_deny_cache_new(0, &a, msg, sizeof msg, &msg_len, &field) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_deny_cache_new(0, &b, msg, sizeof msg, &msg_len, &field) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_deny_cache_record(a, t, t_len, 1, false, 0, 500, 500, 1000, 1, 0) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_deny_cache_record(b, t, t_len, 1, false, 0, 500, 500, 1000, 1, 0) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_deny_cache_check(b, t, t_len, 1, 10, &hit, &d) == SLIDELIMIT_RESULT_OK && hit);
  CHECK(slidelimit_deny_cache_forget(a, t, t_len) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_deny_cache_check(b, t, t_len, 1, 20, &hit, &d) == SLIDELIMIT_RESULT_OK && !hit);
  CHECK(slidelimit_deny_cache_record(b, t, t_len, 1, false, 0, 500, 500, 1030, 1, 30) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_deny_cache_check(b, t, t_len, 1, 40, &hit, &d) == SLIDELIMIT_RESULT_OK && hit);
  CHECK(slidelimit_deny_caches_forget_tenant(t, t_len) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_deny_cache_check(b, t, t_len, 1, 50, &hit, &d) == SLIDELIMIT_RESULT_OK && !hit);
  CHECK(slidelimit_deny_caches_forget_tenant(NULL, 1) == SLIDELIMIT_RESULT_NULL_POINTER);
  /* Checked (and sent) at 100, then a reset while in flight: Redis may have
   * run it before the DEL, so its denial is not cached; one checked after
   * the reset is. */
  const uint8_t *u = (const uint8_t *)"ffi-inflight-t";
  const size_t u_len = strlen("ffi-inflight-t");
  CHECK(slidelimit_deny_cache_check(b, u, u_len, 1, 100, &hit, &d) == SLIDELIMIT_RESULT_OK && !hit);
  CHECK(slidelimit_deny_caches_forget_tenant(u, u_len) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_deny_cache_record(b, u, u_len, 1, false, 0, 500, 500, 1100, 1, 100) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_deny_cache_check(b, u, u_len, 1, 101, &hit, &d) == SLIDELIMIT_RESULT_OK && !hit);
  CHECK(slidelimit_deny_cache_record(b, u, u_len, 1, false, 0, 500, 500, 1101, 1, 101) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_deny_cache_check(b, u, u_len, 1, 102, &hit, &d) == SLIDELIMIT_RESULT_OK && hit);
  slidelimit_deny_cache_free(a);
  slidelimit_deny_cache_free(b);
}

int main(void) {
  slidelimit_policy *p = NULL;
  test_names();
  test_policy(&p);
  test_keys(p);
  test_scripts();
  test_calls(p);
  test_build_into(p);
  test_replies();
  test_server_error_map();
  test_memory(p);
  test_timeout();
  test_cost();
  test_metrics();
  test_bucketed();
  test_deny_cache_capacity();
  test_deny_cache_reset_reaches_every_cache();
  slidelimit_policy_free(p);
  printf("ffi_test: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
