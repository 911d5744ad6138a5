package zkstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/tcpproxy"
	"github.com/corral-go/corral/internal/testing/zkbackend"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/zkstore"
)

// holders is how many sessions TestDeadlineBeforeServerExpiry freezes at
// once: each is one run of the race between the Store's deadline and the
// server's expiry.
const holders = 12

// TestDeadlineBeforeServerExpiry freezes the connections of sessions that
// hold an ephemeral node each, for longer than their timeout. Every frozen
// Store must end its session (cancel Context) before another session can
// observe the server deleting the node; the margin between the two, on one
// monotonic clock, is logged. With a server whose maximum session timeout
// is below the one asked for, the negotiated timeout must be the one
// counted.
//
// The observer's session is clamped as well (it asks for the default):
// the clamp is 2 s, not less, so that on a loaded machine the observer
// does not lose its own session (its Store ends it once the leader has
// counted nothing from it for the timeout) while it waits for the
// deletions (seen once at a 1 s clamp, with the 2 cores at load 10).
func TestDeadlineBeforeServerExpiry(t *testing.T) {
	const granted = 2 * time.Second
	for _, tc := range []struct {
		name       string
		cfg        *zkserver.Config // nil: the shared server
		asked      time.Duration
		negotiated time.Duration
	}{
		{"granted", nil, granted, granted},
		{"clamped", &zkserver.Config{MaxSessionTimeout: granted}, 2 * granted, granted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b *zkbackend.Backend
			if tc.cfg == nil {
				_, b = server(t)
			} else {
				b = zkbackend.New([]string{zkserver.ForTest(t, *tc.cfg).Addr()})
			}
			raceDeadlines(t, b, tc.asked, tc.negotiated)
		})
	}
}

func raceDeadlines(t *testing.T, b *zkbackend.Backend, asked, negotiated time.Duration) {
	ctx, dir := ctxFor(t), dirFor(t)
	observer := b.Open(t)
	type run struct {
		st      *zkstore.Store
		proxies []*tcpproxy.Proxy
		node    string
		ev      <-chan store.Event
		ended   time.Time // when the holder's Context was cancelled
		deleted time.Time // when the observer saw the node deleted
	}
	runs := make([]*run, holders)
	for i := range runs {
		st, proxies := b.OpenWithProxies(t, zkstore.WithSessionTimeout(asked))
		if got := st.SessionTimeout(); got != negotiated {
			t.Fatalf("SessionTimeout() = %v; want %v (asked %v)", got, negotiated, asked)
		}
		n := must[store.Node](t)(st.Create(ctx, fmt.Sprintf("%s/e%d", dir, i), nil, store.Ephemeral))
		ok, _, ev, err := observer.ExistsW(ctx, n.Path)
		if err != nil || !ok {
			t.Fatalf("ExistsW(%s) = %v, %v; want true", n.Path, ok, err)
		}
		runs[i] = &run{st: st, proxies: proxies, node: n.Path, ev: ev}
	}
	var wg sync.WaitGroup
	frozen := time.Now()
	for _, r := range runs {
		r.proxies[0].Freeze()
		wg.Add(2)
		go func() {
			defer wg.Done()
			select {
			case <-r.st.Context().Done():
				r.ended = time.Now()
			case <-ctx.Done():
			}
		}()
		go func() {
			defer wg.Done()
			select {
			case e := <-r.ev:
				if e.Err != nil || e.Type != store.EventDeleted {
					t.Errorf("watch on %s = %+v; want a deletion", r.node, e)
				}
				r.deleted = time.Now()
			case <-ctx.Done():
			}
		}()
	}
	wg.Wait()
	var margins []time.Duration
	for _, r := range runs {
		if r.ended.IsZero() || r.deleted.IsZero() {
			t.Fatalf("%s: session ended %v, node deleted %v; want both", r.node, !r.ended.IsZero(), !r.deleted.IsZero())
		}
		if cause := context.Cause(r.st.Context()); !errors.Is(cause, store.ErrSessionExpired) {
			t.Errorf("%s: Cause = %v; want ErrSessionExpired", r.node, cause)
		}
		// The deadline is the latest request the leader has counted +
		// the timeout, and the Store keeps it over a third of a timeout
		// ahead on a working connection (see quorum.go): never less than a
		// quarter of it after the freeze, round trips included.
		if d := r.ended.Sub(frozen); d < negotiated/4 {
			t.Errorf("%s: session ended %v after the freeze; want at least 1/4 of %v", r.node, d, negotiated)
		}
		margin := r.deleted.Sub(r.ended)
		if margin <= 0 {
			t.Errorf("%s: the observer saw the node deleted %v before the holder's session ended", r.node, -margin)
		}
		margins = append(margins, margin)
	}
	slices.Sort(margins)
	t.Logf("negotiated %v: holder's end before the observer's deletion, %d runs: min %v, median %v, max %v",
		negotiated, len(margins), margins[0], margins[len(margins)/2], margins[len(margins)-1])
	for _, r := range runs {
		r.proxies[0].Restore()
	}
}

