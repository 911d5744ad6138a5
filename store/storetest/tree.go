package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-go/corral/store"
)

// The follow of a tree: store.TreeFollower where the session has one
// ("native"), and store.FollowTree's portable follow on one-shot watches,
// on the same session with its capabilities hidden ("watches"): both keep
// the same promises.

// follower is a way to follow a tree on a session.
type follower struct {
	name   string
	follow func(ctx context.Context, st store.Store, p string, depth, limit int) (store.TreeFollow, []store.Node, error)
}

func followers(t *testing.T, st store.Store) []follower {
	fs := []follower{{"watches", func(ctx context.Context, st store.Store, p string, depth, limit int) (store.TreeFollow, []store.Node, error) {
		return store.FollowTree(ctx, portable{st}, p, depth, limit)
	}}}
	if _, ok := st.(store.TreeFollower); ok {
		fs = append(fs, follower{"native", func(ctx context.Context, st store.Store, p string, depth, limit int) (store.TreeFollow, []store.Node, error) {
			return st.(store.TreeFollower).FollowTree(ctx, p, depth, limit)
		}})
	}
	return fs
}

// portable hides the optional capabilities of the store it wraps: it is
// no store.Wrapper, so store.Find finds none of them.
type portable struct{ store.Store }

// eachFollower runs fn as one subtest per follower of a session of s.
func (s *suite) eachFollower(t *testing.T, fn func(t *testing.T, f follower)) {
	probe := s.open(t)
	for _, f := range followers(t, probe) {
		t.Run(f.name, func(t *testing.T) { fn(t, f) })
	}
}

// view is a tree as a follow tells it: the nodes read, then every change.
type view struct {
	t     *testing.T
	nodes map[string]store.Node
}

func newView(t *testing.T, nodes []store.Node) *view {
	t.Helper()
	v := &view{t: t, nodes: map[string]store.Node{}}
	if !slices.IsSortedFunc(nodes, func(a, b store.Node) int { return strings.Compare(a.Path, b.Path) }) {
		t.Errorf("FollowTree's nodes are not sorted by path: %v", paths(nodes))
	}
	for _, n := range nodes {
		v.nodes[n.Path] = n
	}
	return v
}

// apply applies cs, checking that each path's states come in order.
func (v *view) apply(cs []store.TreeChange) {
	v.t.Helper()
	for _, c := range cs {
		p := c.Node.Path
		old, had := v.nodes[p]
		if c.Type == store.EventDeleted {
			if c.Node.Seq != 0 || c.Node.Data != nil || c.Node.Version != 0 {
				v.t.Errorf("deletion of %q carries %+v; want its path alone", p, c.Node)
			}
			delete(v.nodes, p)
			continue
		}
		if c.Type != store.EventCreated && c.Type != store.EventDataChanged {
			v.t.Errorf("change of %q has type %v", p, c.Type)
		}
		if had && old.Seq == c.Node.Seq && old.Created.Equal(c.Node.Created) && c.Node.Version < old.Version {
			v.t.Errorf("change of %q went back from version %d to %d", p, old.Version, c.Node.Version)
		}
		v.nodes[p] = c.Node
	}
}

// until applies the changes of f until the view equals want, or fails.
func (v *view) until(f store.TreeFollow, want map[string]store.Node) {
	v.t.Helper()
	timeout := time.After(Timeout)
	for {
		cs, ready, err := f.Changes()
		v.apply(cs)
		if v.equal(want) {
			return
		}
		if err != nil {
			v.t.Fatalf("follow ended: %v; view %v; want %v", err, keys(v.nodes), keys(want))
		}
		select {
		case <-ready:
		case <-timeout:
			v.t.Fatalf("view %s after %v; want %s", v.diff(want), Timeout, keys(want))
		}
	}
}

func (v *view) equal(want map[string]store.Node) bool {
	return maps.EqualFunc(v.nodes, want, sameNode)
}

func (v *view) diff(want map[string]store.Node) string {
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if n, ok := v.nodes[p]; !ok {
			fmt.Fprintf(&b, " -%s", p)
		} else if !sameNode(n, want[p]) {
			fmt.Fprintf(&b, " ~%s(%+v; want %+v)", p, n, want[p])
		}
	}
	for p := range v.nodes {
		if _, ok := want[p]; !ok {
			fmt.Fprintf(&b, " +%s", p)
		}
	}
	return b.String()
}

// sameNode compares what a follow and Get report of a node (Token aside,
// which Get does not set).
func sameNode(a, b store.Node) bool {
	return a.Path == b.Path && bytes.Equal(a.Data, b.Data) && a.Seq == b.Seq &&
		a.Version == b.Version && a.Owner == b.Owner && a.Created.Equal(b.Created)
}

