package twophase_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/twophase"
)

func TestMain(m *testing.M) { backends.Main(m) }

// timeout bounds every wait of these tests.
const timeout = 30 * time.Second

// later is a deadline no test reaches unless it means to.
var later = time.Now().Add(time.Hour)

func txPath(t *testing.T) string {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/twophasetest/%s-%08x", name, rand.Uint32())
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx
}

func result(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(timeout):
		t.Fatalf("%s did not return", what)
		return nil
	}
}

func pending(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned %v; want it still waiting", what, err)
	default:
	}
}

// wantAbort checks that err is an *AbortError for reason and participant.
func wantAbort(t *testing.T, what string, err error, reason twophase.Reason, participant string) {
	t.Helper()
	var ae *twophase.AbortError
	if !errors.As(err, &ae) || !errors.Is(err, twophase.ErrAborted) || ae.Reason != reason || ae.Participant != participant {
		t.Errorf("%s = %v; want an abort for %v of %q", what, err, reason, participant)
	}
}

func join(t *testing.T, ctx context.Context, st store.Store, p, name string) *twophase.Participant {
	t.Helper()
	pt, err := twophase.Join(ctx, st, p, name)
	if err != nil {
		t.Fatalf("Join(%q) = %v", name, err)
	}
	return pt
}

func vote(t *testing.T, ctx context.Context, pt *twophase.Participant, commit bool) {
	t.Helper()
	if err := pt.Vote(ctx, commit); err != nil {
		t.Fatalf("Vote(%q, %v) = %v", pt.Name(), commit, err)
	}
}

// alive returns the alive nodes under the participant's slot.
func alive(t *testing.T, st store.Store, p, name string) []string {
	t.Helper()
	kids, err := st.Children(testCtx(t), p+"/"+name)
	if errors.Is(err, store.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range kids {
		names = append(names, k.Name)
	}
	return names
}

func TestAllCommit(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 4)
		p, ctx := txPath(t), testCtx(t)
		names := []string{"db", "cache", "index"}
		c, err := twophase.Begin(ctx, sts[0], p, names, later)
		if err != nil {
			t.Fatalf("Begin = %v", err)
		}
		decided := backends.Async(func() error { return c.Wait(ctx) })
		var waits []<-chan error
		for i, name := range names {
			pt := join(t, ctx, sts[i+1], p, name)
			waits = append(waits, backends.Async(func() error { return pt.Wait(ctx) }))
			if i < len(names)-1 {
				vote(t, ctx, pt, true)
			} else {
				// Everyone waits until the last vote.
				pending(t, decided, "coordinator's Wait")
				for _, w := range waits {
					pending(t, w, "participant's Wait")
				}
				vote(t, ctx, pt, true)
			}
		}
		if err := result(t, decided, "coordinator's Wait"); err != nil {
			t.Errorf("coordinator's Wait = %v; want commit (nil)", err)
		}
		for i, w := range waits {
			if err := result(t, w, "participant's Wait"); err != nil {
				t.Errorf("participant %q: Wait = %v; want commit (nil)", names[i], err)
			}
		}
		for _, name := range names {
			if got := alive(t, sts[0], p, name); len(got) != 0 {
				t.Errorf("alive nodes of %q after its vote: %q", name, got)
			}
		}
		if err := twophase.Await(ctx, sts[0], p); err != nil {
			t.Errorf("Await = %v; want commit (nil)", err)
		}
	})
}

func TestOneAbort(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 4)
		p, ctx := txPath(t), testCtx(t)
		c, err := twophase.Begin(ctx, sts[0], p, []string{"a", "b", "c"}, later)
		if err != nil {
			t.Fatal(err)
		}
		decided := backends.Async(func() error { return c.Wait(ctx) })
		a, bp, cp := join(t, ctx, sts[1], p, "a"), join(t, ctx, sts[2], p, "b"), join(t, ctx, sts[3], p, "c")
		vote(t, ctx, a, true)
		aWait := backends.Async(func() error { return a.Wait(ctx) })
		vote(t, ctx, bp, false)
		wantAbort(t, "coordinator's Wait", result(t, decided, "coordinator's Wait"), twophase.ReasonVote, "b")
		wantAbort(t, "a's Wait", result(t, aWait, "a's Wait"), twophase.ReasonVote, "b")
		// A vote after the decision changes nothing.
		vote(t, ctx, cp, true)
		wantAbort(t, "c's Wait", cp.Wait(ctx), twophase.ReasonVote, "b")
		if err := c.Abort(ctx); err != nil {
			t.Errorf("Abort of an aborted transaction = %v; want nil", err)
		}
	})
}

