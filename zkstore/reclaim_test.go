package zkstore_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/reclaim"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/tcpproxy"
	"github.com/corral-go/corral/internal/testing/zkbackend"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/zkstore"
)

// TestReclaimRoundTrips counts the round trips of a lock's cycle (create
// and list, then delete) with no reclaim delay, its directory going right
// behind its last node: about as many as before directories were
// reclaimed. A name used again and again pays one round trip per
// step, its directory made again ahead of the node's create; a new name
// pays what it always paid (the create that finds no directory, the
// directory's, the create and list again, the delete); and a directory a
// contender is still in stays.
func TestReclaimRoundTrips(t *testing.T) {
	_, b := server(t)
	st, _ := b.OpenWithProxies(t, zkstore.WithReclaimDelay(0))
	ctx, root := ctxFor(t), dirFor(t)
	must[store.Node](t)(st.Create(ctx, root, nil, store.Persistent))

	cycle := func(name string) int64 {
		t.Helper()
		before := zkstore.Rounds(st)
		n, _, err := st.CreateAndList(ctx, name+"/lock-", nil, store.EphemeralSequential)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Delete(ctx, n.Path); err != nil {
			t.Fatal(err)
		}
		rounds := zkstore.Rounds(st) - before
		if _, err := st.Get(ctx, name); !errors.Is(err, store.ErrNoNode) {
			t.Fatalf("Get(%q) after its last node's delete = %v; want ErrNoNode", name, err)
		}
		return rounds
	}

	// A request goes out behind another only when the Store's goroutine
	// runs before the first one's answer is in; on a loaded machine some
	// do not, so the counts are totals over many cycles, with room for a
	// few such misses below what a Store that never sends the directory's
	// requests ahead needs (3 and 4 round trips).
	const cycles = 20
	hot := root + "/hot"
	cycle(hot) // the first also reads root, to learn that Create did not make it
	var same, fresh int64
	for range cycles {
		same += cycle(hot)
	}
	if same > cycles*5/2 {
		t.Errorf("%d cycles on the same name: %d round trips; want about 2 each (create+list, delete)", cycles, same)
	}
	// A new name's listing goes out behind the create that finds no
	// directory, and is sent again after the directory's create and the
	// node's: 5 round trips, as before directories were reclaimed; a
	// directory read and deleted after the node's delete would make 7.
	for i := range cycles {
		fresh += cycle(fmt.Sprintf("%s/e-%d", root, i))
	}
	if fresh > cycles*11/2 {
		t.Errorf("%d cycles on new names: %d round trips; want at most 5 each, as before directories were reclaimed", cycles, fresh)
	}
	t.Logf("round trips of %d cycles: on one name %d, on new names %d", cycles, same, fresh)

	// A contender in the directory keeps it: the delete that goes right
	// behind the holder's fails harmlessly.
	other, _ := b.OpenWithProxies(t, zkstore.WithReclaimDelay(0))
	dir := root + "/shared"
	a := must[store.Node](t)(st.Create(ctx, dir+"/lock-", nil, store.EphemeralSequential))
	c := must[store.Node](t)(other.Create(ctx, dir+"/lock-", nil, store.EphemeralSequential))
	if err := st.Delete(ctx, a.Path); err != nil {
		t.Fatal(err)
	}
	if kids, err := other.Children(ctx, dir); err != nil || len(kids) != 1 || kids[0].Name != c.Name() {
		t.Fatalf("Children(%q) after the holder left = %v, %v; want the contender's node alone", dir, kids, err)
	}
	if err := other.Delete(ctx, c.Path); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, dir); !errors.Is(err, store.ErrNoNode) {
		t.Fatalf("Get(%q) after the contender left = %v; want ErrNoNode", dir, err)
	}
}

