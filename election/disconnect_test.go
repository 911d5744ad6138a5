package election_test

import (
	"context"
	"errors"
	gosync "sync"
	"testing"
	"time"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/zkbackend"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/zkstore"
)

func disconnector(t *testing.T, b storetest.Backend) storetest.Disconnector {
	t.Helper()
	d, ok := b.(storetest.Disconnector)
	if !ok {
		t.Skip("the backend cannot cut a connection")
	}
	return d
}

// TestLoseOnDisconnect: a leader that loses its connection stops leading at
// once, but its node stays until it resigns, so nobody else leads while its
// ownership is unknown.
func TestLoseOnDisconnect(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		d := disconnector(t, b)
		path := dir(t)
		ctx := ctxFor(t)
		sa, sb := open(t, b), open(t, b)
		a, err := election.New(sa, path).Campaign(ctx, []byte("a"))
		if err != nil {
			t.Fatalf("Campaign(a) = %v", err)
		}
		ch := campaign(ctx, election.New(sb, path), "b")
		waitCandidates(t, sb, path, 2)

		d.Disconnect(t, sa)
		waitDone(t, "a after disconnection", a)
		cause := context.Cause(a.Context())
		if !errors.Is(cause, election.ErrDisconnected) || !errors.Is(cause, store.ErrDisconnected) {
			t.Errorf("cause after disconnection = %v; want %v", cause, election.ErrDisconnected)
		}
		if err := a.Proclaim(ctx, []byte("a2")); !errors.Is(err, election.ErrNotLeader) {
			t.Errorf("Proclaim after disconnection = %v; want %v", err, election.ErrNotLeader)
		}
		if got, err := election.New(sb, path).Leader(ctx); err != nil || got.Path != a.Path() {
			t.Errorf("Leader() while a is disconnected = %v, %v; want a's node %s", got, err, a.Path())
		}
		d.Reconnect(t, sa)
		if err := a.Resign(ctx); err != nil {
			t.Fatalf("Resign() after reconnection = %v", err)
		}
		bl := elected(t, "b", ch)
		if err := bl.Resign(ctx); err != nil {
			t.Errorf("Resign(b) = %v", err)
		}
	})
}

// TestKeepOnDisconnect: under KeepOnDisconnect leadership survives a lost
// connection that comes back with the session.
func TestKeepOnDisconnect(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		d := disconnector(t, b)
		path := dir(t)
		ctx := ctxFor(t)
		st := open(t, b)
		a, err := election.New(st, path, election.WithDisconnectPolicy(election.KeepOnDisconnect)).Campaign(ctx, []byte("a"))
		if err != nil {
			t.Fatalf("Campaign(a) = %v", err)
		}
		d.Disconnect(t, st)
		d.Reconnect(t, st)
		if err := a.Proclaim(ctx, []byte("a2")); err != nil {
			t.Fatalf("Proclaim after reconnection = %v; want nil", err)
		}
		// The proclaimed value is seen once the leader's own watch
		// has been set again: observe it through another session.
		got, err := election.New(open(t, b), path).Leader(ctx)
		if err != nil || string(got.Value) != "a2" {
			t.Errorf("Leader() = %v, %v; want value %q", got, err, "a2")
		}
		if closed(a.Done()) {
			t.Fatalf("leadership ended across a disconnection under KeepOnDisconnect: %v", context.Cause(a.Context()))
		}
		b.Expire(t, st)
		waitDone(t, "a after expiry", a)
		if cause := context.Cause(a.Context()); !expiryCause(st, cause) {
			t.Errorf("cause after expiry = %v; want %v", cause, store.ErrSessionExpired)
		}
	})
}

// TestNotToldWhileDisconnected: a waiting candidate whose connection is down
// when its predecessor leaves is told only once it is back.
func TestNotToldWhileDisconnected(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		d := disconnector(t, b)
		path := dir(t)
		ctx := ctxFor(t)
		sa, sb := open(t, b), open(t, b)
		a, err := election.New(sa, path).Campaign(ctx, []byte("a"))
		if err != nil {
			t.Fatalf("Campaign(a) = %v", err)
		}
		var (
			mu          gosync.Mutex
			reconnected bool
		)
		told := make(chan bool, 1)
		ch := make(chan result, 1)
		go func() {
			l, err := election.New(sb, path).Campaign(ctx, []byte("b"))
			mu.Lock()
			told <- reconnected
			mu.Unlock()
			ch <- result{l, err}
		}()
		waitCandidates(t, sa, path, 2)
		d.Disconnect(t, sb)
		if err := a.Resign(ctx); err != nil {
			t.Fatalf("Resign(a) = %v", err)
		}
		// b's node now leads; b must not be told before it reconnects.
		waitCandidates(t, sa, path, 1)
		mu.Lock()
		reconnected = true
		d.Reconnect(t, sb)
		mu.Unlock()
		if !recv(t, "b", told) {
			t.Error("b was told it leads while disconnected")
		}
		bl := elected(t, "b", ch)
		if err := bl.Resign(ctx); err != nil {
			t.Errorf("Resign(b) = %v", err)
		}
	})
}