func TestParticipantLostBeforeVote(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 4)
		p, ctx := txPath(t), testCtx(t)
		c, err := twophase.Begin(ctx, sts[0], p, []string{"a", "b"}, later)
		if err != nil {
			t.Fatal(err)
		}
		decided := backends.Async(func() error { return c.Wait(ctx) })
		a := join(t, ctx, sts[1], p, "a")
		vote(t, ctx, a, true)
		join(t, ctx, sts[2], p, "b")
		pending(t, decided, "coordinator's Wait")
		b.Expire(t, sts[2]) // b crashes before it votes
		wantAbort(t, "coordinator's Wait", result(t, decided, "coordinator's Wait"), twophase.ReasonLost, "b")
		wantAbort(t, "a's Wait", a.Wait(ctx), twophase.ReasonLost, "b")
		// b restarts with a new session: it learns the abort.
		again := join(t, ctx, sts[3], p, "b")
		wantAbort(t, "b's Wait after a restart", again.Wait(ctx), twophase.ReasonLost, "b")
	})
}

func TestCoordinatorCrashAfterDecision(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 5)
		p, ctx := txPath(t), testCtx(t)
		c, err := twophase.Begin(ctx, sts[0], p, []string{"a", "b"}, later)
		if err != nil {
			t.Fatal(err)
		}
		a, bp := join(t, ctx, sts[1], p, "a"), join(t, ctx, sts[2], p, "b")
		vote(t, ctx, a, true)
		if err := c.Abort(ctx); err != nil {
			t.Fatalf("Abort = %v", err)
		}
		b.Expire(t, sts[0]) // the coordinator crashes once it decided
		wantAbort(t, "a's Wait", a.Wait(ctx), twophase.ReasonCoordinator, "")
		if err := bp.Vote(ctx, true); err != nil {
			t.Errorf("b's Vote after the decision = %v; want nil (recorded, no effect)", err)
		}
		wantAbort(t, "b's Wait", bp.Wait(ctx), twophase.ReasonCoordinator, "")
		// a restarts: its vote stands and it learns the outcome again.
		sts[1].Close()
		again := join(t, ctx, sts[3], p, "a")
		if err := again.Vote(ctx, false); !errors.Is(err, twophase.ErrVoted) {
			t.Errorf("Vote after a restart = %v; want ErrVoted", err)
		}
		wantAbort(t, "a's Wait after a restart", again.Wait(ctx), twophase.ReasonCoordinator, "")
		wantAbort(t, "Await", twophase.Await(ctx, sts[4], p), twophase.ReasonCoordinator, "")
	})
}