func keys(m map[string]store.Node) []string { return slices.Sorted(maps.Keys(m)) }

func paths(ns []store.Node) []string {
	ps := make([]string, len(ns))
	for i, n := range ns {
		ps[i] = n.Path
	}
	return ps
}

// subtree reads the nodes at and below p, down to depth, as Get and
// Children find them.
func subtree(t *testing.T, ctx context.Context, st store.Store, p string, depth int) map[string]store.Node {
	t.Helper()
	out := map[string]store.Node{}
	var walk func(p string, d int)
	walk = func(p string, d int) {
		n, err := st.Get(ctx, p)
		if errors.Is(err, store.ErrNoNode) {
			return
		}
		req(t).ok(err)
		n.Token = 0
		out[p] = n
		if d == depth {
			return
		}
		kids, err := st.Children(ctx, p)
		if errors.Is(err, store.ErrNoNode) {
			return
		}
		for _, k := range req(t).kids(kids, err) {
			walk(store.Join(p, k.Name), d+1)
		}
	}
	walk(p, 0)
	return out
}

// followTree follows a tree that does not exist yet into its creation,
// its changes below and beyond the depth, its deletion and its making
// again; and checks Sync, the limit, bad arguments and Stop.
func (s *suite) followTree(t *testing.T) {
	s.eachFollower(t, func(t *testing.T, fl follower) {
		a, b := s.open(t), s.open(t)
		ctx, dir := ctxFor(t), ns(t)
		p := dir + "/t"
		f, nodes, err := fl.follow(ctx, a, p, 2, 100)
		if err != nil || len(nodes) != 0 {
			t.Fatalf("FollowTree(missing) = %v, %v; want no nodes", paths(nodes), err)
		}
		defer f.Stop()
		v := newView(t, nodes)
		req(t).node(b.Create(ctx, p, []byte("root"), store.Persistent))
		x := req(t).node(b.Create(ctx, p+"/x", []byte("1"), store.Persistent))
		req(t).node(b.Create(ctx, p+"/x/y", nil, store.Persistent))      // explicit: no reclaim races the test
		req(t).node(b.Create(ctx, p+"/x/y/deep", nil, store.Persistent)) // below depth 2
		req(t).node(b.Set(ctx, x.Path, []byte("2"), store.AnyVersion))
		req(t).node(b.Create(ctx, p+"/e-", []byte("eph"), store.EphemeralSequential))
		req(t).node(b.Create(ctx, dir+"/t-sibling", nil, store.Persistent)) // outside
		v.until(f, subtree(t, ctx, b, p, 2))
		if _, ok := v.nodes[p+"/x/y/deep"]; ok {
			t.Errorf("a node below the depth was delivered")
		}

		// Sync: what was made before it is there after one Changes.
		req(t).node(b.Set(ctx, p, []byte("root2"), store.AnyVersion))
		req(t).ok(b.Delete(ctx, p+"/x/y/deep"))
		req(t).node(b.Create(ctx, p+"/z", []byte("z"), store.Persistent))
		if err := f.Sync(ctx); err != nil {
			t.Fatalf("Sync() = %v", err)
		}
		cs, _, err := f.Changes()
		if err != nil {
			t.Fatalf("Changes() after Sync = %v", err)
		}
		v.apply(cs)
		if want := subtree(t, ctx, b, p, 2); !v.equal(want) {
			t.Errorf("view after Sync: %s", v.diff(want))
		}

		// The ephemeral node goes with b's session; then the whole tree
		// goes, and is made again.
		s.b.Expire(t, b)
		c := s.open(t)
		v.until(f, subtree(t, ctx, c, p, 2))
		for _, q := range []string{p + "/x/y", p + "/x", p + "/z", p} {
			req(t).ok(c.Delete(ctx, q))
		}
		v.until(f, map[string]store.Node{})
		req(t).node(c.Create(ctx, p+"/again", []byte("a"), store.Persistent))
		v.until(f, subtree(t, ctx, c, p, 2))

		// A second follow starts from its own read, bounded by limit.
		g, nodes, err := fl.follow(ctx, c, p, 1, 2)
		if err != nil {
			t.Fatalf("second FollowTree = %v", err)
		}
		if want := subtree(t, ctx, c, p, 1); !newView(t, nodes).equal(want) {
			t.Errorf("second FollowTree = %v; want %v", paths(nodes), keys(want))
		}
		g.Stop()
		g.Stop()
		if _, _, err := g.Changes(); err == nil {
			t.Errorf("Changes() after Stop = nil; want an error")
		}
		h, nodes, err := fl.follow(ctx, c, p, 1, 1)
		if err == nil {
			h.Stop()
			t.Errorf("FollowTree(limit 1) = %v, nil; want %v (store has %v)", paths(nodes), store.ErrTooLarge, keys(subtree(t, ctx, c, p, 1)))
		}
		wantErr(t, "FollowTree(limit below the nodes)", err, store.ErrTooLarge)
		_, _, err = fl.follow(ctx, c, "bad", 1, 1)
		wantErr(t, "FollowTree(bad)", err, store.ErrInvalidPath)
		for _, bad := range [][2]int{{-1, 1}, {store.MaxPathDepth + 1, 1}, {1, 0}} {
			_, _, err = fl.follow(ctx, c, p, bad[0], bad[1])
			wantErr(t, fmt.Sprintf("FollowTree(depth %d, limit %d)", bad[0], bad[1]), err, store.ErrInvalidArgument)
		}
		_, _, err = fl.follow(cancelled(), c, p, 1, 10)
		wantErr(t, "FollowTree(cancelled ctx)", err, context.Canceled)
	})
}

