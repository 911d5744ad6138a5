package group_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/curator"
	"github.com/corral-go/corral/internal/testing/kazoo"
	"github.com/corral-go/corral/internal/testing/zkbackend"
	"github.com/corral-go/corral/store"
)

// zkServer returns the address of the ZooKeeper server the zk backend
// runs, skipping t when there is none.
func zkServer(t *testing.T) (*zkbackend.Backend, string) {
	t.Helper()
	if !backends.Selected("zk") {
		t.Skip("zk not in CORRAL_STORES")
	}
	b, ok := backends.Get(t, "zk").(*zkbackend.Backend)
	if !ok {
		t.Skip("no zk backend")
	}
	return b, b.Servers()[0]
}

// TestCuratorInterop runs corral's members beside Curator's GroupMember
// (the real one) in one group on ZooKeeper: each sees the other's members
// with their values, value changes included, and corral lists Curator's
// member, which has no order of creation, first.
func TestCuratorInterop(t *testing.T) {
	if err := curator.Available(); err != nil {
		t.Skipf("Curator's GroupMember cannot run here (.ci/run installs it): %v", err)
	}
	b, addr := zkServer(t)
	ctx, path := ctxFor(t), dir(t)
	g, err := curator.StartGroup(ctx, t.TempDir(), addr)
	if err != nil {
		t.Fatalf("StartGroup = %v", err)
	}
	defer g.Close()
	st := b.Open(t)
	w := group.Watch(ctx, st, path)
	defer w.Close()

	a := join(t, b.Open(t), path, "corral-a")
	until(t, w, "corral-a")
	// Its id sorts after corral's node names ("_c_..."), and it joined
	// later: listed first all the same.
	if err := g.Join(ctx, path, "worker-1", []byte("curator-1")); err != nil {
		t.Fatal(err)
	}
	ms := until(t, w, "curator-1", "corral-a")
	if store.Base(ms[0].Path) != "worker-1" || ms[0].Token != 0 {
		t.Errorf("Curator's member = %v; want node worker-1, token 0", ms[0])
	}
	want := map[string][]byte{"worker-1": []byte("curator-1"), store.Base(a.Path()): []byte("corral-a")}
	if got, err := g.AwaitMembers(ctx, "worker-1", want); err != nil {
		t.Fatalf("Curator's getCurrentMembers() = %q, %v; want %q", got, err, want)
	}

	// Values change both ways: SetValue, and Curator's setThisData.
	if err := a.SetValue(ctx, []byte("corral-a2")); err != nil {
		t.Fatal(err)
	}
	want[store.Base(a.Path())] = []byte("corral-a2")
	if got, err := g.AwaitMembers(ctx, "worker-1", want); err != nil {
		t.Fatalf("Curator's getCurrentMembers() after SetValue = %q, %v; want %q", got, err, want)
	}
	if err := g.SetValue(ctx, "worker-1", []byte("curator-2")); err != nil {
		t.Fatal(err)
	}
	until(t, w, "curator-2", "corral-a2")

	if err := a.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	delete(want, store.Base(a.Path()))
	want["worker-1"] = []byte("curator-2")
	if got, err := g.AwaitMembers(ctx, "worker-1", want); err != nil {
		t.Fatalf("Curator's getCurrentMembers() after Leave = %q, %v; want %q", got, err, want)
	}
	if err := g.Leave(ctx, "worker-1"); err != nil {
		t.Fatal(err)
	}
	until(t, w)
}

// TestKazooInterop runs corral's members beside kazoo's Party and
// ShallowParty (the real ones): a Party lists corral's members with their
// values, corral lists a Party's and a ShallowParty's members (their
// identifiers are their values) first, and a ShallowParty lists corral's
// members under ids that are not their values.
func TestKazooInterop(t *testing.T) {
	if err := kazoo.Available(); err != nil {
		t.Skipf("kazoo cannot run here (.ci/run installs python3-kazoo): %v", err)
	}
	b, addr := zkServer(t)
	ctx := ctxFor(t)
	k, err := kazoo.Start(ctx, t.TempDir(), addr)
	if err != nil {
		t.Fatalf("kazoo.Start = %v", err)
	}
	defer k.Close()
	st := b.Open(t)

	t.Run("Party", func(t *testing.T) {
		path := dir(t)
		w := group.Watch(ctx, st, path)
		defer w.Close()
		a := join(t, b.Open(t), path, "corral-a")
		until(t, w, "corral-a")
		if err := k.Join(ctx, path, "kazoo-1"); err != nil {
			t.Fatal(err)
		}
		until(t, w, "kazoo-1", "corral-a")
		got, err := k.Party(ctx, path)
		slices.Sort(got)
		if want := []string{"corral-a", "kazoo-1"}; err != nil || !slices.Equal(got, want) {
			t.Errorf("kazoo's Party lists %q, %v; want %q", got, err, want)
		}
		if err := a.SetValue(ctx, []byte("corral-a2")); err != nil {
			t.Fatal(err)
		}
		got, err = k.Party(ctx, path)
		slices.Sort(got)
		if want := []string{"corral-a2", "kazoo-1"}; err != nil || !slices.Equal(got, want) {
			t.Errorf("kazoo's Party after SetValue lists %q, %v; want %q", got, err, want)
		}
		if err := k.Leave(ctx, path, "kazoo-1"); err != nil {
			t.Fatal(err)
		}
		until(t, w, "corral-a2")
	})
	t.Run("ShallowParty", func(t *testing.T) {
		path := dir(t)
		w := group.Watch(ctx, st, path)
		defer w.Close()
		a := join(t, b.Open(t), path, "corral-b")
		if err := k.JoinShallow(ctx, path, "shallow-1"); err != nil {
			t.Fatal(err)
		}
		until(t, w, "shallow-1", "corral-b")
		got, err := k.Shallow(ctx, path)
		if err != nil || len(got) != 2 || !slices.Contains(got, "shallow-1") || slices.Contains(got, "corral-b") {
			t.Errorf("kazoo's ShallowParty lists %q, %v; want shallow-1 and corral's member under an id that is not its value", got, err)
		}
		for _, id := range got {
			if id != "shallow-1" && !bytes.Contains([]byte(a.Path()), []byte(id)) {
				t.Errorf("ShallowParty id %q of corral's member; want a part of its node's name %q", id, a.Path())
			}
		}
	})
}