// TestCoordinatorCrashBeforeDecision: without a coordinator the last voter
// commits, or the deadline aborts.
func TestCoordinatorCrashBeforeDecision(t *testing.T) {
	t.Run("last voter commits", func(t *testing.T) {
		backends.Run(t, func(t *testing.T, b storetest.Backend) {
			sts := backends.Open(t, b, 3)
			p, ctx := txPath(t), testCtx(t)
			if _, err := twophase.Begin(ctx, sts[0], p, []string{"a", "b"}, later); err != nil {
				t.Fatal(err)
			}
			b.Expire(t, sts[0])
			a, bp := join(t, ctx, sts[1], p, "a"), join(t, ctx, sts[2], p, "b")
			vote(t, ctx, a, true)
			aWait := backends.Async(func() error { return a.Wait(ctx) })
			pending(t, aWait, "a's Wait before b votes")
			vote(t, ctx, bp, true)
			if err := result(t, aWait, "a's Wait"); err != nil {
				t.Errorf("a's Wait = %v; want commit (nil)", err)
			}
			if err := bp.Wait(ctx); err != nil {
				t.Errorf("b's Wait = %v; want commit (nil)", err)
			}
		})
	})
	t.Run("deadline aborts", func(t *testing.T) {
		backends.Run(t, func(t *testing.T, b storetest.Backend) {
			sts := backends.Open(t, b, 3)
			p, ctx := txPath(t), testCtx(t)
			deadline := time.Now().Add(time.Second)
			if _, err := twophase.Begin(ctx, sts[0], p, []string{"a", "b"}, deadline); err != nil {
				t.Fatal(err)
			}
			b.Expire(t, sts[0])
			a := join(t, ctx, sts[1], p, "a")
			vote(t, ctx, a, true)
			join(t, ctx, sts[2], p, "b")
			b.Expire(t, sts[2]) // lost, but nobody watches b any more
			wantAbort(t, "a's Wait", a.Wait(ctx), twophase.ReasonDeadline, "")
			if time.Now().Before(deadline) {
				t.Errorf("aborted before the deadline")
			}
		})
	})
}

// parties are a transaction's coordinator and participants.
type parties struct {
	c    *twophase.Coordinator
	a, b *twophase.Participant // nil until joined
}