// TestFirstReadAfterDeadline keeps the deadline's timer from running, as
// in a process stopped past its deadline: the first read of the session's
// state must end it, whether it is a call, Context or Disconnected, and
// the call must fail at once with ErrSessionExpired rather than wait for
// the connection.
func TestFirstReadAfterDeadline(t *testing.T) {
	_, b := server(t)
	ctx, dir := ctxFor(t), dirFor(t)
	reads := map[string]func(*zkstore.Store) error{
		"call": func(st *zkstore.Store) error {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			start := time.Now()
			_, err := st.Get(cctx, dir)
			if !errors.Is(err, store.ErrSessionExpired) {
				return fmt.Errorf("Get after the deadline = %v; want ErrSessionExpired", err)
			}
			if d := time.Since(start); d > time.Second {
				return fmt.Errorf("Get after the deadline took %v; want it to fail at once", d)
			}
			return nil
		},
		"Context": func(st *zkstore.Store) error {
			if zkstore.Ended(st) != nil {
				return errors.New("session ended before it was read")
			}
			if st.Context().Err() == nil {
				return errors.New("Context() after the deadline is not done")
			}
			return nil
		},
		"Disconnected": func(st *zkstore.Store) error {
			// The client has most likely given the frozen connection
			// up already: the channel being closed proves nothing.
			<-st.Disconnected()
			if zkstore.Ended(st) == nil {
				return errors.New("Disconnected() after the deadline did not end the session")
			}
			return nil
		},
	}
	type holder struct {
		st      *zkstore.Store
		proxies []*tcpproxy.Proxy
	}
	hs := map[string]holder{}
	for name := range reads {
		st, proxies := b.OpenWithProxies(t, zkstore.WithSessionTimeout(time.Second), zkstore.WithoutDeadlineTimer())
		must[store.Node](t)(st.Create(ctx, dir+"/"+name, nil, store.Ephemeral))
		hs[name] = holder{st, proxies}
	}
	for _, h := range hs {
		h.proxies[0].Freeze()
	}
	for name, read := range reads {
		h := hs[name]
		// Frozen, the deadline no longer moves once the replies in
		// flight have arrived: wait until it has passed and stayed put.
		for {
			d := zkstore.SessionDeadline(h.st)
			select {
			case <-time.After(time.Until(d)):
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
			if zkstore.SessionDeadline(h.st).Equal(d) {
				break
			}
		}
		if err := read(h.st); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if cause := context.Cause(h.st.Context()); !errors.Is(cause, store.ErrSessionExpired) {
			t.Errorf("%s: Cause = %v; want ErrSessionExpired", name, cause)
		}
		if _, err := h.st.Get(ctx, dir); !errors.Is(err, store.ErrSessionExpired) {
			t.Errorf("%s: Get after the end = %v; want ErrSessionExpired", name, err)
		}
		h.proxies[0].Restore()
	}
}

// TestReconnectKeepsSession freezes a session's connection until the
// client gives it up, then lets it reconnect before the deadline: the
// session, its node and its Context live on, and the reconnection moves
// the deadline on.
func TestReconnectKeepsSession(t *testing.T) {
	_, b := server(t)
	const timeout = 3 * time.Second
	st, proxies := b.OpenWithProxies(t, zkstore.WithSessionTimeout(timeout))
	other := b.Open(t)
	ctx, dir := ctxFor(t), dirFor(t)
	e := must[store.Node](t)(st.Create(ctx, dir+"/e", nil, store.Ephemeral))
	id := st.SessionID()
	for _, fault := range []string{"freeze", "cut"} {
		disc := st.Disconnected()
		switch fault {
		case "freeze":
			// The client gives the connection up after two thirds of
			// the timeout without a reply; the deadline is a third
			// later.
			proxies[0].Freeze()
		case "cut":
			// Refused, not just cut: a reconnection made before
			// before is read would move the deadline first.
			proxies[0].Refuse()
		}
		select {
		case <-disc:
		case <-ctx.Done():
			t.Fatalf("%s: client never noticed", fault)
		}
		before := zkstore.SessionDeadline(st)
		proxies[0].Restore()
		zkbackend.WaitConnected(t, ctx, st)
		if err := st.Context().Err(); err != nil {
			t.Fatalf("%s: session ended across a reconnection: %v", fault, context.Cause(st.Context()))
		}
		if after := zkstore.SessionDeadline(st); !after.After(before) {
			t.Errorf("%s: deadline %v after reconnecting; want later than %v", fault, after, before)
		}
		n := must[store.Node](t)(other.Get(ctx, e.Path))
		if n.Owner != id || st.SessionID() != id {
			t.Errorf("%s: owner %#x, session %#x; want %#x", fault, n.Owner, st.SessionID(), id)
		}
		must[store.Node](t)(st.Get(ctx, e.Path))
	}
}

// TestUnansweredHandshake reconnects a session through a server that
// takes the connection and never answers the handshake on it (the proxy
// drops the connect request; a ZooKeeper starting up does that, see
// handshakeBound): the Store gives that connection up in time to reconnect
// on the next one, within the session. With one server, a handshake
// allowed the whole session timeout (the Java client's bound) outlasts it.
func TestUnansweredHandshake(t *testing.T) {
	_, b := server(t)
	const timeout = 4 * time.Second
	st, proxies := b.OpenWithProxies(t, zkstore.WithSessionTimeout(timeout))
	ctx, dir := ctxFor(t), dirFor(t)
	e := must[store.Node](t)(st.Create(ctx, dir+"/e", nil, store.Ephemeral))
	id := st.SessionID()
	var hung atomic.Uint64 // the connection whose handshake is dropped
	hung.Store(math.MaxUint64)
	proxies[0].SetHook(tcpproxy.LengthPrefixed, func(m tcpproxy.Message) tcpproxy.Action {
		if m.Dir == tcpproxy.Upstream && m.Index == 0 && hung.CompareAndSwap(0, m.Conn) {
			return tcpproxy.Drop
		}
		if m.Conn == hung.Load() {
			return tcpproxy.Drop // nothing more from that one either
		}
		return tcpproxy.Forward
	})
	disc := st.Disconnected()
	hung.Store(0) // the next connection's connect request goes nowhere
	proxies[0].Cut()
	select {
	case <-disc:
	case <-ctx.Done():
		t.Fatal("client never noticed the cut")
	}
	zkbackend.WaitConnected(t, ctx, st)
	if err := st.Context().Err(); err != nil {
		t.Fatalf("session ended waiting on a handshake the server never answered: %v", context.Cause(st.Context()))
	}
	if h := hung.Load(); h == 0 || h == math.MaxUint64 {
		t.Fatalf("no handshake was dropped (hung = %d): the test proves nothing", h)
	}
	if n := must[store.Node](t)(st.Get(ctx, e.Path)); n.Owner != id {
		t.Errorf("owner %#x after the reconnection; want %#x", n.Owner, id)
	}
}

// TestSyncPace measures what keeping the deadline fresh costs, with an
// idle session and one that writes every twentieth of its timeout side by
// side: the idle one sends at most a sync per eighth of its timeout, and
// some; the writing one at most half as many (its writes pass through the
// leader; a sync goes out only when one took longer than an eighth of the
// timeout to be answered).
func TestSyncPace(t *testing.T) {
	_, b := server(t)
	const timeout = 2 * time.Second
	ctx, dir := ctxFor(t), dirFor(t)
	window := 2 * timeout
	idle, _ := b.OpenWithProxies(t, zkstore.WithSessionTimeout(timeout))
	writer, _ := b.OpenWithProxies(t, zkstore.WithSessionTimeout(timeout))
	node := must[store.Node](t)(writer.Create(ctx, dir+"/w", nil, store.Ephemeral))
	end := time.NewTimer(window)
	defer end.Stop()
	tick := time.NewTicker(timeout / 20)
	defer tick.Stop()
	start, idle0, writer0 := time.Now(), zkstore.Syncs(idle), zkstore.Syncs(writer)
loop:
	for {
		select {
		case <-end.C:
			break loop
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-tick.C:
			must[store.Node](t)(writer.Set(ctx, node.Path, []byte("x"), store.AnyVersion))
		}
	}
	took := time.Since(start)
	ni, nw := zkstore.Syncs(idle)-idle0, zkstore.Syncs(writer)-writer0
	t.Logf("%v sessions over %v: idle %d syncs (%.2f requests/s), writing %d syncs (%.2f requests/s)",
		timeout, took.Round(time.Millisecond), ni, float64(ni)/took.Seconds(), nw, float64(nw)/took.Seconds())
	if most := int64(took/(timeout/8)) + 1; ni < 1 || ni > most {
		t.Errorf("idle session: %d syncs in %v; want 1 to %d", ni, took, most)
	}
	if nw > ni/2 {
		t.Errorf("writing session: %d syncs in %v; want at most half the idle one's %d", nw, took, ni)
	}
}
