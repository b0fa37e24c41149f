package slidelimit_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slidelimit/slidelimit/go"
	"github.com/slidelimit/slidelimit/go/internal/testredis"
)

// A real three-node Cluster through go-redis's ClusterClient, used as a
// UniversalClient: the keys of many tenants land on every node, decisions
// match the memory engine, and a flushed script cache on every node is
// refilled through the NOSCRIPT fallback on the node that owns the key.
func TestCluster(t *testing.T) {
	addrs := testredis.Cluster(t, 3)
	var client redis.UniversalClient = redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs, IsClusterMode: true})
	defer client.Close()
	if _, ok := client.(*redis.ClusterClient); !ok {
		t.Fatalf("expected a ClusterClient, got %T", client)
	}
	for _, alg := range []slidelimit.Algorithm{slidelimit.SlidingLog, slidelimit.SlidingCounter} {
		p := testPolicy(t, alg, 3, 1000)
		onCluster := newRedisLimiter(t, client, p)
		inMemory := newMemoryLimiter(t, p)
		slots := map[uint16]bool{}
		for i := 0; i < 60; i++ {
			tenant := fmt.Sprintf("tenant-%d", i%20)
			key, err := onCluster.Key(tenant)
			if err != nil {
				t.Fatal(err)
			}
			slot, _ := slidelimit.KeySlot(key)
			slots[slot/5462] = true // which third of the slots, so which node
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
		if len(slots) != 3 {
			t.Fatalf("tenants should spread over the three nodes, got %v", slots)
		}
	}

	cluster := client.(*redis.ClusterClient)
	err := cluster.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
		return node.ScriptFlush(ctx).Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	l := newRedisLimiter(t, client, testPolicy(t, slidelimit.SlidingLog, 5, 1000))
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
	// Every key the test wrote on any node expires by itself.
	if err := cluster.ForEachMaster(context.Background(), testredis.KeysExpire); err != nil {
		t.Fatal(err)
	}
}