// TestCoordinatorRestart: a coordinator that crashed (its session ended)
// at any step of the protocol takes its transaction back with Resume, and
// sees it to its end: the outcome every participant sees, and nothing left
// once every party forgot it. Or it abandons it safely: Abort, then Collect.
func TestCoordinatorRestart(t *testing.T) {
	steps := []struct {
		name string
		// before runs before the crash, with the coordinator's session
		// and two participant sessions.
		before func(t *testing.T, ctx context.Context, sts []store.Store, p string, ps *parties)
		// after drives the resumed coordinator to the outcome.
		after   func(t *testing.T, ctx context.Context, sts []store.Store, p string, ps *parties, c *twophase.Coordinator)
		abandon bool
		reason  twophase.Reason // 0: commit
	}{
		{name: "during Begin", before: func(t *testing.T, ctx context.Context, sts []store.Store, p string, ps *parties) {
			// The crash came after the header and slot a: b's slot is
			// missing.
			if err := sts[0].Delete(ctx, p+"/b"); err != nil {
				t.Fatal(err)
			}
		}, after: joinAndCommit},
		{name: "before votes", before: func(*testing.T, context.Context, []store.Store, string, *parties) {}, after: joinAndCommit},
		{name: "before votes, abandoned", before: func(*testing.T, context.Context, []store.Store, string, *parties) {}, abandon: true, reason: twophase.ReasonCoordinator},
		{name: "during votes", before: func(t *testing.T, ctx context.Context, sts []store.Store, p string, ps *parties) {
			ps.a, ps.b = join(t, ctx, sts[1], p, "a"), join(t, ctx, sts[2], p, "b")
			vote(t, ctx, ps.a, true)
		}, after: func(t *testing.T, ctx context.Context, sts []store.Store, p string, ps *parties, c *twophase.Coordinator) {
			wait := backends.Async(func() error { return c.Wait(ctx) })
			pending(t, wait, "the resumed Wait before b votes")
			vote(t, ctx, ps.b, true)
			if err := result(t, wait, "the resumed Wait"); err != nil {
				t.Errorf("the resumed Wait = %v; want commit (nil)", err)
			}
		}},
		{name: "during votes, abandoned", before: func(t *testing.T, ctx context.Context, sts []store.Store, p string, ps *parties) {
			ps.a, ps.b = join(t, ctx, sts[1], p, "a"), join(t, ctx, sts[2], p, "b")
			vote(t, ctx, ps.a, true)
		}, abandon: true, reason: twophase.ReasonCoordinator},
		{name: "after votes", before: func(t *testing.T, ctx context.Context, sts []store.Store, p string, ps *parties) {
			ps.a, ps.b = join(t, ctx, sts[1], p, "a"), join(t, ctx, sts[2], p, "b")
			vote(t, ctx, ps.a, true)
			vote(t, ctx, ps.b, true) // the last voter decides commit
		}, after: func(t *testing.T, ctx context.Context, _ []store.Store, _ string, _ *parties, c *twophase.Coordinator) {
			if err := c.Wait(ctx); err != nil {
				t.Errorf("the resumed Wait = %v; want commit (nil)", err)
			}
		}},
		{name: "after the decision", before: func(t *testing.T, ctx context.Context, sts []store.Store, p string, ps *parties) {
			ps.a = join(t, ctx, sts[1], p, "a")
			vote(t, ctx, ps.a, true)
			if err := ps.c.Abort(ctx); err != nil {
				t.Fatal(err)
			}
		}, after: func(t *testing.T, ctx context.Context, sts []store.Store, p string, ps *parties, c *twophase.Coordinator) {
			wantAbort(t, "the resumed Wait", c.Wait(ctx), twophase.ReasonCoordinator, "")
			ps.b = join(t, ctx, sts[2], p, "b") // late: it learns the outcome
		}, reason: twophase.ReasonCoordinator},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			backends.Run(t, func(t *testing.T, b storetest.Backend) {
				sts := backends.Open(t, b, 4)
				p, ctx := txPath(t), testCtx(t)
				c, err := twophase.Begin(ctx, sts[0], p, []string{"a", "b"}, later)
				if err != nil {
					t.Fatal(err)
				}
				ps := &parties{c: c}
				step.before(t, ctx, sts, p, ps)
				b.Expire(t, sts[0]) // the crash
				if _, err := twophase.Begin(ctx, sts[3], p, []string{"a", "b"}, later); !errors.Is(err, twophase.ErrExists) {
					t.Errorf("Begin after the crash = %v; want ErrExists", err)
				}
				rc, err := twophase.Resume(ctx, sts[3], p)
				if err != nil {
					t.Fatalf("Resume = %v", err)
				}
				if rc.ID() != c.ID() || rc.Path() != p {
					t.Errorf("Resume: ID, Path = %q, %q; want %q, %q", rc.ID(), rc.Path(), c.ID(), p)
				}
				if step.abandon {
					if err := rc.Abort(ctx); err != nil {
						t.Fatalf("Abort of the resumed = %v", err)
					}
				} else {
					step.after(t, ctx, sts, p, ps, rc)
				}
				// Every party sees the same outcome.
				for _, pt := range []*twophase.Participant{ps.a, ps.b} {
					if pt == nil {
						continue
					}
					if got := pt.Wait(ctx); step.reason == 0 && got != nil {
						t.Errorf("%s's Wait = %v; want commit (nil)", pt.Name(), got)
					} else if step.reason != 0 {
						wantAbort(t, pt.Name()+"'s Wait", got, step.reason, "")
					}
				}
				if step.abandon {
					if err := twophase.Collect(ctx, sts[3], p); err != nil {
						t.Fatalf("Collect = %v", err)
					}
				} else {
					forgetAll(t, ctx, rc, ps)
				}
				if _, err := sts[3].Get(ctx, p); !errors.Is(err, store.ErrNoNode) {
					t.Errorf("Get(transaction) at the end = %v; want ErrNoNode", err)
				}
			})
		})
	}
}

// joinAndCommit joins both participants (after the coordinator's restart)
// and votes commit, and checks the resumed coordinator sees the commit.
func joinAndCommit(t *testing.T, ctx context.Context, sts []store.Store, p string, ps *parties, c *twophase.Coordinator) {
	ps.a, ps.b = join(t, ctx, sts[1], p, "a"), join(t, ctx, sts[2], p, "b")
	vote(t, ctx, ps.a, true)
	vote(t, ctx, ps.b, true)
	if err := c.Wait(ctx); err != nil {
		t.Errorf("the resumed Wait = %v; want commit (nil)", err)
	}
}