// TestReclaimLater: with a reclaim delay, a name used again within it keeps
// its directory and costs what it cost before directories were reclaimed
// (2 round trips a cycle, no directory created or deleted); a directory
// left alone goes by itself once the delay is up; and Close removes those
// still due, for a delay longer than the session.
func TestReclaimLater(t *testing.T) {
	// A server of its own whose reaper waits an hour: the shared one's
	// reaps every second and may take the hot directory, empty between
	// two cycles, first (then the next cycle makes it again, as it should,
	// but the check below would blame the Store).
	zkserver.Require(t)
	b := zkbackend.New([]string{zkserver.ForTest(t, zkserver.Config{ContainerCheck: time.Hour}).Addr()})
	ctx, root := ctxFor(t), dirFor(t)
	long, _ := b.OpenWithProxies(t, zkstore.WithReclaimDelay(time.Hour))
	short, _ := b.OpenWithProxies(t, zkstore.WithReclaimDelay(50*time.Millisecond))
	watcher := b.Open(t)
	must[store.Node](t)(watcher.Create(ctx, root, nil, store.Persistent))

	cycle := func(st *zkstore.Store, name string) {
		t.Helper()
		n, _, err := st.CreateAndList(ctx, name+"/lock-", nil, store.EphemeralSequential)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Delete(ctx, n.Path); err != nil {
			t.Fatal(err)
		}
	}
	hot := root + "/hot"
	cycle(long, hot)
	const cycles = 20
	before := zkstore.Rounds(long)
	for range cycles {
		cycle(long, hot)
		if _, err := watcher.Get(ctx, hot); err != nil {
			t.Fatalf("Get(%q) within the delay = %v; want the directory kept", hot, err)
		}
	}
	if got := zkstore.Rounds(long) - before; got > cycles*5/2 {
		t.Errorf("%d cycles on a name in use: %d round trips; want about 2 each", cycles, got)
	}

	idle := root + "/idle"
	cycle(short, idle)
	backends.WaitGone(t, watcher, idle)

	// Close removes what is due within the hour.
	for i := range 3 {
		cycle(long, fmt.Sprintf("%s/e-%d", root, i))
	}
	if err := long.Close(); err != nil {
		t.Fatal(err)
	}
	if kids, err := watcher.Children(ctx, root); err != nil || len(kids) != 0 {
		t.Errorf("Children(%q) after Close = %v, %v; want none", root, kids, err)
	}
}

// TestGetSeqToken: Get of a sequential node reads its directory's creation
// zxid behind the node's read, in the same round trip, for the fencing
// token CreateAndList gave it; in a directory made again the token is
// above every token of the one before.
func TestGetSeqToken(t *testing.T) {
	_, b := server(t)
	st, _ := b.OpenWithProxies(t, zkstore.WithReclaimDelay(0))
	ctx, dir := ctxFor(t), dirFor(t)+"/l"
	n, _, err := st.CreateAndList(ctx, dir+"/c-", nil, store.EphemeralSequential)
	if err != nil {
		t.Fatal(err)
	}
	if n.Token == 0 {
		t.Fatalf("CreateAndList(%q) = %+v; want a fencing token", dir, n)
	}
	const gets = 20
	before := zkstore.Rounds(st)
	for range gets {
		got := must[store.Node](t)(st.Get(ctx, n.Path))
		if got.Token != n.Token {
			t.Fatalf("Get(%q).Token = %d; want %d, as CreateAndList gave it", n.Path, got.Token, n.Token)
		}
	}
	// As in TestReclaimRoundTrips: a request goes out behind another only
	// when the Store's goroutine runs in time, so allow a few misses below
	// the 2 round trips each of a Get that waits for the node's reply.
	if rounds := zkstore.Rounds(st) - before; rounds > gets*3/2 {
		t.Errorf("%d Gets of a sequential node: %d round trips; want about 1 each", gets, rounds)
	}
	if err := st.Delete(ctx, n.Path); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, dir); !errors.Is(err, store.ErrNoNode) {
		t.Fatalf("Get(%q) after its last node's delete = %v; want ErrNoNode", dir, err)
	}
	m := must[store.Node](t)(st.Create(ctx, dir+"/c-", nil, store.EphemeralSequential))
	got := must[store.Node](t)(st.Get(ctx, m.Path))
	if got.Token <= n.Token {
		t.Errorf("Get(%q).Token = %d in the directory made again; want above %d, the token in the one before", m.Path, got.Token, n.Token)
	}
}

