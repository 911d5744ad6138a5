package election_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// TestDirectoryReclaimed: once every candidate resigned, nothing of the
// election is left, and a new term still gets a greater token.
func TestDirectoryReclaimed(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st, ctx, root := open(t, b), ctxFor(t), dir(t)
		if _, err := st.Create(ctx, root, nil, store.Persistent); err != nil {
			t.Fatal(err)
		}
		var last int64
		for i := range 3 {
			l, err := election.New(st, root+"/shard-7/leader").Campaign(ctx, []byte("a"))
			if err != nil {
				t.Fatal(err)
			}
			if tok := l.Token(); tok <= last {
				t.Errorf("term %d: Token() = %d; want > %d, across the directory's removal", i, tok, last)
			}
			last = l.Token()
			if err := l.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			backends.WaitChildren(t, st, root, backends.Count(0))
		}
	})
}

// TestCandidateCloseLeavesNothing: a candidate closed right after it
// resigned, as it campaigns again, leaves nothing behind once Close has
// returned, on sessions that remove an emptied directory at once: not its
// node, and not the directory its next create found gone (the resignation
// took it) and made again just as Close called the create off.
func TestCandidateCloseLeavesNothing(t *testing.T) {
	backends.RunEager(t, func(t *testing.T, b storetest.Backend) {
		st, ctx := open(t, b), ctxFor(t)
		for i := range 50 {
			p := fmt.Sprintf("%s/%d/leader", dir(t), i)
			c := election.New(st, p).Candidate(ctx, []byte("a"))
			l, ok := <-c.Terms()
			if !ok {
				t.Fatalf("round %d: no term: %v", i, c.Err())
			}
			if err := l.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{p, store.Parent(p)} {
				if _, err := st.Get(ctx, q); !errors.Is(err, store.ErrNoNode) {
					t.Fatalf("round %d: Get(%s) after Close = %v; want ErrNoNode", i, q, err)
				}
			}
		}
	})
}
