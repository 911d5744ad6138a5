package election_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	gosync "sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"
	"golang.org/x/sync/errgroup"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
)

// TestNameReuseEtcd runs corral candidates beside etcd's own
// concurrency.Election clients that resign and campaign again at once, on
// the same session and so under the same key name. corral's sessions read
// every reply a few milliseconds late, so the candidate a corral candidate
// lists in front of it has often resigned and lined up again behind it by the
// time it watches. Waiting for that name instead of that node closes a cycle
// (the test then hangs within a few hundred terms); every candidate must
// finish its rounds with never two leaders at once.
func TestNameReuseEtcd(t *testing.T) {
	if !backends.Selected("etcd") {
		t.Skip("etcd not in CORRAL_STORES")
	}
	eb := backends.Get(t, "etcd").(*etcdbackend.Backend)
	path := dir(t)
	// One candidate a side makes the cycle likeliest: each is the
	// other's predecessor.
	const rounds, perSide = 100, 1
	late := func() time.Duration { return time.Duration(1+rand.IntN(4)) * time.Millisecond }
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	var mu gosync.Mutex
	leaders, terms := 0, 0
	lead := func(who string) {
		mu.Lock()
		defer mu.Unlock()
		if leaders != 0 {
			t.Errorf("%s leads beside %d other leaders", who, leaders)
		}
		leaders++
		terms++
	}
	resign := func() {
		mu.Lock()
		defer mu.Unlock()
		leaders--
	}

	corralDone := make(chan struct{})
	g, gctx := errgroup.WithContext(ctx)
	for i := range perSide {
		sess, err := concurrency.NewSession(eb.Cluster().Client(t), concurrency.WithTTL(10))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.Close() })
		ee := concurrency.NewElection(sess, path)
		g.Go(func() error {
			for {
				select {
				case <-corralDone:
					return nil
				default:
				}
				if err := ee.Campaign(gctx, fmt.Sprint("etcd ", i)); err != nil {
					return fmt.Errorf("concurrency.Election %d: Campaign = %w", i, err)
				}
				lead(fmt.Sprintf("concurrency.Election %d", i))
				resign()
				if err := ee.Resign(context.WithoutCancel(gctx)); err != nil {
					return fmt.Errorf("concurrency.Election %d: Resign = %w", i, err)
				}
			}
		})
	}
	var corral errgroup.Group
	for i := range perSide {
		e := election.New(eb.OpenDelayed(t, late), path)
		corral.Go(func() error {
			for r := range rounds {
				l, err := e.Campaign(gctx, []byte(fmt.Sprint("corral ", i)))
				if err != nil {
					return fmt.Errorf("corral candidate %d, round %d: Campaign = %w", i, r, err)
				}
				lead(fmt.Sprintf("corral candidate %d", i))
				resign()
				if err := l.Resign(gctx); err != nil {
					return fmt.Errorf("corral candidate %d, round %d: Resign = %w", i, r, err)
				}
			}
			return nil
		})
	}
	g.Go(func() error {
		defer close(corralDone)
		return corral.Wait()
	})
	if err := g.Wait(); err != nil {
		t.Fatalf("%v (after %d terms; a deadline here is the deadlock)", err, terms)
	}
}
