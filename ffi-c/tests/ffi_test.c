/*
 * Exercises every function of the slidelimit C ABI, with good input, NULL
 * pointers, zero lengths and invalid values. `make test-ffi` runs it under
 * valgrind (--leak-check=full --error-exitcode=1), so a leak or an invalid
 * read fails the build as surely as a wrong answer.
 */
#include "slidelimit.h"

#include <stdio.h>
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

static void test_names(void) {
  CHECK(strlen(slidelimit_version()) > 0);
  CHECK(strcmp(slidelimit_result_name(SLIDELIMIT_RESULT_OK), "ok") == 0);
  CHECK(strcmp(slidelimit_result_name(SLIDELIMIT_RESULT_INVALID_ARGUMENT), "invalid_argument") == 0);
  CHECK(strcmp(slidelimit_result_name(SLIDELIMIT_RESULT_UNAVAILABLE), "unavailable") == 0);
  CHECK(strcmp(slidelimit_result_name(SLIDELIMIT_RESULT_INTERNAL), "internal") == 0);
  CHECK(strcmp(slidelimit_result_name(SLIDELIMIT_RESULT_NULL_POINTER), "null_pointer") == 0);
  CHECK(strcmp(slidelimit_result_name(SLIDELIMIT_RESULT_BUFFER_TOO_SMALL), "buffer_too_small") == 0);
  CHECK(strcmp(slidelimit_result_name(8), "unknown") == 0);
  CHECK(strcmp(slidelimit_result_name(0xFFFFFFFFu), "unknown") == 0);

  uint32_t alg = 0;
  CHECK(slidelimit_algorithm_parse(S("sliding_counter"), &alg, NULL, 0, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(alg == SLIDELIMIT_ALGORITHM_SLIDING_COUNTER);
  uint8_t msg[128];
  size_t msg_len = 0;
  alg = 42;
  CHECK(slidelimit_algorithm_parse(S("fixed"), &alg, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(alg == 42); /* untouched on failure */
  CHECK(starts_with(msg, msg_len, "algorithm:"));
  CHECK(msg[msg_len] == 0);
  CHECK(slidelimit_algorithm_parse(NULL, 0, &alg, NULL, 0, NULL) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(slidelimit_algorithm_parse(NULL, 3, &alg, NULL, 0, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_algorithm_parse(S("sliding_log"), NULL, NULL, 0, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
}

static void test_policy(slidelimit_policy **out) {
  uint8_t msg[256];
  size_t msg_len = 0;
  slidelimit_policy *p = NULL;

  /* Each invalid field is named in the message; the out-param stays NULL. */
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), 1, 0, 1000, &p, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(p == NULL);
  CHECK(starts_with(msg, msg_len, "limit:"));
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), 1, 1, 0, &p, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "window_ms:"));
  CHECK(slidelimit_policy_new(NULL, 0, S("geo"), 1, 1, 1, &p, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "namespace:"));
  CHECK(slidelimit_policy_new(S("rl"), S("ge:o"), 1, 1, 1, &p, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "resource:"));
  CHECK(slidelimit_policy_new(S("rl"), S("\xff"), 1, 1, 1, &p, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "resource: is not valid UTF-8"));
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), 9, 1, 1, &p, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "algorithm:"));
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), 1, UINT64_MAX, 2, &p, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "limit:"));
  CHECK(slidelimit_policy_new(NULL, 2, S("geo"), 1, 1, 1, &p, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(starts_with(msg, msg_len, "namespace:"));
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), 1, 1, 1, NULL, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(p == NULL);

  /* A message buffer that is too small is cut, NUL-terminated; none at all is fine. */
  uint8_t tiny[6];
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), 1, 0, 1, &p, tiny, sizeof tiny, &msg_len) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(msg_len == 5 && memcmp(tiny, "limit", 5) == 0 && tiny[5] == 0);
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), 1, 0, 1, &p, NULL, 0, NULL) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(slidelimit_policy_new(S("rl"), S("geo"), 1, 0, 1, &p, msg, 0, &msg_len) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(msg_len == 0);

  CHECK(slidelimit_policy_new(S("rl"), S("geocode"), SLIDELIMIT_ALGORITHM_SLIDING_LOG, 3, 1000, &p,
                              NULL, 0, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(p != NULL);
  slidelimit_policy_free(NULL);
  *out = p;
}

static void test_keys(const slidelimit_policy *p) {
  uint8_t key[SLIDELIMIT_KEY_MAX];
  uint8_t msg[256];
  size_t len = 0, msg_len = 0;
  uint16_t slot = 0xFFFF;

  CHECK(slidelimit_policy_key(p, S("a}b"), key, sizeof key, &len, &slot, NULL, 0, NULL) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(bytes_eq(key, len, "rl:{geocode:a%7Db}:log:1000"));
  uint16_t again = 0;
  CHECK(slidelimit_key_slot(key, len, &again) == SLIDELIMIT_RESULT_OK);
  CHECK(slot == again && slot < 16384);
  /* The slot is optional. */
  CHECK(slidelimit_policy_key(p, S("t"), key, sizeof key, &len, NULL, NULL, 0, NULL) ==
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
                              &msg_len) == SLIDELIMIT_RESULT_BUFFER_TOO_SMALL);
  CHECK(len == 77 && small[0] == 'x');
  CHECK(starts_with(msg, msg_len, "buf: the key needs 23 bytes"));
  CHECK(slidelimit_policy_key(p, S("t"), NULL, 0, &len, NULL, NULL, 0, NULL) ==
        SLIDELIMIT_RESULT_BUFFER_TOO_SMALL);
  CHECK(slidelimit_policy_key(p, S("t"), NULL, 64, &len, NULL, NULL, 0, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);

  /* Bad tenants. */
  CHECK(slidelimit_policy_key(p, NULL, 0, key, sizeof key, &len, NULL, msg, sizeof msg,
                              &msg_len) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "tenant: must not be empty"));
  CHECK(slidelimit_policy_key(p, S("\xff\xfe"), key, sizeof key, &len, NULL, msg, sizeof msg,
                              &msg_len) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "tenant: is not valid UTF-8"));
  static uint8_t big[513];
  memset(big, 'x', sizeof big);
  CHECK(slidelimit_policy_key(p, big, sizeof big, key, sizeof key, &len, NULL, msg, sizeof msg,
                              &msg_len) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(slidelimit_policy_key(p, big, 512, key, sizeof key, &len, NULL, NULL, 0, NULL) ==
        SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_policy_key(p, NULL, 3, key, sizeof key, &len, NULL, NULL, 0, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_policy_key(NULL, S("t"), key, sizeof key, &len, NULL, msg, sizeof msg,
                              &msg_len) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(starts_with(msg, msg_len, "policy: must not be NULL"));
  CHECK(slidelimit_policy_key(p, S("t"), key, sizeof key, NULL, NULL, NULL, 0, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
}

static void test_scripts(void) {
  const uint8_t *text = NULL, *sha = NULL, *sha_peek = NULL;
  size_t text_len = 0, sha_len = 0, peek_len = 0;
  for (uint32_t a = 1; a <= 2; a++) {
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
  CHECK(slidelimit_script_sha1(3, 1, &sha, &sha_len) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
}

static void test_calls(const slidelimit_policy *p) {
  uint8_t msg[256];
  size_t msg_len = 0, n = 0, len = 0;
  const uint8_t *ptr = NULL;
  slidelimit_call *call = NULL;
  uint64_t now = 100000000000000ULL;

  CHECK(slidelimit_policy_build_call(p, S("tenant-17"), 2, &now, SLIDELIMIT_MODE_ACQUIRE, &call,
                                     NULL, 0, NULL) == SLIDELIMIT_RESULT_OK);
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
                                     NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(slidelimit_call_arg(call, 3, &ptr, &len) == SLIDELIMIT_RESULT_OK && len == 0);
  CHECK(slidelimit_call_info(call, &slot, &ro) == SLIDELIMIT_RESULT_OK && ro);
  slidelimit_call_free(call);

  /* Invalid cost, time, tenant, mode; NULLs. */
  call = NULL;
  CHECK(slidelimit_policy_build_call(p, S("t"), 4, NULL, 1, &call, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "cost:"));
  CHECK(slidelimit_policy_build_call(p, S("t"), 0, NULL, 1, &call, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "cost:"));
  uint64_t too_late = (1ULL << 52) + 1;
  CHECK(slidelimit_policy_build_call(p, S("t"), 1, &too_late, 1, &call, msg, sizeof msg,
                                     &msg_len) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "now_ms:"));
  CHECK(slidelimit_policy_build_call(p, NULL, 0, 1, NULL, 1, &call, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "tenant:"));
  CHECK(slidelimit_policy_build_call(p, S("t"), 1, NULL, 0, &call, msg, sizeof msg, &msg_len) ==
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
                                       sizeof msg, &msg_len) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
    CHECK(starts_with(msg, msg_len, "tenant: is not valid UTF-8"));
    CHECK(call == NULL);
  }
  CHECK(slidelimit_policy_build_call(NULL, S("t"), 1, NULL, 1, &call, NULL, 0, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_policy_build_call(p, S("t"), 1, NULL, 1, NULL, NULL, 0, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(call == NULL);
}

static void test_replies(void) {
  slidelimit_decision d;
  uint8_t msg[256];
  size_t msg_len = 0;
  const int64_t allowed[5] = {1, 2, 0, 1000, 5000};
  CHECK(slidelimit_decision_from_reply(allowed, 5, &d, NULL, 0, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(d.allowed && d.remaining == 2 && d.retry_after_ms == 0 && d.reset_after_ms == 1000 &&
        d.now_ms == 5000);
  const int64_t denied[5] = {0, 0, 250, 900, 5000};
  CHECK(slidelimit_decision_from_reply(denied, 5, &d, NULL, 0, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(!d.allowed && d.retry_after_ms == 250);

  memset(&d, 0x5A, sizeof d);
  slidelimit_decision before = d;
  const int64_t bad_allowed[5] = {2, 0, 0, 0, 0};
  const int64_t negative[5] = {1, -1, 0, 0, 0};
  const int64_t zero_retry[5] = {0, 0, 0, 0, 0};
  CHECK(slidelimit_decision_from_reply(bad_allowed, 5, &d, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_MALFORMED_REPLY);
  CHECK(starts_with(msg, msg_len, "script reply has allowed = 2"));
  CHECK(slidelimit_decision_from_reply(negative, 5, &d, NULL, 0, NULL) ==
        SLIDELIMIT_RESULT_MALFORMED_REPLY);
  CHECK(slidelimit_decision_from_reply(zero_retry, 5, &d, NULL, 0, NULL) ==
        SLIDELIMIT_RESULT_MALFORMED_REPLY);
  CHECK(slidelimit_decision_from_reply(allowed, 4, &d, NULL, 0, NULL) ==
        SLIDELIMIT_RESULT_MALFORMED_REPLY);
  CHECK(slidelimit_decision_from_reply(NULL, 0, &d, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_MALFORMED_REPLY);
  CHECK(starts_with(msg, msg_len, "script reply has 0 elements"));
  CHECK(memcmp(&d, &before, sizeof d) == 0); /* out-param untouched on failure */
  CHECK(slidelimit_decision_from_reply(NULL, 5, &d, NULL, 0, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_decision_from_reply(allowed, 5, NULL, NULL, 0, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);

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

static void test_memory(const slidelimit_policy *p) {
  slidelimit_memory *m = NULL;
  slidelimit_decision d;
  uint8_t msg[256];
  size_t msg_len = 0, count = 99;
  bool removed = false;

  CHECK(slidelimit_memory_new(NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_memory_new(&m) == SLIDELIMIT_RESULT_OK && m != NULL);
  CHECK(slidelimit_memory_key_count(m, &count) == SLIDELIMIT_RESULT_OK && count == 0);

  /* The contract's first example: limit 3 per 1000 ms. */
  CHECK(slidelimit_memory_acquire(m, p, S("t-1"), 1, 1000, &d, NULL, 0, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(d.allowed && d.remaining == 2 && d.retry_after_ms == 0 && d.reset_after_ms == 1000 &&
        d.now_ms == 1000);
  CHECK(slidelimit_memory_acquire(m, p, S("t-1"), 2, 1100, &d, NULL, 0, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(d.allowed && d.remaining == 0);
  CHECK(slidelimit_memory_peek(m, p, S("t-1"), 1, 1200, &d, NULL, 0, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(!d.allowed && d.retry_after_ms == 800);
  CHECK(slidelimit_memory_acquire(m, p, S("t-1"), 1, 1200, &d, NULL, 0, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(!d.allowed && d.retry_after_ms == 800 && d.reset_after_ms == 900);
  CHECK(slidelimit_memory_acquire(m, p, S("t-1"), 1, 2000, &d, NULL, 0, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(d.allowed && d.remaining == 0);
  CHECK(slidelimit_memory_key_count(m, &count) == SLIDELIMIT_RESULT_OK && count == 1);

  CHECK(slidelimit_memory_acquire(m, p, S("t-1"), 4, 2000, &d, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "cost:"));
  CHECK(slidelimit_memory_peek(m, p, NULL, 0, 1, 2000, &d, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "tenant:"));
  CHECK(slidelimit_memory_acquire(NULL, p, S("t"), 1, 0, &d, NULL, 0, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_memory_acquire(m, NULL, S("t"), 1, 0, &d, NULL, 0, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_memory_peek(m, p, S("t"), 1, 0, NULL, NULL, 0, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_memory_acquire(m, p, S("t"), 1, (1ULL << 52) + 1, &d, msg, sizeof msg,
                                  &msg_len) == SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "now_ms:"));
  /* Invalid UTF-8 tenants record nothing, in any call. */
  CHECK(slidelimit_memory_acquire(m, p, S("t\xff"), 1, 2000, &d, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "tenant: is not valid UTF-8"));
  CHECK(slidelimit_memory_peek(m, p, S("\xed\xa0\x80"), 1, 2000, &d, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "tenant: is not valid UTF-8"));
  CHECK(slidelimit_memory_reset(m, p, S("\xc0\xaf"), &removed, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(starts_with(msg, msg_len, "tenant: is not valid UTF-8"));
  CHECK(slidelimit_memory_key_count(m, &count) == SLIDELIMIT_RESULT_OK && count == 1);

  CHECK(slidelimit_memory_reset(m, p, S("t-1"), &removed, NULL, 0, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(removed);
  CHECK(slidelimit_memory_reset(m, p, S("t-1"), &removed, NULL, 0, NULL) == SLIDELIMIT_RESULT_OK);
  CHECK(!removed);
  CHECK(slidelimit_memory_reset(m, p, NULL, 0, &removed, msg, sizeof msg, &msg_len) ==
        SLIDELIMIT_RESULT_INVALID_ARGUMENT);
  CHECK(slidelimit_memory_reset(m, p, S("t"), NULL, NULL, 0, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_memory_reset(NULL, p, S("t"), &removed, NULL, 0, NULL) ==
        SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_memory_key_count(NULL, &count) == SLIDELIMIT_RESULT_NULL_POINTER);
  CHECK(slidelimit_memory_key_count(m, NULL) == SLIDELIMIT_RESULT_NULL_POINTER);
  slidelimit_memory_free(m);
  slidelimit_memory_free(NULL);
}

int main(void) {
  slidelimit_policy *p = NULL;
  test_names();
  test_policy(&p);
  test_keys(p);
  test_scripts();
  test_calls(p);
  test_replies();
  test_memory(p);
  slidelimit_policy_free(p);
  printf("ffi_test: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
