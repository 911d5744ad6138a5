package sync_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
)

// TestReclaimCycles runs recipes on distinct names, at 1 and at 8 sessions,
// and checks that the store holds as many nodes (etcd: keys, the adapter's
// own included) afterwards as before: nothing is left behind by use.
// CORRAL_RECLAIM_N sets the Mutex's number of cycles (the other recipes run
// a tenth of it); the default is small, for CI. Run with -v for the table:
//
//	CORRAL_RECLAIM_N=100000 go test -v -count=1 -timeout=2h -run TestReclaimCycles ./sync/
func TestReclaimCycles(t *testing.T) {
	n := 200
	if v := os.Getenv("CORRAL_RECLAIM_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 10 {
			t.Fatalf("CORRAL_RECLAIM_N=%q: want a number of at least 10", v)
		}
	}
	type recipeRun struct {
		name   string
		cycles int
		use    func(ctx context.Context, st store.Store, p string) error
	}
	runs := []recipeRun{
		{"Mutex", n, func(ctx context.Context, st store.Store, p string) error {
			m := sync.NewMutex(st, p)
			if err := m.Lock(ctx); err != nil {
				return err
			}
			return m.Unlock(ctx)
		}},
		{"RWMutex", n / 10, func(ctx context.Context, st store.Store, p string) error {
			rw := sync.NewRWMutex(st, p)
			r, err := rw.RLock(ctx)
			if err != nil {
				return err
			}
			return r.Unlock(ctx)
		}},
		{"MultiMutex", n / 10, func(ctx context.Context, st store.Store, p string) error {
			m := sync.NewMultiMutex(st, []string{p + "/a", p + "/b"})
			if err := m.Lock(ctx); err != nil {
				return err
			}
			return m.Unlock(ctx)
		}},
		{"Barrier", n / 10, func(ctx context.Context, st store.Store, p string) error {
			b := sync.NewBarrier(st, p)
			if err := b.Set(ctx); err != nil {
				return err
			}
			return b.Remove(ctx)
		}},
		{"election", n / 10, func(ctx context.Context, st store.Store, p string) error {
			l, err := election.New(st, p).Campaign(ctx, []byte("v"))
			if err != nil {
				return err
			}
			return l.Resign(ctx)
		}},
	}
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, r := range runs {
			for _, sessions := range []int{1, 8} {
				t.Run(fmt.Sprintf("%s/%d", r.name, sessions), func(t *testing.T) {
					sts := backends.Open(t, b, sessions)
					ctx := t.Context()
					// The names live in a directory the application made,
					// as a service makes its "/locks": each cycle makes and
					// reclaims its own directory only.
					root := lockPath(t)
					if _, err := sts[0].Create(ctx, root, nil, store.Persistent); err != nil {
						t.Fatal(err)
					}
					before := count(t, b, sts[0])
					start := time.Now()
					var (
						wg      gosync.WaitGroup
						retries atomic.Int64
					)
					errs := make(chan error, sessions)
					for s, st := range sts {
						wg.Go(func() {
							for i := s; i < r.cycles; i += sessions {
								err := r.use(ctx, st, fmt.Sprintf("%s/e-%d", root, i))
								if errors.Is(err, store.ErrDisconnected) {
									// An attempt given up on a loaded
									// machine: its outcome is unknown, and
									// it leaves no node behind; the caller
									// tries again (the count below checks it).
									retries.Add(1)
									i -= sessions
									continue
								}
								if err != nil {
									errs <- fmt.Errorf("cycle %d: %w", i, err)
									return
								}
							}
						})
					}
					wg.Wait()
					elapsed := time.Since(start)
					close(errs)
					for err := range errs {
						t.Fatal(err)
					}
					// A store may remove an emptied directory some time
					// after its last node went (zkstore's reclaim delay):
					// wait, on watches, until every name's has gone.
					backends.WaitChildren(t, sts[0], root, backends.Count(0))
					after := count(t, b, sts[0])
					t.Logf("%-10s sessions=%d cycles=%d %.0f cycles/s nodes before=%d after=%d (retried %d)",
						r.name, sessions, r.cycles, float64(r.cycles)/elapsed.Seconds(), before, after, retries.Load())
					if after != before {
						t.Errorf("%d nodes in the store after %d cycles of %s; want %d, as before; below %s: %v",
							after, r.cycles, r.name, before, root, below(t, sts[0], root))
					}
				})
			}
		}
	})
}

// count returns the number of nodes in the store: on etcd every key,
// the adapter's own included; elsewhere every node below the root.
func count(t *testing.T, b storetest.Backend, st store.Store) int {
	t.Helper()
	if eb, ok := b.(*etcdbackend.Backend); ok {
		resp, err := eb.Cluster().Client(t).Get(t.Context(), "\x00", clientv3.WithFromKey(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return int(resp.Count)
	}
	var walk func(p string) int
	walk = func(p string) int {
		kids, err := st.Children(t.Context(), p)
		if err != nil {
			return 0 // gone meanwhile
		}
		c := len(kids)
		for _, k := range kids {
			c += walk(store.Join(p, k.Name))
		}
		return c
	}
	return walk("/")
}

// below returns the paths of every node below p, to tell what was left.
func below(t *testing.T, st store.Store, p string) []string {
	t.Helper()
	var out []string
	kids, _ := st.Children(t.Context(), p)
	for _, k := range kids {
		c := store.Join(p, k.Name)
		out = append(append(out, c), below(t, st, c)...)
	}
	return out
}