// A follow of a tree ends with its session, and says why; its ctx bounds
// only the read.
func (s *suite) followTreeEnds(t *testing.T) {
	s.eachFollower(t, func(t *testing.T, fl follower) {
		for _, e := range []struct {
			name string
			end  func(*testing.T, store.Store)
			want error
		}{
			{"close", func(_ *testing.T, st store.Store) { st.Close() }, store.ErrClosed},
			{"expire", func(t *testing.T, st store.Store) { s.b.Expire(t, st) }, store.ErrSessionExpired},
		} {
			t.Run(e.name, func(t *testing.T) {
				st, b := s.open(t), s.open(t)
				ctx, cancel := context.WithCancel(ctxFor(t))
				p := ns(t)
				req(t).node(b.Create(ctxFor(t), p+"/n", nil, store.Persistent))
				f, _, err := fl.follow(ctx, st, p, 1, 10)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Stop()
				cancel()
				req(t).node(b.Set(ctxFor(t), p+"/n", []byte("after the cancel"), store.AnyVersion))
				if err := f.Sync(ctxFor(t)); err != nil {
					t.Fatalf("Sync() after FollowTree's ctx ended = %v; want nil", err)
				}
				e.end(t, st)
				timeout := time.After(Timeout)
				for {
					_, ready, err := f.Changes()
					if err != nil {
						// The lost connection of an expiry may come
						// before the client learns of the expiry: the
						// follow says so, and the next one the end.
						if !errors.Is(err, e.want) && !(e.want == store.ErrSessionExpired && errors.Is(err, store.ErrDisconnected)) {
							t.Errorf("Changes() after the end = %v; want %v", err, e.want)
						}
						if err := f.Sync(context.Background()); err == nil {
							t.Errorf("Sync() after the end = nil; want an error")
						}
						_, _, err = fl.follow(ctxFor(t), st, p, 1, 10)
						wantErr(t, "FollowTree after the end", err, e.want)
						return
					}
					select {
					case <-ready:
					case <-timeout:
						t.Fatalf("follow still running %v after its end", Timeout)
					}
				}
			})
		}
	})
}

// A follow of a tree across a lost connection either goes on, and tells
// what changed meanwhile, or ends with ErrDisconnected, so that its caller
// reads anew.
func (s *suite) followTreeDisconnect(t *testing.T) {
	d, ok := s.b.(Disconnector)
	if !ok {
		t.Skip("backend cannot disconnect a session")
	}
	s.eachFollower(t, func(t *testing.T, fl follower) {
		a, b := s.open(t), s.open(t)
		ctx, p := ctxFor(t), ns(t)
		req(t).node(b.Create(ctx, p+"/n", []byte("1"), store.Persistent))
		f, nodes, err := fl.follow(ctx, a, p, 1, 10)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Stop()
		v := newView(t, nodes)
		d.Disconnect(t, a)
		req(t).node(b.Set(ctx, p+"/n", []byte("2"), store.AnyVersion))
		req(t).node(b.Create(ctx, p+"/m", nil, store.Persistent))
		d.Reconnect(t, a)
		want := subtree(t, ctx, b, p, 1)
		timeout := time.After(Timeout)
		for {
			cs, ready, err := f.Changes()
			v.apply(cs)
			if v.equal(want) {
				return
			}
			if errors.Is(err, store.ErrDisconnected) {
				return // the caller reads anew
			}
			if err != nil {
				t.Fatalf("Changes() after a lost connection = %v; want changes or %v", err, store.ErrDisconnected)
			}
			select {
			case <-ready:
			case <-timeout:
				t.Fatalf("view %s %v after the reconnection", v.diff(want), Timeout)
			}
		}
	})
}
