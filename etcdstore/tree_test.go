package etcdstore_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/store"
)

// drainTree takes the changes of f until done says the changes so far are
// enough, and returns them; it fails on the follow's end or after a while.
func drainTree(t *testing.T, f store.TreeFollow, done func([]store.TreeChange) bool) []store.TreeChange {
	t.Helper()
	var got []store.TreeChange
	timeout := time.After(20 * time.Second)
	for {
		cs, ready, err := f.Changes()
		got = append(got, cs...)
		if done(got) {
			return got
		}
		if err != nil {
			t.Fatalf("follow ended: %v, after %+v", err, got)
		}
		select {
		case <-ready:
		case <-timeout:
			t.Fatalf("changes %+v after 20s", got)
		}
	}
}

// A follow of a tree rides out a lost connection with no read of the
// subtree: clientv3 resumes its watch from the revision after the last
// one it delivered, and the changes made meanwhile come after the
// reconnection. A compaction of those revisions ends it with
// ErrDisconnected, so that its caller reads anew.
func TestFollowTreeOutage(t *testing.T) {
	c := etcdserver.Start(t, 1)
	b := etcdbackend.New(c)
	raw := c.Client(t)
	ctx := ctxFor(t)
	for _, compacted := range []bool{false, true} {
		t.Run(fmt.Sprintf("compacted=%v", compacted), func(t *testing.T) {
			a := open(t, b)
			p := fmt.Sprintf("/tree-outage-%v", compacted)
			must[*clientv3.PutResponse](t)(raw.Put(ctx, p, "root"))
			f, nodes, err := a.FollowTree(ctx, p, store.MaxPathDepth, 100)
			if err != nil || len(nodes) != 1 {
				t.Fatalf("FollowTree = %v, %v; want the root", nodes, err)
			}
			defer f.Stop()
			b.Disconnect(t, a)
			waitDone(t, "Disconnected", a.Disconnected())
			must[*clientv3.PutResponse](t)(raw.Put(ctx, p+"/during", "x"))
			if compacted {
				resp := must[*clientv3.GetResponse](t)(raw.Get(ctx, "/"))
				if _, err := raw.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
					t.Fatal(err)
				}
			}
			b.Reconnect(t, a)
			if !compacted {
				got := drainTree(t, f, func(cs []store.TreeChange) bool { return len(cs) > 0 })
				if got[0].Type != store.EventCreated || got[0].Node.Path != p+"/during" || string(got[0].Node.Data) != "x" {
					t.Errorf("change after the outage = %+v; want the creation of %s/during", got[0], p)
				}
				retry(t, ctx, "Sync after the outage", func() error { return f.Sync(ctx) })
				return
			}
			timeout := time.After(20 * time.Second)
			for {
				_, ready, err := f.Changes()
				if err != nil {
					if !errors.Is(err, store.ErrDisconnected) || !strings.Contains(err.Error(), "compacted") {
						t.Errorf("Changes() after a compaction = %v; want %v (compacted)", err, store.ErrDisconnected)
					}
					return
				}
				select {
				case <-ready:
				case <-timeout:
					t.Fatal("follow still running 20s after a compaction")
				}
			}
		})
	}
}

// A subtree of more keys than one page is read in pages, at one revision,
// and the limit stops the read.
func TestFollowTreePages(t *testing.T) {
	c := etcdserver.Start(t, 1)
	a := open(t, etcdbackend.New(c))
	ctx := ctxFor(t)
	const n = 2345
	for i := 0; i < n; i += store.MaxBatchNodes {
		batch := make([]store.BatchNode, min(store.MaxBatchNodes, n-i))
		for j := range batch {
			batch[j] = store.BatchNode{Name: fmt.Sprintf("k%05d", i+j), Data: []byte("v")}
		}
		if _, err := a.CreateBatch(ctx, "/pages/d", batch, store.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	f, nodes, err := a.FollowTree(ctx, "/pages", store.MaxPathDepth, n+2)
	if err != nil {
		t.Fatal(err)
	}
	f.Stop()
	if len(nodes) != n+2 || nodes[0].Path != "/pages" || nodes[1].Path != "/pages/d" || nodes[n+1].Path != fmt.Sprintf("/pages/d/k%05d", n-1) {
		t.Errorf("FollowTree read %d nodes (%v ... %v); want %d, sorted", len(nodes), nodes[0].Path, nodes[len(nodes)-1].Path, n+2)
	}
	_, _, err = a.FollowTree(ctx, "/pages", store.MaxPathDepth, n+1)
	if !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("FollowTree(limit %d of %d) = %v; want %v", n+1, n+2, err, store.ErrTooLarge)
	}
	f, nodes, err = a.FollowTree(ctx, "/pages", 1, 2)
	if err != nil || len(nodes) != 2 {
		t.Fatalf("FollowTree(depth 1) = %d nodes, %v; want 2", len(nodes), err)
	}
	f.Stop()
}
