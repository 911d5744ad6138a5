package election_test

import (
	"context"
	"errors"
	"fmt"
	gosync "sync"
	"testing"
	"time"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

func isNoNode(err error) bool { return errors.Is(err, store.ErrNoNode) }

// expiryKnownFirst reports whether a leader on st learns of an expiry forced
// by the backend's Expire before other sessions see its node gone.
// memstore ends a session in one step. A real server's forced expiry comes
// from outside (ZooKeeper: the session is taken over and closed; etcd: the
// lease is revoked), and the other sessions may see the node gone before
// the client learns anything, as when an operator deletes the node. A
// natural expiry is different: the client misses renewals and, under
// LoseOnDisconnect, gives up leadership before the server expires it.
func expiryKnownFirst(st store.Store) bool {
	_, ok := st.(*memstore.Store)
	return ok
}

// expiryCause reports whether cause is a cause a leader on st may see for a
// forced expiry: on a real server it may first see its node deleted, or
// (ZooKeeper) its connection dropped.
func expiryCause(st store.Store, cause error) bool {
	if errors.Is(cause, store.ErrSessionExpired) {
		return true
	}
	return !expiryKnownFirst(st) && (errors.Is(cause, election.ErrNodeDeleted) || errors.Is(cause, election.ErrDisconnected))
}

func TestCampaignResign(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := open(t, b)
		path := dir(t)
		e := election.New(st, path)
		ctx := ctxFor(t)

		if got, err := e.Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
			t.Fatalf("Leader() before any campaign = %v, %v; want %v", got, err, election.ErrNoLeader)
		}
		l, err := e.Campaign(ctx, []byte("a"))
		if err != nil {
			t.Fatalf("Campaign(%q) = %v; want leadership", "a", err)
		}
		if closed(l.Done()) {
			t.Fatalf("Done() of a new leadership is closed (cause %v)", context.Cause(l.Context()))
		}
		if got := string(l.Value()); got != "a" {
			t.Errorf("Value() = %q; want %q", got, "a")
		}
		got, err := e.Leader(ctx)
		if err != nil || got.Path != l.Path() || got.Token != l.Token() || string(got.Value) != "a" {
			t.Errorf("Leader() = %v, %v; want %s (token %d, value %q)", got, err, l.Path(), l.Token(), "a")
		}

		if err := l.Resign(ctx); err != nil {
			t.Fatalf("Resign() = %v; want nil", err)
		}
		if !closed(l.Done()) {
			t.Fatal("Done() is open after Resign")
		}
		if cause := context.Cause(l.Context()); !errors.Is(cause, election.ErrResigned) {
			t.Errorf("Cause(Context()) after Resign = %v; want %v", cause, election.ErrResigned)
		}
		if err := l.Resign(ctx); err != nil {
			t.Errorf("second Resign() = %v; want nil", err)
		}
		if err := l.Proclaim(ctx, []byte("b")); !errors.Is(err, election.ErrNotLeader) {
			t.Errorf("Proclaim after Resign = %v; want %v", err, election.ErrNotLeader)
		}
		if kids := children(t, st, path); len(kids) != 0 {
			t.Errorf("children after Resign = %v; want none", kids)
		}
		if got, err := e.Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
			t.Errorf("Leader() after Resign = %v, %v; want %v", got, err, election.ErrNoLeader)
		}
	})
}

func TestInvalid(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st := open(t, b)
		ctx := ctxFor(t)
		tests := []struct {
			name  string
			e     *election.Election
			value []byte
			want  error
		}{
			{"relative path", election.New(st, "x/y"), nil, store.ErrInvalidPath},
			{"trailing slash", election.New(st, "/x/"), nil, store.ErrInvalidPath},
			{"too large", election.New(st, dir(t)), make([]byte, store.MaxDataSize+1), store.ErrTooLarge},
			{"bad policy", election.New(st, dir(t), election.WithDisconnectPolicy(7)), nil, store.ErrInvalidArgument},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if _, err := tt.e.Campaign(ctx, tt.value); !errors.Is(err, tt.want) {
					t.Errorf("Campaign(%q) = %v; want %v", tt.e.Path(), err, tt.want)
				}
				if tt.want == store.ErrInvalidPath {
					return
				}
				if kids := children(t, st, tt.e.Path()); len(kids) != 0 {
					t.Errorf("children after a failed campaign = %v; want none", kids)
				}
			})
		}
	})
}

