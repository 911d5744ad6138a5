package election_test

import (
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