// TestCandidateReconnects: a long-running candidate whose term ended with a
// lost connection removes its old node and leads again once it is back.
func TestCandidateReconnects(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		d := disconnector(t, b)
		path := dir(t)
		ctx := ctxFor(t)
		st := open(t, b)
		c := election.New(st, path).Candidate(ctx, []byte("a"))
		defer c.Close()
		t1 := term(t, "first term", c)
		d.Disconnect(t, st)
		waitDone(t, "first term", t1)
		d.Reconnect(t, st)
		t2 := term(t, "second term", c)
		if t2.Token() <= t1.Token() {
			t.Errorf("second token %d after %d; want greater", t2.Token(), t1.Token())
		}
		if kids := children(t, st, path); len(kids) != 1 {
			t.Errorf("children = %v; want only the new term's node", kids)
		}
	})
}

// TestLostCreateReply: a campaign whose create reply is lost still has
// exactly one node.
func TestLostCreateReply(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		rl, ok := b.(storetest.ReplyLoser)
		if !ok {
			t.Skip("the backend cannot lose a reply")
		}
		path := dir(t)
		ctx := ctxFor(t)
		st := open(t, b)
		rl.LoseNextCreateReply(t, st)
		l, err := election.New(st, path).Campaign(ctx, []byte("a"))
		if err != nil {
			t.Fatalf("Campaign with a lost reply = %v", err)
		}
		if kids := children(t, st, path); len(kids) != 1 {
			t.Errorf("children = %v; want one", kids)
		}
		if err := l.Resign(ctx); err != nil {
			t.Errorf("Resign() = %v", err)
		}
	})
}

// partitionable opens a leader session that a partition can expire
// naturally within a few seconds: ZooKeeper's is opened with a short
// session timeout, etcd's has the backend's short TTL. memstore has no
// clock, so its "server" expiry is forced once the client has noticed.
func partitionable(t *testing.T, b storetest.Backend) (store.Store, func()) {
	switch be := b.(type) {
	case *zkbackend.Backend:
		st, _ := be.OpenWithProxies(t, zkstore.WithSessionTimeout(2*time.Second))
		return st, func() {}
	case *etcdbackend.Backend:
		return open(t, b), func() {}
	}
	st := open(t, b)
	return st, func() { b.Expire(t, st) }
}

// TestPartitionedLeader: a leader cut off from the servers stops leading
// (LoseOnDisconnect) before the servers expire its session and elect the
// next candidate — the old leader knows first when the expiry is natural.
func TestPartitionedLeader(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		d := disconnector(t, b)
		path := dir(t)
		ctx := ctxFor(t)
		sa, expire := partitionable(t, b)
		a, err := election.New(sa, path).Campaign(ctx, []byte("a"))
		if err != nil {
			t.Fatalf("Campaign(a) = %v", err)
		}
		told := make(chan bool, 1)
		ch := make(chan result, 1)
		go func() {
			l, err := election.New(open(t, b), path).Campaign(ctx, []byte("b"))
			told <- closed(a.Done())
			ch <- result{l, err}
		}()
		waitCandidates(t, sa, path, 2)

		start := time.Now()
		d.Disconnect(t, sa)
		defer d.Reconnect(t, sa) // so that closing it does not wait for a timeout
		waitDone(t, "a, partitioned", a)
		t.Logf("a stopped leading %v after the partition", time.Since(start))
		expire()
		if !recv(t, "b", told) {
			t.Error("b was elected while a's Done was open")
		}
		bl := elected(t, "b", ch)
		t.Logf("b elected %v after the partition", time.Since(start))
		if cause := context.Cause(a.Context()); !errors.Is(cause, election.ErrDisconnected) {
			t.Errorf("cause of a's end = %v; want %v", cause, election.ErrDisconnected)
		}
		if bl.Token() <= a.Token() {
			t.Errorf("b.Token() = %d after a.Token() = %d; want greater", bl.Token(), a.Token())
		}
		if err := bl.Resign(ctx); err != nil {
			t.Errorf("Resign(b) = %v", err)
		}
	})
}
