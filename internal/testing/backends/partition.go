package backends

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/internal/testing/zkbackend"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/zkstore"
)

// The ZooKeeper configuration of PartitionRace, the issue's own: a follower
// cut off from its leader answers its clients for PartitionSyncLimit ×
// PartitionTick (5 s), well past the holders' PartitionSession. On etcd
// PartitionSession is the holders' lease TTL (etcd's least at its default
// election timeout).
const (
	PartitionTick      = 500 * time.Millisecond
	PartitionSyncLimit = 10
	PartitionSession   = 2 * time.Second
)

// PartitionRuns is how many holders PartitionRace races at once: 10, or
// the environment variable CORRAL_PARTITION_RUNS.
func PartitionRuns(t testing.TB) int {
	if s := os.Getenv("CORRAL_PARTITION_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("CORRAL_PARTITION_RUNS=%q: want a positive number", s)
		}
		return n
	}
	return 10
}

// Partitioner sets a 3-member cluster up for one PartitionRace: it picks a
// follower to cut off, and returns backends for sessions on it alone and
// on the others, with the means to cut it off and to heal it.
type Partitioner func(t testing.TB) PartitionTarget

// PartitionTarget is a follower of a cluster that PartitionRace cuts off.
type PartitionTarget struct {
	// Holders opens sessions of PartitionSession on the follower alone,
	// Others sessions on the other members.
	Holders, Others storetest.Backend
	// Partition cuts the follower off from the other members.
	Partition func() error
	// Heal ends the partition and returns once the follower serves again.
	Heal func(t testing.TB)
}

// PartitionZK starts a 3-member ZooKeeper ensemble whose members reach
// each other through proxies, so that PartitionRace can cut one off.
func PartitionZK(t testing.TB) Partitioner {
	t.Helper()
	e := zkserver.EnsembleForTest(t, 3, zkserver.Config{
		TickTime: PartitionTick, SyncLimit: PartitionSyncLimit, QuorumProxies: true,
	})
	return func(t testing.TB) PartitionTarget {
		t.Helper()
		leader, err := e.Leader()
		if err != nil {
			t.Fatal(err)
		}
		f := (leader + 1) % len(e.Members)
		return PartitionTarget{
			Holders:   zkbackend.New([]string{e.Members[f].Addr()}, zkstore.WithSessionTimeout(PartitionSession)),
			Others:    zkbackend.New(slices.Delete(e.Addrs(), f, f+1)),
			Partition: func() error { return e.Partition(f) },
			Heal:      func(t testing.TB) { healZK(t, e, f) },
		}
	}
}

// PartitionEtcd starts a 3-member etcd cluster whose members can be cut
// off from each other (etcdserver.WithPartitions).
func PartitionEtcd(t testing.TB) Partitioner {
	t.Helper()
	c := etcdserver.Start(t, 3, etcdserver.WithPartitions())
	return func(t testing.TB) PartitionTarget {
		t.Helper()
		leader := c.Leader()
		if leader == nil {
			t.Fatal("backends: the etcd cluster has no leader")
		}
		f := (slices.Index(c.Members, leader) + 1) % len(c.Members)
		return PartitionTarget{
			Holders:   etcdbackend.NewOn(c, c.Members[f:f+1], etcdstore.WithTTL(PartitionSession)),
			Others:    etcdbackend.NewOn(c, slices.Delete(slices.Clone(c.Members), f, f+1)),
			Partition: func() error { return c.Partition(f) },
			Heal:      func(t testing.TB) { healEtcd(t, c, f) },
		}
	}
}