// TestHandover checks every way a leadership ends: the next candidate
// leads, and the old leader's Done is closed before the new one is told.
func TestHandover(t *testing.T) {
	tests := []struct {
		name  string
		end   func(t *testing.T, b storetest.Backend, st store.Store, l *election.Leadership)
		cause error
		// first: the old leader must know before the new one is told.
		// Not when a third party deletes the node: both learn it from
		// the same change, and neither can know before the other (see
		// expiryKnownFirst for expiry).
		first bool
	}{
		{"resign", func(t *testing.T, _ storetest.Backend, _ store.Store, l *election.Leadership) {
			if err := l.Resign(ctxFor(t)); err != nil {
				t.Errorf("Resign() = %v", err)
			}
		}, election.ErrResigned, true},
		{"expire", func(t *testing.T, b storetest.Backend, st store.Store, _ *election.Leadership) {
			b.Expire(t, st)
		}, store.ErrSessionExpired, true},
		{"close", func(t *testing.T, _ storetest.Backend, st store.Store, _ *election.Leadership) {
			if err := st.Close(); err != nil {
				t.Errorf("Close() = %v", err)
			}
		}, store.ErrClosed, true},
		{"node deleted", func(t *testing.T, b storetest.Backend, _ store.Store, l *election.Leadership) {
			other := open(t, b)
			if err := other.Delete(ctxFor(t), l.Path()); err != nil {
				t.Errorf("Delete(%q) = %v", l.Path(), err)
			}
		}, election.ErrNodeDeleted, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backends.Run(t, func(t *testing.T, b storetest.Backend) {
				path := dir(t)
				ctx := ctxFor(t)
				sa, sb := open(t, b), open(t, b)
				a, err := election.New(sa, path).Campaign(ctx, []byte("a"))
				if err != nil {
					t.Fatalf("Campaign(a) = %v", err)
				}
				// Tell b only after checking, at the moment it is told,
				// that a already knows it lost.
				told := make(chan bool, 1)
				ch := make(chan result, 1)
				go func() {
					l, err := election.New(sb, path).Campaign(ctx, []byte("b"))
					told <- closed(a.Done())
					ch <- result{l, err}
				}()
				waitCandidates(t, sb, path, 2)
				tt.end(t, b, sa, a)

				aDone := recv(t, "b elected", told)
				bl := elected(t, "b elected", ch)
				defer bl.Resign(ctx)
				first := tt.first
				if tt.name == "expire" {
					first = expiryKnownFirst(sa)
				}
				if first && !aDone {
					t.Errorf("b was elected while a's Done was open")
				}
				waitDone(t, "a", a)
				if cause := context.Cause(a.Context()); !errors.Is(cause, tt.cause) && !(tt.name == "expire" && expiryCause(sa, cause)) {
					t.Errorf("Cause(a.Context()) = %v; want %v", cause, tt.cause)
				}
				if bl.Token() <= a.Token() {
					t.Errorf("b.Token() = %d after a.Token() = %d; want greater", bl.Token(), a.Token())
				}
				if err := a.Resign(ctx); err != nil {
					t.Errorf("Resign() after loss = %v; want nil", err)
				}
				if got, err := election.New(sb, path).Leader(ctx); err != nil || got.Path != bl.Path() || string(got.Value) != "b" {
					t.Errorf("Leader() = %v, %v; want %s with value %q", got, err, bl.Path(), "b")
				}
			})
		})
	}
}

