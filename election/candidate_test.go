package election_test

import (
	"context"
	"errors"
	"testing"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// term receives the next term of a candidate.
func term(t *testing.T, what string, c *election.Candidate) *election.Leadership {
	t.Helper()
	l, ok := next(t, what, c.Terms())
	if !ok {
		t.Fatalf("%s: Terms() closed; Err() = %v", what, c.Err())
	}
	return l
}

// TestCandidate follows two long-running candidates through resignation,
// session expiry, deletion of the leader's node and Close.
func TestCandidate(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		path := dir(t)
		ctx := ctxFor(t)
		sa, sb := open(t, b), open(t, b)
		ca := election.New(sa, path).Candidate(ctx, []byte("a"))
		defer ca.Close()
		t1 := term(t, "a's first term", ca)

		cb := election.New(sb, path).Candidate(ctx, []byte("b"))
		defer cb.Close()
		waitCandidates(t, sa, path, 2)

		// a steps down and queues again behind b.
		if err := t1.Resign(ctx); err != nil {
			t.Fatalf("Resign() = %v", err)
		}
		t2 := term(t, "b's term", cb)
		waitCandidates(t, sa, path, 2)

		// b's session ends: b stops for good, a leads again.
		b.Expire(t, sb)
		t3 := term(t, "a's second term", ca)
		if _, ok := next(t, "b's end", cb.Terms()); ok {
			t.Fatal("b's Terms() sent a term after its session expired")
		}
		if err := cb.Err(); !errors.Is(err, store.ErrSessionExpired) {
			t.Errorf("b's Err() after expiry = %v; want %v", err, store.ErrSessionExpired)
		}
		waitDone(t, "b's term", t2)

		// Someone deletes a's node: a campaigns again.
		if err := open(t, b).Delete(ctx, t3.Path()); err != nil {
			t.Fatalf("Delete(%q) = %v", t3.Path(), err)
		}
		t4 := term(t, "a's third term", ca)
		if cause := context.Cause(t3.Context()); !errors.Is(cause, election.ErrNodeDeleted) {
			t.Errorf("cause of a deleted term = %v; want %v", cause, election.ErrNodeDeleted)
		}

		tokens := []int64{t1.Token(), t2.Token(), t3.Token(), t4.Token()}
		for i := 1; i < len(tokens); i++ {
			if tokens[i] <= tokens[i-1] {
				t.Errorf("tokens = %v; want increasing", tokens)
			}
		}

		if err := ca.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
		if _, ok := next(t, "a's end", ca.Terms()); ok {
			t.Error("Terms() open after Close")
		}
		if err := ca.Err(); err != nil {
			t.Errorf("Err() after Close = %v; want nil", err)
		}
		if cause := context.Cause(t4.Context()); !errors.Is(cause, election.ErrResigned) {
			t.Errorf("cause of the term held at Close = %v; want %v", cause, election.ErrResigned)
		}
		if kids := children(t, sa, path); len(kids) != 0 {
			t.Errorf("children after Close = %v; want none", kids)
		}
	})
}

func TestCandidateContext(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		path := dir(t)
		st := open(t, b)
		ctx, cancel := context.WithCancel(t.Context())
		c := election.New(st, path).Candidate(ctx, []byte("a"))
		l := term(t, "term", c)
		cancel()
		if _, ok := next(t, "end", c.Terms()); ok {
			t.Fatal("Terms() sent a term after ctx ended")
		}
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("Err() after cancel = %v; want %v", err, context.Canceled)
		}
		waitDone(t, "term", l)
		if kids := children(t, st, path); len(kids) != 0 {
			t.Errorf("children after cancel = %v; want none", kids)
		}
		if err := c.Close(); err != nil {
			t.Errorf("Close() after cancel = %v", err)
		}
	})
}
