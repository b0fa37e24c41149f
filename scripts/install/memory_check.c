/* The C install test (scripts/install/c.sh): built against dist/c with
 * pkg-config only. Three acquires on the memory engine, limit 2 per 1000 ms
 * (sliding log) at 1000, 1001 and 1002 ms; prints the version and the
 * decisions on one line for the script to compare. */
#include <slidelimit.h>
#include <stdio.h>
#include <string.h>

#define S(lit) (const uint8_t *)(lit), (sizeof(lit) - 1)

int main(void) {
  slidelimit_policy *policy = NULL;
  slidelimit_memory *memory = NULL;
  uint8_t msg[256];
  size_t msg_len = 0;
  slidelimit_result rc = slidelimit_policy_new(S("rl"), S("install"), SLIDELIMIT_ALGORITHM_SLIDING_LOG, 2,
                                               1000, NULL, &policy, msg, sizeof msg, &msg_len, NULL);
  if (rc != SLIDELIMIT_RESULT_OK) {
    fprintf(stderr, "slidelimit_policy_new: %s: %s\n", slidelimit_result_name(rc), (const char *)msg);
    return 1;
  }
  if (slidelimit_memory_new(&memory) != SLIDELIMIT_RESULT_OK) return 1;
  printf("slidelimit %s:", slidelimit_version());
  for (uint64_t now = 1000; now <= 1002; now++) {
    slidelimit_decision d;
    rc = slidelimit_memory_acquire(memory, policy, S("tenant"), 1, &now, now, &d, msg, sizeof msg, &msg_len,
                                   NULL);
    if (rc != SLIDELIMIT_RESULT_OK) {
      fprintf(stderr, "slidelimit_memory_acquire: %s: %s\n", slidelimit_result_name(rc), (const char *)msg);
      return 1;
    }
    printf(" %s(remaining=%llu retry_after_ms=%llu)", d.allowed ? "allowed" : "denied",
           (unsigned long long)d.remaining, (unsigned long long)d.retry_after_ms);
  }
  printf("\n");
  slidelimit_memory_free(memory);
  slidelimit_policy_free(policy);
  return 0;
}
