package etcdstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/clockguard"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/store"
)

// TestSessionEndsAGuardEarly: the session ends on the client its guard
// before its deadline (the latest acknowledged renewal's send plus the
// TTL): no earlier than the guard's limit allows, and before the deadline,
// for a session whose link froze.
func TestSessionEndsAGuardEarly(t *testing.T) {
	const ttl = 5 * time.Second // a guard of at least 625 ms
	c := etcdserver.Start(t, 1)
	b := etcdbackend.New(c, etcdstore.WithTTL(ttl))
	a := open(t, b)
	if g := etcdstore.Deadline(a).Sub(etcdstore.End(a)); g < clockguard.Margin(ttl) || g > clockguard.Limit(ttl) {
		t.Errorf("deadline - end = %v; want between the guard's margin %v and its limit %v", g, clockguard.Margin(ttl), clockguard.Limit(ttl))
	}
	ended := make(chan time.Time, 1)
	context.AfterFunc(a.Context(), func() { ended <- time.Now() })
	b.Freeze(t, a)
	defer b.Reconnect(t, a)
	var at time.Time
	select {
	case at = <-ended:
	case <-ctxFor(t).Done():
		t.Fatal("the frozen session never ended")
	}
	// The deadline as it stood when the session ended: it only moves
	// while the session lives.
	deadline := etcdstore.Deadline(a)
	if early := deadline.Add(-clockguard.Limit(ttl)); at.Before(early) {
		t.Errorf("the session ended %v before its deadline; want at most the guard's limit, %v", deadline.Sub(at), clockguard.Limit(ttl))
	}
	if !at.Before(deadline) {
		t.Errorf("the session ended %v after its deadline; want a guard before it", at.Sub(deadline))
	}
	if cause := context.Cause(a.Context()); !errors.Is(cause, store.ErrSessionExpired) {
		t.Errorf("Cause = %v; want ErrSessionExpired", cause)
	}
	t.Logf("ended %v before the deadline (guard now %v)", deadline.Sub(at), clockguard.Guard(ttl))
}