// forgetAll has every party of ps but the crashed coordinator, and the
// resumed one, forget the transaction.
func forgetAll(t *testing.T, ctx context.Context, c *twophase.Coordinator, ps *parties) {
	t.Helper()
	if err := c.Forget(ctx); err != nil {
		t.Errorf("the resumed Forget = %v", err)
	}
	for _, pt := range []*twophase.Participant{ps.a, ps.b} {
		if pt == nil {
			continue
		}
		if err := pt.Forget(ctx); err != nil {
			t.Errorf("%s's Forget = %v", pt.Name(), err)
		}
	}
}

func TestDeadline(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 3)
		p, ctx := txPath(t), testCtx(t)
		deadline := time.Now().Add(500 * time.Millisecond)
		c, err := twophase.Begin(ctx, sts[0], p, []string{"a", "b"}, deadline)
		if err != nil {
			t.Fatal(err)
		}
		a := join(t, ctx, sts[1], p, "a")
		vote(t, ctx, a, true)
		decided := backends.Async(func() error { return c.Wait(ctx) })
		observed := backends.Async(func() error { return twophase.Await(ctx, sts[2], p) })
		wantAbort(t, "coordinator's Wait", result(t, decided, "coordinator's Wait"), twophase.ReasonDeadline, "")
		wantAbort(t, "Await", result(t, observed, "Await"), twophase.ReasonDeadline, "")
		if time.Now().Before(deadline) {
			t.Errorf("aborted before the deadline")
		}
		// b comes too late: Join reports the outcome.
		_, err = twophase.Join(ctx, sts[2], p, "b")
		if err != nil {
			t.Fatalf("Join after the decision = %v", err)
		}
	})
}

// TestJoinBeforeSlot: a participant whose slot Begin never made (the
// coordinator crashed after the header) waits for it, and learns the abort
// at the deadline.
func TestJoinBeforeSlot(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		p, ctx := txPath(t), testCtx(t)
		if _, err := twophase.Begin(ctx, sts[0], p, []string{"a", "b"}, time.Now().Add(500*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if err := sts[0].Delete(ctx, p+"/b"); err != nil {
			t.Fatal(err)
		}
		_, err := twophase.Join(ctx, sts[1], p, "b")
		wantAbort(t, "Join without a slot until the deadline", err, twophase.ReasonDeadline, "")
	})
}

func TestForget(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 3)
		p, ctx := txPath(t), testCtx(t)
		c, err := twophase.Begin(ctx, sts[0], p, []string{"a", "b"}, later)
		if err != nil {
			t.Fatal(err)
		}
		a, bp := join(t, ctx, sts[1], p, "a"), join(t, ctx, sts[2], p, "b")
		if err := a.Forget(ctx); !errors.Is(err, twophase.ErrUndecided) {
			t.Errorf("Forget before the decision = %v; want ErrUndecided", err)
		}
		if err := twophase.Collect(ctx, sts[0], p); !errors.Is(err, twophase.ErrUndecided) {
			t.Errorf("Collect before the decision = %v; want ErrUndecided", err)
		}
		vote(t, ctx, a, true)
		vote(t, ctx, bp, true)
		if err := c.Wait(ctx); err != nil {
			t.Fatalf("Wait = %v", err)
		}
		// Each party forgets; until the last, the outcome can be read.
		for _, forget := range []func(context.Context) error{a.Forget, c.Forget} {
			if err := forget(ctx); err != nil {
				t.Fatalf("Forget = %v", err)
			}
			if err := twophase.Await(ctx, sts[0], p); err != nil {
				t.Errorf("Await before the last Forget = %v; want commit (nil)", err)
			}
		}
		if err := bp.Forget(ctx); err != nil {
			t.Fatalf("last Forget = %v", err)
		}
		if _, err := sts[0].Get(ctx, p); !errors.Is(err, store.ErrNoNode) {
			t.Errorf("Get(transaction) after every Forget = %v; want ErrNoNode", err)
		}
		if err := twophase.Await(ctx, sts[0], p); !errors.Is(err, twophase.ErrNoTransaction) {
			t.Errorf("Await after every Forget = %v; want ErrNoTransaction", err)
		}
		if err := c.Forget(ctx); err != nil {
			t.Errorf("Forget again = %v; want nil", err)
		}

		// A janitor collects a decided transaction whatever its parties do.
		p2 := p + "-2"
		c2, err := twophase.Begin(ctx, sts[0], p2, []string{"a", "b"}, later)
		if err != nil {
			t.Fatal(err)
		}
		join(t, ctx, sts[1], p2, "a") // and never forgets
		if err := c2.Abort(ctx); err != nil {
			t.Fatal(err)
		}
		if err := twophase.Collect(ctx, sts[2], p2); err != nil {
			t.Fatalf("Collect = %v", err)
		}
		if _, err := sts[0].Get(ctx, p2); !errors.Is(err, store.ErrNoNode) {
			t.Errorf("Get(transaction) after Collect = %v; want ErrNoNode", err)
		}
	})
}

