package partition_test

import (
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// TestFaults: on real servers, a member whose link freezes past its session
// (as a SIGSTOPped process looks to the server) loses its shards before
// anyone else works on them, and a member whose link is cut and restored
// within its session stops its shards and takes them back; at no point do
// two members work on one shard, and tokens only grow (the fence checks
// both at every start of work).
func TestFaults(t *testing.T) {
	const session = 2 * time.Second
	for _, name := range []string{"zk", "etcd"} {
		t.Run(name, func(t *testing.T) {
			if !backends.Selected(name) {
				t.Skipf("%s not in CORRAL_STORES", name)
			}
			short := backends.Short(t, name, session)
			fr := short.(storetest.Freezer)
			const k = 8
			path := dir(t)
			f := newFence()
			defer f.check(t)
			tick := make(chan struct{}, 1)
			var ws []*worker
			var sts []store.Store
			for i := range 3 {
				st := short.Open(t)
				t.Cleanup(func() { _ = st.Close() })
				sts = append(sts, st)
				ws = append(ws, work(join(t, st, path, k, string(rune('a'+i))), f, tick))
			}
			waitBalanced(t, tick, ws, k)

			// The link of b is cut and restored within its session.
			fr.Disconnect(t, sts[1])
			fr.Reconnect(t, sts[1])
			waitBalanced(t, tick, ws, k)

			// a freezes past its session: it stops, the others cover.
			fr.Freeze(t, sts[0])
			select {
			case <-ws[0].m.Done():
			case <-time.After(timeout):
				t.Fatalf("frozen member still running %v after its session", timeout)
			}
			fr.Reconnect(t, sts[0])
			waitBalanced(t, tick, ws[1:], k)
			t.Logf("a stopped with %v", ws[0].m.Err())
			for _, w := range ws {
				_ = w.m.Leave(ctxFor(t))
				<-w.done
			}
		})
	}
}