// TestFiveCandidates runs five candidates on separate sessions through many
// terms, each ended by a resignation or a session expiry, and checks at
// every election that no other leadership is live and that tokens grow: a
// fenced store that remembers the greatest token would never see a lower
// one after a higher one.
func TestFiveCandidates(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		const candidates, terms = 5, 20
		path := dir(t)
		ctx, cancel := context.WithTimeout(t.Context(), 3*timeout)
		defer cancel()

		type term struct {
			l        *election.Leadership
			expiring bool // its session is being expired by force
		}
		var (
			mu      gosync.Mutex
			current = map[int]term{}
			fence   int64 // the greatest token seen
			fenced  bool  // whether fence is set (ZooKeeper's first token is 0)
			count   int
			history []int64
		)
		obsSt := open(t, b)
		obsCtx, stopObs := context.WithCancel(ctx)
		observed := election.New(obsSt, path).Observe(obsCtx).Leaders()

		var wg gosync.WaitGroup
		for i := range candidates {
			wg.Go(func() {
				st := b.Open(t)
				defer func() { _ = st.Close() }()
				for round := 0; ; round++ {
					l, err := election.New(st, path).Campaign(ctx, []byte(fmt.Sprint(i)))
					if err != nil {
						if ctx.Err() == nil {
							t.Errorf("candidate %d: Campaign = %v", i, err)
							cancel()
						}
						return
					}
					mu.Lock()
					for j, o := range current {
						if j == i || o.l.Context().Err() != nil || (o.expiring && !expiryKnownFirst(st)) {
							continue
						}
						t.Errorf("candidate %d elected (token %d) while candidate %d still leads (token %d)", i, l.Token(), j, o.l.Token())
					}
					if fenced && l.Token() <= fence {
						t.Errorf("candidate %d elected with token %d after token %d", i, l.Token(), fence)
					}
					fence, fenced = max(fence, l.Token()), true
					current[i] = term{l: l}
					history = append(history, l.Token())
					count++
					last := count == terms
					mu.Unlock()
					if last {
						cancel()
					}
					if (i+round)%2 == 0 {
						if err := l.Resign(context.WithoutCancel(ctx)); err != nil {
							t.Errorf("candidate %d: Resign = %v", i, err)
						}
						continue
					}
					mu.Lock()
					current[i] = term{l: l, expiring: true}
					mu.Unlock()
					b.Expire(t, st)
					select {
					case <-l.Done():
					case <-time.After(timeout):
						t.Errorf("candidate %d: Done still open %v after its session expired", i, timeout)
						return
					}
					_ = st.Close()
					st = b.Open(t)
				}
			})
		}
		wg.Wait()
		if count < terms {
			t.Fatalf("%d terms; want %d", count, terms)
		}

		// The observer saw a subsequence of the terms, in order, and
		// never a leader that was not elected.
		stopObs()
		var seen []int64
		for l := range observed {
			if !l.IsZero() {
				seen = append(seen, l.Token)
			}
		}
		for i := 1; i < len(seen); i++ {
			if seen[i] <= seen[i-1] {
				t.Errorf("observer saw token %d after %d", seen[i], seen[i-1])
			}
		}
		elected := map[int64]bool{}
		for _, tok := range history {
			elected[tok] = true
		}
		for _, tok := range seen {
			// Once the test is over, a cancelled campaign's node may
			// lead for a moment before it is removed; those come after
			// the last term.
			if tok <= fence && !elected[tok] {
				t.Errorf("observer saw token %d, which was never elected", tok)
			}
		}
	})
}

// TestCancelCampaign checks that a campaign that gives up leaves no node.
func TestCancelCampaign(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		path := dir(t)
		sa, sb := open(t, b), open(t, b)
		a, err := election.New(sa, path).Campaign(ctxFor(t), []byte("a"))
		if err != nil {
			t.Fatalf("Campaign(a) = %v", err)
		}
		defer a.Resign(t.Context())
		eb := election.New(sb, path)

		t.Run("cancelled while waiting", func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			ch := campaign(ctx, eb, "b")
			waitCandidates(t, sb, path, 2)
			cancel()
			r := recv(t, "cancelled campaign", ch)
			if !errors.Is(r.err, context.Canceled) {
				t.Fatalf("Campaign after cancel = %v, %v; want %v", r.l, r.err, context.Canceled)
			}
			if kids := children(t, sb, path); len(kids) != 1 {
				t.Errorf("children after cancelled campaign = %v; want only a's", kids)
			}
		})
		t.Run("deadline", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()
			if l, err := eb.Campaign(ctx, []byte("b")); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Campaign past deadline = %v, %v; want %v", l, err, context.DeadlineExceeded)
			}
			if kids := children(t, sb, path); len(kids) != 1 {
				t.Errorf("children after expired campaign = %v; want only a's", kids)
			}
		})
		t.Run("cancelled before", func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if l, err := eb.Campaign(ctx, []byte("b")); !errors.Is(err, context.Canceled) {
				t.Fatalf("Campaign with a cancelled ctx = %v, %v; want %v", l, err, context.Canceled)
			}
			if kids := children(t, sb, path); len(kids) != 1 {
				t.Errorf("children = %v; want only a's", kids)
			}
		})
		t.Run("session expires while waiting", func(t *testing.T) {
			sc := open(t, b)
			ch := campaign(ctxFor(t), election.New(sc, path), "c")
			waitCandidates(t, sb, path, 2)
			b.Expire(t, sc)
			r := recv(t, "campaign of an expired session", ch)
			if !errors.Is(r.err, store.ErrSessionExpired) {
				t.Fatalf("Campaign when the session expires = %v, %v; want %v", r.l, r.err, store.ErrSessionExpired)
			}
			if kids := children(t, sb, path); len(kids) != 1 {
				t.Errorf("children = %v; want only a's", kids)
			}
		})
	})
}

