package etcdserver_test

import (
	"context"
	"crypto/tls"
	"net/url"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/corral-go/corral/internal/testing/etcdserver"
)

// No goroutine of etcd's outlives a stopped server, so nothing is ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestSingleMemberRestart(t *testing.T) {
	c := etcdserver.Start(t, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cli := c.Client(t)
	if _, err := cli.Put(ctx, "/k", "v"); err != nil {
		t.Fatal(err)
	}
	m := c.Members[0]
	m.Kill()
	if m.Running() {
		t.Fatal("Running after Kill")
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := cli.Get(short, "/k")
	cancelShort()
	if err == nil {
		t.Fatal("Get on a killed member succeeded")
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "/k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("Get after restart = %v, %v; want v", resp, err)
	}
	m.Stop()
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Get(ctx, "/k"); err != nil {
		t.Fatalf("Get after stop and restart = %v", err)
	}
}

func TestClusterSurvivesKill(t *testing.T) {
	c := etcdserver.Start(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	leader := c.Leader()
	if leader == nil {
		t.Fatal("no leader")
	}
	leader.Kill()
	cli := c.Client(t)
	// A request proposed to the dead leader times out after etcd's request
	// timeout (7 s); short attempts retry once a new leader is elected.
	for {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Put(actx, "/after-kill", "v")
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("Put with one member killed = %v", err)
		}
	}
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/leased", "v", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	if err := c.RevokeLease(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	if resp, err := cli.Get(ctx, "/leased"); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("Get after RevokeLease = %v, %v; want no key", resp, err)
	}
	if err := leader.Restart(); err != nil {
		t.Fatal(err)
	}
	one := c.Client(t, leader.ClientURL)
	if _, err := one.Get(ctx, "/after-kill"); err != nil {
		t.Fatalf("Get from the restarted member = %v", err)
	}
}

// TestPartition checks that a partitioned member is cut off both ways, raft
// and the lease renewals it forwards to its leader alike, while its clients
// still reach it, and that it catches up once healed.
func TestPartition(t *testing.T) {
	c := etcdserver.Start(t, 3, etcdserver.WithPartitions())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	leader := c.Leader()
	if leader == nil {
		t.Fatal("no leader")
	}
	f := (slices.Index(c.Members, leader) + 1) % len(c.Members)
	m := c.Members[f]
	isolated := c.Client(t, m.ClientURL)
	others := c.Client(t, leader.ClientURL)
	lease, err := isolated.Grant(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Partition(f); err != nil {
		t.Fatal(err)
	}
	if _, err := others.Put(ctx, "/during", "v"); err != nil {
		t.Fatalf("Put on the majority side = %v", err)
	}
	// Nothing but the partition ends the member's idea of its leader.
	waitFor(ctx, t, "the member to lose its leader", func() bool { return m.Leader() == 0 })
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	_, err = isolated.KeepAliveOnce(short, lease.ID)
	cancelShort()
	if err == nil {
		t.Fatal("a lease renewed through the partitioned member")
	}
	waitFor(ctx, t, "the leader to expire the lease", func() bool {
		r, err := others.TimeToLive(ctx, lease.ID)
		return err == nil && r.TTL == -1
	})
	if r, err := isolated.Get(ctx, "/during", clientv3.WithSerializable()); err != nil || len(r.Kvs) != 0 {
		t.Fatalf("serializable Get on the partitioned member = %v, %v; want no key", r, err)
	}
	if err := c.Heal(f); err != nil {
		t.Fatal(err)
	}
	if r, err := isolated.Get(ctx, "/during"); err != nil || len(r.Kvs) != 1 {
		t.Fatalf("Get on the healed member = %v, %v; want the key put during the partition", r, err)
	}
	for _, i := range []int{-1, len(c.Members)} {
		if err := c.Partition(i); err == nil {
			t.Errorf("Partition(%d) = nil; want an error", i)
		}
	}
}

// TestPartitionRefusesStrangers checks that a member's peer proxy closes a
// connection whose ClientHello names no member, and that a cluster started
// without WithPartitions refuses to partition.
func TestPartitionRefusesStrangers(t *testing.T) {
	c := etcdserver.Start(t, 1, etcdserver.WithPartitions())
	u, err := url.Parse(c.Members[0].PeerURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{ServerName: "stranger.test", InsecureSkipVerify: true})
	if err == nil {
		conn.Close()
		t.Fatal("a stranger's TLS handshake through the peer proxy succeeded")
	}
	plain := etcdserver.Start(t, 1)
	if err := plain.Partition(0); err == nil {
		t.Fatal("Partition on a cluster started without WithPartitions = nil; want an error")
	}
}

// waitFor polls cond until it holds, bounded by ctx: the states it waits
// for have no event to wait on.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-poll.C:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}
