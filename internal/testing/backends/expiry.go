package backends

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// Handover describes one hold for ExpiryRace: Hold takes it on the holder's
// session and returns its context; Next blocks, on the other session, until
// the same thing is granted to it (or ctx ends).
type Handover struct {
	Hold func(ctx context.Context, st store.Store) (context.Context, error)
	Next func(ctx context.Context, st store.Store) error
	// Queued reports, from the other session's view, that the next
	// contender is in line (its node is there), so that the freeze comes
	// while it waits.
	Queued func(t testing.TB, st store.Store)
}

// ExpiryRace freezes a holder's connection for longer than its session
// timeout and returns by how much the holder's context was cancelled before
// the server could grant the same thing to another session (negative: two
// live holders at once). The holder's session comes from hb (short
// sessions, a Freezer), the next contender's from nb. It also returns the
// cause of the holder's end.
func ExpiryRace(t testing.TB, hb, nb storetest.Backend, h Handover) (time.Duration, error) {
	t.Helper()
	fr, ok := hb.(storetest.Freezer)
	if !ok {
		t.Fatalf("backends: %T cannot freeze a session", hb)
	}
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	hst, nst := hb.Open(t), nb.Open(t)
	held, err := h.Hold(ctx, hst)
	if err != nil {
		t.Fatalf("hold: %v", err)
	}
	lost := make(chan time.Time, 1)
	go func() {
		select {
		case <-held.Done():
			lost <- time.Now()
		case <-ctx.Done():
		}
	}()
	type grant struct {
		at  time.Time
		err error
	}
	granted := make(chan grant, 1)
	go func() {
		err := h.Next(ctx, nst)
		granted <- grant{time.Now(), err}
	}()
	h.Queued(t, nst)
	fr.Freeze(t, hst)
	defer fr.Reconnect(t, hst)
	var g grant
	select {
	case g = <-granted:
	case <-ctx.Done():
		t.Fatal("the next contender was never granted")
	}
	if g.err != nil {
		t.Fatalf("next contender: %v", g.err)
	}
	var l time.Time
	select {
	case l = <-lost:
	case <-ctx.Done():
		t.Fatal("the frozen holder's context was never cancelled")
	}
	return g.at.Sub(l), context.Cause(held)
}

// Margins summarises the margins of ExpiryRace runs: the smallest and the
// median.
func Margins(ms []time.Duration) (least, median time.Duration) {
	s := slices.Clone(ms)
	slices.Sort(s)
	return s[0], s[len(s)/2]
}
