package etcdserver_test

import (
	"context"
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
