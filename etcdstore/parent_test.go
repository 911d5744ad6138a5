package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/store"
)

var seq atomic.Int64

// TestCreateParentMadeAgain: a session whose creates under a parent have
// learned its CreateRevision (they check it with one compare; see
// parentCmps) sees the parent made again by another: persistent, its next
// create is made there; ephemeral, ErrEphemeralParent; gone, it is made
// again as Create makes missing parents. Every kind of create, each on
// its second and later use of the parent.
func TestCreateParentMadeAgain(t *testing.T) {
	c := etcdserver.Start(t, 1)
	b := etcdbackend.New(c)
	creates := []struct {
		name   string
		create func(ctx context.Context, s *etcdstore.Store, dir string) (store.Node, error)
	}{
		{"Create persistent", func(ctx context.Context, s *etcdstore.Store, dir string) (store.Node, error) {
			return s.Create(ctx, fmt.Sprintf("%s/p%d", dir, seq.Add(1)), nil, store.Persistent)
		}},
		{"Create sequential", func(ctx context.Context, s *etcdstore.Store, dir string) (store.Node, error) {
			return s.Create(ctx, dir+"/s-", nil, store.Sequential)
		}},
		{"Create ephemeral sequential", func(ctx context.Context, s *etcdstore.Store, dir string) (store.Node, error) {
			return s.Create(ctx, dir+"/e-", nil, store.EphemeralSequential)
		}},
		{"CreateAndWindow", func(ctx context.Context, s *etcdstore.Store, dir string) (store.Node, error) {
			n, _, _, err := s.CreateAndWindow(ctx, dir+"/w-", nil, store.EphemeralSequential, 2)
			return n, err
		}},
		{"CreateBatch", func(ctx context.Context, s *etcdstore.Store, dir string) (store.Node, error) {
			ns, err := s.CreateBatch(ctx, dir, []store.BatchNode{{Name: "b-"}}, store.Sequential)
			if err != nil {
				return store.Node{}, err
			}
			return ns[0], nil
		}},
	}
	for _, tc := range creates {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := ctxFor(t)
			s, other := open(t, b), open(t, b)
			dir := fmt.Sprintf("/parent-again/%d", seq.Add(1))
			if _, err := s.Create(ctx, dir, nil, store.Persistent); err != nil {
				t.Fatal(err)
			}
			// create makes a node under dir and checks it; again deletes
			// what it made, and dir, and has other make dir again with
			// mode when remake is set.
			var made []store.Node
			create := func(what string) error {
				t.Helper()
				n, err := tc.create(ctx, s, dir)
				if err == nil {
					if store.Parent(n.Path) != dir {
						t.Errorf("%s: %s made %q; want it under %q", what, tc.name, n.Path, dir)
					}
					if _, gerr := other.Get(ctx, n.Path); gerr != nil {
						t.Errorf("%s: Get(%q) made by %s = %v", what, n.Path, tc.name, gerr)
					}
					made = append(made, n)
				}
				return err
			}
			again := func(mode store.Mode, remake bool) {
				t.Helper()
				for _, n := range made {
					if err := s.DeleteSeq(ctx, n.Path, n.Seq); err != nil {
						t.Fatal(err)
					}
				}
				made = nil
				if err := other.Delete(ctx, dir); err != nil && !errors.Is(err, store.ErrNoNode) {
					t.Fatal(err)
				}
				if remake {
					if _, err := other.Create(ctx, dir, nil, mode); err != nil {
						t.Fatal(err)
					}
				}
			}
			for i := range 3 { // learnt by the first
				if err := create(fmt.Sprintf("create %d", i)); err != nil {
					t.Fatalf("create %d = %v", i, err)
				}
			}
			again(store.Persistent, true)
			for i := range 2 {
				if err := create(fmt.Sprintf("persistent parent made again, create %d", i)); err != nil {
					t.Errorf("%s under a parent made again = %v; want a node", tc.name, err)
				}
			}
			again(store.Ephemeral, true)
			if err := create("ephemeral parent"); !errors.Is(err, store.ErrEphemeralParent) {
				t.Errorf("%s under a parent made again ephemeral = %v; want %v", tc.name, err, store.ErrEphemeralParent)
			}
			again(0, false)
			for i := range 2 {
				if err := create(fmt.Sprintf("parent gone, create %d", i)); err != nil {
					t.Errorf("%s under a parent gone = %v; want a node (and the parent made)", tc.name, err)
				}
			}
		})
	}
}