// TestObserve checks that observers see every transition, in order,
// including "no leader" and proclaimed values.
func TestObserve(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		path := dir(t)
		ctx := ctxFor(t)
		const observers = 3
		var chans []<-chan election.Leader
		for range observers {
			chans = append(chans, election.New(open(t, b), path).Observe(ctx).Leaders())
		}
		// expect checks that every observer's next report is want.
		expect := func(step string, want election.Leader) {
			t.Helper()
			for i, ch := range chans {
				got, ok := next(t, step, ch)
				if !ok {
					t.Fatalf("%s: observer %d closed its channel", step, i)
				}
				if got.Path != want.Path || got.Token != want.Token || string(got.Value) != string(want.Value) {
					t.Fatalf("%s: observer %d saw %v; want %v", step, i, got, want)
				}
			}
		}
		leader := func(l *election.Leadership) election.Leader {
			return election.Leader{Path: l.Path(), Token: l.Token(), Value: l.Value()}
		}
		expect("start", election.Leader{})

		sa, sb := open(t, b), open(t, b)
		a, err := election.New(sa, path).Campaign(ctx, []byte("a1"))
		if err != nil {
			t.Fatalf("Campaign(a) = %v", err)
		}
		expect("a elected", leader(a))
		if err := a.Proclaim(ctx, []byte("a2")); err != nil {
			t.Fatalf("Proclaim(a2) = %v", err)
		}
		expect("a proclaims", leader(a))

		ch := campaign(ctx, election.New(sb, path), "b1")
		waitCandidates(t, sb, path, 2)
		if err := a.Resign(ctx); err != nil {
			t.Fatalf("Resign(a) = %v", err)
		}
		bl := elected(t, "b", ch)
		expect("a resigns, b leads", leader(bl))

		b.Expire(t, sb)
		expect("b's session expires", election.Leader{})

		c, err := election.New(sa, path).Campaign(ctx, []byte("c"))
		if err != nil {
			t.Fatalf("Campaign(c) = %v", err)
		}
		expect("c elected", leader(c))
		if c.Token() <= bl.Token() {
			t.Errorf("c.Token() = %d after b.Token() = %d; want greater", c.Token(), bl.Token())
		}
		if err := c.Resign(ctx); err != nil {
			t.Fatalf("Resign(c) = %v", err)
		}
		expect("c resigns", election.Leader{})
	})
}

// TestObserveEnds: an observer's channel is closed when its ctx ends or its
// session does.
func TestObserveEnds(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		tests := []struct {
			name string
			end  func(t *testing.T, cancel context.CancelFunc, st store.Store)
			want error // Err after the end
		}{
			{"ctx", func(_ *testing.T, cancel context.CancelFunc, _ store.Store) { cancel() }, context.Canceled},
			{"close", func(_ *testing.T, _ context.CancelFunc, st store.Store) { _ = st.Close() }, store.ErrClosed},
			{"expire", func(t *testing.T, _ context.CancelFunc, st store.Store) { b.Expire(t, st) }, store.ErrSessionExpired},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				st := open(t, b)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				obs := election.New(st, dir(t)).Observe(ctx)
				ch := obs.Leaders()
				if l, ok := next(t, "first report", ch); !ok || !l.IsZero() {
					t.Fatalf("first report = %v, %v; want no leader", l, ok)
				}
				tt.end(t, cancel, st)
				for {
					l, ok := next(t, "end", ch)
					if !ok {
						break
					}
					if !l.IsZero() {
						t.Errorf("report after the end = %v; want none", l)
					}
				}
				recv(t, "Done", obs.Done())
				if err := obs.Err(); !errors.Is(err, tt.want) {
					t.Errorf("Err() = %v; want %v", err, tt.want)
				}
			})
		}
	})
}