func TestMisuse(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		p, ctx := txPath(t), testCtx(t)
		c, err := twophase.Begin(ctx, sts[0], p, []string{"a"}, later)
		if err != nil {
			t.Fatal(err)
		}
		a := join(t, ctx, sts[1], p, "a")
		vote(t, ctx, a, true)
		tests := []struct {
			name string
			err  error
			want error
		}{
			{"Begin again", func() error { _, err := twophase.Begin(ctx, sts[0], p, []string{"a"}, later); return err }(), twophase.ErrExists},
			{"Begin without participants", func() error { _, err := twophase.Begin(ctx, sts[0], p+"x", nil, later); return err }(), store.ErrInvalidArgument},
			{"Begin with a repeated participant", func() error { _, err := twophase.Begin(ctx, sts[0], p+"x", []string{"a", "a"}, later); return err }(), store.ErrInvalidArgument},
			{"Begin with a bad name", func() error { _, err := twophase.Begin(ctx, sts[0], p+"x", []string{"a/b"}, later); return err }(), store.ErrInvalidArgument},
			{"Begin without deadline", func() error { _, err := twophase.Begin(ctx, sts[0], p+"x", []string{"a"}, time.Time{}); return err }(), store.ErrInvalidArgument},
			{"Join a stranger", func() error { _, err := twophase.Join(ctx, sts[1], p, "z"); return err }(), twophase.ErrNotParticipant},
			{"Join nothing", func() error { _, err := twophase.Join(ctx, sts[1], p+"x", "a"); return err }(), twophase.ErrNoTransaction},
			{"Vote twice", a.Vote(ctx, false), twophase.ErrVoted},
			{"Abort after commit", c.Abort(ctx), twophase.ErrCommitted},
			{"Await nothing", twophase.Await(ctx, sts[1], p+"x"), twophase.ErrNoTransaction},
			{"Resume nothing", func() error { _, err := twophase.Resume(ctx, sts[1], p+"x"); return err }(), twophase.ErrNoTransaction},
			{"Resume the root", func() error { _, err := twophase.Resume(ctx, sts[1], "/"); return err }(), twophase.ErrNoTransaction},
			{"Resume a bad path", func() error { _, err := twophase.Resume(ctx, sts[1], p+"/"); return err }(), store.ErrInvalidPath},
		}
		for _, tt := range tests {
			if !errors.Is(tt.err, tt.want) {
				t.Errorf("%s = %v; want %v", tt.name, tt.err, tt.want)
			}
		}
		if _, err := sts[0].Get(ctx, p+"x"); !errors.Is(err, store.ErrNoNode) {
			t.Errorf("a refused Begin left a node: %v", err)
		}
	})
}

