package slidelimit_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slidelimit/slidelimit/go"
	"github.com/slidelimit/slidelimit/go/internal/testredis"
)

// The six-node Cluster of `make test-go` (three masters, three replicas)
// through go-redis's ClusterClient, used as a UniversalClient: the keys of
// many tenants land on every master, decisions match the memory engine, and a
// flushed script cache on every node is refilled through the NOSCRIPT
// fallback on the node that owns the key. Other tests share the Cluster, so
// every key here lives under a namespace of this run's own.
func TestCluster(t *testing.T) {
	addrs := testredis.ClusterAddrs(t)
	ns := testredis.UniqueNamespace("rl-go-cl")
	policy := func(alg slidelimit.Algorithm, limit, window uint64) slidelimit.Policy {
		p := testPolicy(t, alg, limit, window)
		p.Namespace = ns
		return p
	}
	var client redis.UniversalClient = redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs, IsClusterMode: true})
	defer client.Close()
	cluster, ok := client.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("expected a ClusterClient, got %T", client)
	}
	masterOf := slotMasters(t, cluster)
	for _, alg := range []slidelimit.Algorithm{slidelimit.SlidingLog, slidelimit.SlidingCounter} {
		p := policy(alg, 3, 1000)
		onCluster := newRedisLimiter(t, client, p)
		inMemory := newMemoryLimiter(t, p)
		masters := map[string]bool{}
		for i := 0; i < 60; i++ {
			tenant := fmt.Sprintf("tenant-%d", i%20)
			key, err := onCluster.Key(tenant)
			if err != nil {
				t.Fatal(err)
			}
			slot, _ := slidelimit.KeySlot(key)
			masters[masterOf[slot]] = true
			now := uint64(10_000 + i*100)
			got, err := onCluster.AcquireAt(context.Background(), tenant, 1, now)
			if err != nil {
				t.Fatal(err)
			}
			want, err := inMemory.AcquireAt(context.Background(), tenant, 1, now)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("%s step %d: cluster %+v, memory %+v", alg, i, got, want)
			}
		}
		if len(masters) != 3 {
			t.Fatalf("tenants should spread over the three masters, got %v", masters)
		}
	}

	// Replicas too: one of them may be promoted later and must not matter.
	err := cluster.ForEachShard(context.Background(), func(ctx context.Context, node *redis.Client) error {
		return node.ScriptFlush(ctx).Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	l := newRedisLimiter(t, client, policy(slidelimit.SlidingLog, 5, 1000))
	for i := 0; i < 20; i++ {
		d, err := l.AcquireAt(context.Background(), fmt.Sprintf("after-flush-%d", i), 1, 50_000)
		if err != nil || !d.Allowed || d.Remaining != 4 {
			t.Fatalf("%+v %v", d, err)
		}
	}
	// Server time works on every node too.
	if d, err := l.Acquire(context.Background(), "server-time"); err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	// Every key on any master (this test's and others') expires by itself.
	if err := cluster.ForEachMaster(context.Background(), testredis.KeysExpire); err != nil {
		t.Fatal(err)
	}
}

// slotMasters maps every slot to the address of the master serving it, as
// the Cluster itself reports (CLUSTER SLOTS lists the master first).
func slotMasters(t *testing.T, cluster *redis.ClusterClient) map[uint16]string {
	t.Helper()
	ranges, err := cluster.ClusterSlots(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	owners := map[uint16]string{}
	for _, r := range ranges {
		for slot := r.Start; slot <= r.End; slot++ {
			owners[uint16(slot)] = r.Nodes[0].Addr
		}
	}
	if len(owners) != 16384 {
		t.Fatalf("CLUSTER SLOTS covers %d of 16384 slots", len(owners))
	}
	return owners
}