// TestMisuse: nil stores, zero values, the root and closed stores give typed
// errors, never a panic (from a background goroutine, which would crash the
// process) and never a silently closed channel.
func TestMisuse(t *testing.T) {
	mem := memstore.New()
	closed := memstore.New()
	closed.Close()
	defer mem.Close()
	bg := context.Background()
	var (
		zeroElection   election.Election
		zeroLeadership election.Leadership
		zeroCandidate  election.Candidate
		zeroObserver   election.Observer
	)
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"nil store Campaign", func() error { _, err := election.New(nil, "/e").Campaign(bg, nil); return err }, store.ErrInvalidArgument},
		{"nil store Leader", func() error { _, err := election.New(nil, "/e").Leader(bg); return err }, store.ErrInvalidArgument},
		{"nil store Candidate", func() error {
			c := election.New(nil, "/e").Candidate(bg, nil)
			recv(t, "Done", closedAfter(c.Terms()))
			return c.Err()
		}, store.ErrInvalidArgument},
		{"nil store Observe", func() error {
			o := election.New(nil, "/e").Observe(bg)
			recv(t, "Done", o.Done())
			return o.Err()
		}, store.ErrInvalidArgument},
		{"zero Election Campaign", func() error { _, err := zeroElection.Campaign(bg, nil); return err }, store.ErrInvalidArgument},
		{"nil option Campaign", func() error { _, err := election.New(mem, "/e", nil).Campaign(bg, nil); return err }, store.ErrInvalidArgument},
		{"nil option Observe", func() error {
			o := election.New(mem, "/e", nil).Observe(bg)
			recv(t, "Done", o.Done())
			return o.Err()
		}, store.ErrInvalidArgument},
		{"root Campaign", func() error { _, err := election.New(mem, "/").Campaign(bg, nil); return err }, store.ErrInvalidPath},
		{"empty Campaign", func() error { _, err := election.New(mem, "").Campaign(bg, nil); return err }, store.ErrInvalidPath},
		{"invalid Observe", func() error {
			o := election.New(mem, "no/slash").Observe(bg)
			recv(t, "Done", o.Done())
			return o.Err()
		}, store.ErrInvalidPath},
		{"closed store Observe", func() error {
			o := election.New(closed, "/e").Observe(bg)
			recv(t, "Done", o.Done())
			return o.Err()
		}, store.ErrClosed},
		{"Campaign on a lock's path", func() error {
			if _, err := mem.Create(bg, "/locked/lock-", nil, store.EphemeralSequential); err != nil {
				return err
			}
			_, err := election.New(mem, "/locked").Campaign(bg, nil)
			return err
		}, election.ErrKindMismatch},
		{"zero Leadership Resign", func() error { return zeroLeadership.Resign(bg) }, store.ErrInvalidArgument},
		{"zero Leadership Proclaim", func() error { return zeroLeadership.Proclaim(bg, nil) }, store.ErrInvalidArgument},
		{"zero Leadership Context", func() error { return context.Cause(zeroLeadership.Context()) }, election.ErrNotLeader},
		{"zero Candidate Err", func() error { return zeroCandidate.Err() }, store.ErrInvalidArgument},
		{"zero Observer Err", func() error { return zeroObserver.Err() }, store.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.want) {
				t.Errorf("%s = %v; want %v", tt.name, err, tt.want)
			}
		})
	}
	if zeroLeadership.Token() != -1 || zeroLeadership.Path() != "" {
		t.Errorf("zero Leadership Token, Path = %d, %q; want -1, \"\"", zeroLeadership.Token(), zeroLeadership.Path())
	}
	if _, ok := <-zeroCandidate.Terms(); ok {
		t.Error("zero Candidate sent a term")
	}
	if _, ok := <-zeroObserver.Leaders(); ok {
		t.Error("zero Observer sent a leader")
	}
	if err := zeroCandidate.Close(); err != nil {
		t.Errorf("zero Candidate Close = %v", err)
	}
	if err := zeroObserver.Close(); err != nil {
		t.Errorf("zero Observer Close = %v", err)
	}
}

// closedAfter returns a channel closed once ch is closed, dropping what ch
// sends.
func closedAfter[T any](ch <-chan T) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range ch {
		}
	}()
	return done
}