// TestNilAndZero: a nil store and nil or zero Coordinators and
// Participants are store.ErrInvalidArgument, never a panic.
func TestNilAndZero(t *testing.T) {
	ctx, p := testCtx(t), "/twophasetest/nil"
	var nilC *twophase.Coordinator
	var nilP *twophase.Participant
	calls := map[string]func() error{
		"Begin(nil store)": func() error { _, err := twophase.Begin(ctx, nil, p, []string{"a"}, later); return err },
		"Join(nil store)":  func() error { _, err := twophase.Join(ctx, nil, p, "a"); return err },
		"Resume(nil store)": func() error {
			_, err := twophase.Resume(ctx, nil, p)
			return err
		},
		"Await(nil store)":      func() error { return twophase.Await(ctx, nil, p) },
		"Collect(nil store)":    func() error { return twophase.Collect(ctx, nil, p) },
		"nil Coordinator.Wait":  func() error { return nilC.Wait(ctx) },
		"nil Coordinator.Abort": func() error { return nilC.Abort(ctx) },
		"nil Coordinator.Forget": func() error {
			return nilC.Forget(ctx)
		},
		"zero Coordinator.Wait":  func() error { return new(twophase.Coordinator).Wait(ctx) },
		"zero Coordinator.Abort": func() error { return new(twophase.Coordinator).Abort(ctx) },
		"zero Coordinator.Forget": func() error {
			return new(twophase.Coordinator).Forget(ctx)
		},
		"nil Participant.Vote":    func() error { return nilP.Vote(ctx, true) },
		"nil Participant.Wait":    func() error { return nilP.Wait(ctx) },
		"nil Participant.Forget":  func() error { return nilP.Forget(ctx) },
		"zero Participant.Vote":   func() error { return new(twophase.Participant).Vote(ctx, true) },
		"zero Participant.Wait":   func() error { return new(twophase.Participant).Wait(ctx) },
		"zero Participant.Forget": func() error { return new(twophase.Participant).Forget(ctx) },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			if err := call(); !errors.Is(err, store.ErrInvalidArgument) {
				t.Errorf("%s = %v; want store.ErrInvalidArgument", name, err)
			}
		})
	}
	if nilC.Path() != "" || nilP.Name() != "" {
		t.Errorf("nil Path, Name = %q, %q; want empty", nilC.Path(), nilP.Name())
	}
	var nilAbort *twophase.AbortError
	if nilAbort.Error() == "" {
		t.Errorf("nil AbortError.Error() is empty")
	}
}

// TestCancelLeavesNoNode: a Join given up at any moment leaves no alive
// node; a Begin given up leaves no transaction, or an aborted one.
func TestCancelLeavesNoNode(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		sts := backends.Open(t, b, 2)
		p, ctx := txPath(t), testCtx(t)
		if _, err := twophase.Begin(ctx, sts[0], p, []string{"a"}, later); err != nil {
			t.Fatal(err)
		}
		joined := 0
		for i := range 15 {
			jctx, cancel := context.WithTimeout(ctx, time.Duration(rand.IntN(3000))*time.Microsecond)
			_, err := twophase.Join(jctx, sts[1], p, "a")
			cancel()
			if err == nil {
				joined++ // its alive node stays, as for a participant that restarted
			} else if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("round %d: Join = %v; want context.DeadlineExceeded", i, err)
			}
			// Exactly the alive nodes of the Joins that returned one.
			backends.WaitChildren(t, sts[0], p+"/a", backends.Count(joined))
		}

		for i := range 15 {
			q := fmt.Sprintf("%s-begin-%d", p, i)
			bctx, cancel := context.WithTimeout(ctx, time.Duration(rand.IntN(5000))*time.Microsecond)
			_, err := twophase.Begin(bctx, sts[0], q, []string{"a", "b", "c"}, later)
			cancel()
			if err == nil {
				continue
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("round %d: Begin = %v; want context.DeadlineExceeded", i, err)
			}
			// What is left must be nothing, or an aborted transaction
			// (a participant could have joined).
			if _, err := sts[0].Get(ctx, q); err == nil {
				actx, cancel := context.WithTimeout(ctx, time.Second)
				err := twophase.Await(actx, sts[0], q)
				cancel()
				if !errors.Is(err, twophase.ErrAborted) {
					t.Errorf("round %d: a cancelled Begin left a transaction: Await = %v; want it aborted", i, err)
				}
			}
		}
	})
}