// TestCutReclaimed: a directory left behind by a request that met a lost
// connection is taken back once the connection allows. ZooKeeper's reaper
// never takes a container that never had a child (unless set to), and
// this server's reaper waits an hour, so nothing else would take it:
//   - parents: a create whose connection is lost while it makes the
//     missing directories above its node, after some and before the node,
//     hands those it made to the reclaimer;
//   - removal: an emptied directory whose removal meets a lost connection
//     (its delete, right behind the node's with no reclaim delay; its
//     delete and then the read that checks it again, with one) is tried
//     again, no sooner than reclaim.RetryDelay.
func TestCutReclaimed(t *testing.T) {
	zkserver.Require(t)
	srv := zkserver.ForTest(t, zkserver.Config{ContainerCheck: time.Hour})
	watcher := zkbackend.New([]string{srv.Addr()}).Open(t)
	root := dirFor(t)
	must[store.Node](t)(watcher.Create(ctxFor(t), root, nil, store.Persistent))
	// cutAt cuts the connection of p at the nth request of each opcode of
	// cuts on path, that request lost; it reports whether it has cut them
	// all.
	cutAt := func(p *tcpproxy.Proxy, path string, nth int32, cuts ...int32) func() bool {
		// A request's path is its length, then its bytes.
		want := binary.BigEndian.AppendUint32(nil, uint32(len(path)))
		want = append(want, path...)
		seen := make([]atomic.Int32, len(cuts))
		p.SetHook(tcpproxy.LengthPrefixed, func(m tcpproxy.Message) tcpproxy.Action {
			_, op, ok := zkserver.RequestHeader(m.Data)
			if m.Index == 0 || m.Dir != tcpproxy.Upstream || !ok || !bytes.Contains(m.Data, want) {
				return tcpproxy.Forward
			}
			for i, c := range cuts {
				if op == c && seen[i].Add(1) == nth {
					return tcpproxy.Cut
				}
			}
			return tcpproxy.Forward
		})
		return func() bool {
			for i := range seen {
				if seen[i].Load() < nth {
					return false
				}
			}
			return true
		}
	}
	for _, delay := range []time.Duration{0, 50 * time.Millisecond} {
		t.Run(fmt.Sprint("parents, delay ", delay), func(t *testing.T) {
			ctx := ctxFor(t)
			dir := fmt.Sprintf("%s/p%d", root, delay.Milliseconds())
			st, p, _ := openHooked(t, ctx, srv.Addr(), zkstore.WithReclaimDelay(delay))
			// makeParents tries dir/a/b first, finds dir/a missing, makes
			// dir and dir/a, then tries dir/a/b again: that one is cut.
			cut := cutAt(p, dir+"/a/b", 2, zkserver.OpCreateContainer)
			_, err := st.Create(ctx, dir+"/a/b/n", nil, store.Persistent)
			if !cut() {
				t.Fatalf("Create(%s/a/b/n) = %v, and never made %s/a/b again", dir, err, dir)
			}
			if !errors.Is(err, store.ErrDisconnected) {
				t.Fatalf("Create(%s/a/b/n) with the connection lost = %v; want ErrDisconnected", dir, err)
			}
			backends.WaitGone(t, watcher, dir)
		})
		t.Run(fmt.Sprint("removal, delay ", delay), func(t *testing.T) {
			ctx := ctxFor(t)
			dir := fmt.Sprintf("%s/r%d", root, delay.Milliseconds())
			st, p, _ := openHooked(t, ctx, srv.Addr(), zkstore.WithReclaimDelay(delay))
			n := must[store.Node](t)(st.Create(ctx, dir+"/n", nil, store.Persistent))
			cuts := []int32{zkserver.OpDelete}
			if delay > 0 {
				cuts = append(cuts, zkserver.OpGetData)
			}
			cut := cutAt(p, dir, 1, cuts...)
			start := time.Now()
			err := st.Delete(ctx, n.Path)
			// With no reclaim delay the directory's delete goes right
			// behind the node's, and the cut may take the node's too
			// (the proxy's close resets the server's side before it
			// read it): then the node is deleted again, and that delete
			// takes the directory along, with no retry to check.
			deletedAgain := false
			for err != nil && !errors.Is(err, store.ErrNoNode) {
				if !errors.Is(err, store.ErrDisconnected) {
					t.Fatalf("Delete(%s) = %v; want nil or ErrDisconnected", n.Path, err)
				}
				deletedAgain = true
				err = st.Delete(ctx, n.Path)
			}
			backends.WaitGone(t, watcher, dir)
			if !cut() {
				t.Fatal("the removal of the directory was never cut")
			}
			if took := time.Since(start); !deletedAgain && took < reclaim.RetryDelay {
				t.Errorf("directory gone %v after its removal was cut; want a retry no sooner than %v", took, reclaim.RetryDelay)
			}
		})
	}
}
