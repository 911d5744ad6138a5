package zkstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/clockguard"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/zkstore"
)

// TestSessionEndsAGuardEarly: the session ends on the client its guard
// before its deadline (the latest send the leader counted plus the
// negotiated timeout): no earlier than the guard's limit allows, and
// before the deadline, for a session whose link froze.
func TestSessionEndsAGuardEarly(t *testing.T) {
	const timeout = 5 * time.Second // a guard of at least 625 ms
	_, b := server(t)
	st, proxies := b.OpenWithProxies(t, zkstore.WithSessionTimeout(timeout))
	if got := st.SessionTimeout(); got != timeout {
		t.Fatalf("SessionTimeout() = %v; want %v", got, timeout)
	}
	if g := zkstore.SessionDeadline(st).Sub(zkstore.SessionEnd(st)); g < clockguard.Margin(timeout) || g > clockguard.Limit(timeout) {
		t.Errorf("deadline - end = %v; want between the guard's margin %v and its limit %v", g, clockguard.Margin(timeout), clockguard.Limit(timeout))
	}
	ended := make(chan time.Time, 1)
	context.AfterFunc(st.Context(), func() { ended <- time.Now() })
	proxies[0].Freeze()
	defer proxies[0].Restore()
	var at time.Time
	select {
	case at = <-ended:
	case <-ctxFor(t).Done():
		t.Fatal("the frozen session never ended")
	}
	// The deadline as it stood when the session ended: it only moves
	// while the session lives.
	deadline := zkstore.SessionDeadline(st)
	if early := deadline.Add(-clockguard.Limit(timeout)); at.Before(early) {
		t.Errorf("the session ended %v before its deadline; want at most the guard's limit, %v", deadline.Sub(at), clockguard.Limit(timeout))
	}
	if !at.Before(deadline) {
		t.Errorf("the session ended %v after its deadline; want a guard before it", at.Sub(deadline))
	}
	if cause := context.Cause(st.Context()); !errors.Is(cause, store.ErrSessionExpired) {
		t.Errorf("Cause = %v; want ErrSessionExpired", cause)
	}
	t.Logf("ended %v before the deadline (guard now %v)", deadline.Sub(at), clockguard.Guard(timeout))
}