// PartitionRace is ExpiryRace with the fault the session's own connection
// cannot see: runs holders, each with a session of PartitionSession on a
// follower alone, take h's hold on paths of their own, a contender in a
// session on the other members queues behind each, and the follower is
// partitioned from the other two members. A ZooKeeper follower answers the
// holders for syncLimit × tickTime, long after the leader has expired
// their sessions and granted their holds to the contenders; an etcd one
// answers them too, but cannot renew their leases. It returns, per
// holder, by how much its hold's context was cancelled before the next
// grant (negative: two live holders at once), and heals the partition,
// returning once the follower serves again.
func PartitionRace(t testing.TB, target PartitionTarget, runs int, h func(p string) Handover) []time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), WaitTimeout)
	defer cancel()
	hb, nb := target.Holders, target.Others
	type race struct {
		held        context.Context
		lost, grant chan time.Time
		err         chan error
	}
	races := make([]race, runs)
	for i := range races {
		p := fmt.Sprintf("/partition/%s/%d", t.Name(), i)
		hst, nst := hb.Open(t), nb.Open(t)
		hh := h(p)
		held, err := hh.Hold(ctx, hst)
		if err != nil {
			t.Fatalf("hold %s: %v", p, err)
		}
		r := race{held, make(chan time.Time, 1), make(chan time.Time, 1), make(chan error, 1)}
		go func() {
			select {
			case <-held.Done():
				r.lost <- time.Now()
			case <-ctx.Done():
			}
		}()
		go func() {
			err := hh.Next(ctx, nst)
			r.grant <- time.Now()
			r.err <- err
		}()
		hh.Queued(t, nst)
		races[i] = r
	}
	// Age the sessions past their first timeout, so that their clocks run
	// on what they learn while they live rather than on the connect
	// responses that began them.
	age := time.NewTimer(PartitionSession)
	defer age.Stop()
	select {
	case <-age.C:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if err := target.Partition(); err != nil {
		t.Fatal(err)
	}
	parted := time.Now()
	defer target.Heal(t)
	margins := make([]time.Duration, runs)
	for i, r := range races {
		var lost, granted time.Time
		for lost.IsZero() || granted.IsZero() {
			select {
			case lost = <-r.lost:
			case granted = <-r.grant:
				if err := <-r.err; err != nil {
					t.Fatalf("run %d: next contender: %v", i, err)
				}
			case <-ctx.Done():
				t.Fatalf("run %d: after %v, hold lost %v, next grant %v", i, time.Since(parted), !lost.IsZero(), !granted.IsZero())
			}
		}
		margins[i] = granted.Sub(lost)
		if cause := context.Cause(r.held); !errors.Is(cause, store.ErrSessionExpired) {
			t.Errorf("run %d: the hold ended with %v; want ErrSessionExpired (the session clock)", i, cause)
		}
		t.Logf("run %d: hold ended %v after the partition, next grant %v after: margin %v (cause: %v)",
			i, lost.Sub(parted).Round(time.Millisecond), granted.Sub(parted).Round(time.Millisecond),
			margins[i].Round(time.Millisecond), context.Cause(r.held))
	}
	return margins
}

// healZK ends the partition of member f and waits until it serves again.
func healZK(t testing.TB, e *zkserver.Ensemble, f int) {
	t.Helper()
	if err := e.Heal(f); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, fmt.Sprintf("member %d follows again", f), func() bool {
		m, err := e.Members[f].Mode()
		return err == nil && m == "follower"
	})
}

// healEtcd ends the partition of member f and waits until it follows the
// leader again.
func healEtcd(t testing.TB, c *etcdserver.Cluster, f int) {
	t.Helper()
	if err := c.Heal(f); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, fmt.Sprintf("member %d follows the leader again", f), func() bool {
		l := c.Leader()
		return l != nil && c.Members[f].Leader() == l.ID()
	})
}

// pollUntil waits until cond holds, polling it (a member's mode or leader
// has no event to wait on), and fails t after WaitTimeout.
func pollUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	bound := time.NewTimer(WaitTimeout)
	defer bound.Stop()
	for !cond() {
		select {
		case <-poll.C:
		case <-bound.C:
			t.Fatalf("not %s %v after the partition healed", what, WaitTimeout)
		}
	}
}

// PartitionMargins checks that every holder's context was cancelled before
// the next grant, and logs the least and median margins.
func PartitionMargins(t testing.TB, margins []time.Duration) {
	t.Helper()
	for i, m := range margins {
		if m <= 0 {
			t.Errorf("run %d: the partitioned holder's context was cancelled %v after the next grant; want before", i, -m)
		}
	}
	least, median := Margins(margins)
	t.Logf("margin before the next grant over %d runs: least %v, median %v", len(margins), least.Round(time.Millisecond), median.Round(time.Millisecond))
}
