package etcdstore_test

import (
	"regexp"
	"testing"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/store"
)

// TestNameReuse: a session names its next ephemeral sequential node after
// one it deleted with DeleteSeq, so that the keys of a directory do not pile
// up in etcd's index; a name deleted with Delete is never used again, and
// nor is a name whose node still lives.
func TestNameReuse(t *testing.T) {
	b := etcdbackend.New(etcdserver.Start(t, 1))
	st := open(t, b)
	ctx := ctxFor(t)
	const p = "/reuse/lock-"
	a := must[store.Node](t)(st.Create(ctx, p, nil, store.EphemeralSequential))
	c := must[store.Node](t)(st.Create(ctx, p, nil, store.EphemeralSequential))
	if a.Path == c.Path {
		t.Fatalf("two live nodes named %q", a.Path)
	}
	if err := st.DeleteSeq(ctx, a.Path, a.Seq); err != nil {
		t.Fatal(err)
	}
	again := must[store.Node](t)(st.Create(ctx, p, nil, store.EphemeralSequential))
	if again.Path != a.Path || again.Seq <= c.Seq {
		t.Errorf("Create after DeleteSeq(%q) = %q, Seq %d; want the name again, Seq above %d", a.Path, again.Path, again.Seq, c.Seq)
	}
	// A late DeleteSeq of the old node leaves the new one alone.
	if err := st.DeleteSeq(ctx, a.Path, a.Seq); err == nil {
		t.Errorf("DeleteSeq(old Seq) = nil; want ErrNoNode")
	}
	if _, err := st.Get(ctx, again.Path); err != nil {
		t.Errorf("Get(%q) after a late DeleteSeq = %v; want the node", again.Path, err)
	}
	// ... and does not free the name of the live node.
	next := must[store.Node](t)(st.Create(ctx, p, nil, store.EphemeralSequential))
	if next.Path == again.Path {
		t.Errorf("Create = %q while that node lives", next.Path)
	}
	if err := st.Delete(ctx, c.Path); err != nil {
		t.Fatal(err)
	}
	if n := must[store.Node](t)(st.Create(ctx, p, nil, store.EphemeralSequential)); n.Path == c.Path {
		t.Errorf("Create after Delete(%q) = the same name; want a new one", c.Path)
	}
	// Another session never gets this session's names.
	other := open(t, b)
	if err := st.DeleteSeq(ctx, next.Path, next.Seq); err != nil {
		t.Fatal(err)
	}
	if n := must[store.Node](t)(other.Create(ctx, p, nil, store.EphemeralSequential)); n.Path == next.Path {
		t.Errorf("other session's Create = %q, a name of this session's", n.Path)
	}
	// A name used again and again keeps the parts of its transactions
	// (built at its first DeleteSeq): each node it names still holds its
	// own data, with the session's lease, and is deleted by its Seq.
	for _, data := range []string{"x", "yy", ""} {
		n := must[store.Node](t)(st.Create(ctx, p, []byte(data), store.EphemeralSequential))
		if n.Path != next.Path {
			t.Errorf("Create after DeleteSeq(%q) = %q; want the name again", next.Path, n.Path)
		}
		got := must[store.Node](t)(other.Get(ctx, n.Path))
		if string(got.Data) != data || got.Owner != int64(st.Lease()) || got.Seq != n.Seq {
			t.Errorf("Get(%q) = data %q, owner %x, Seq %d; want %q, %x, %d", n.Path, got.Data, got.Owner, got.Seq, data, int64(st.Lease()), n.Seq)
		}
		if err := st.DeleteSeq(ctx, n.Path, n.Seq-1); err == nil {
			t.Errorf("DeleteSeq(%q, another Seq) = nil; want ErrNoNode", n.Path)
		}
		if err := st.DeleteSeq(ctx, n.Path, n.Seq); err != nil {
			t.Fatal(err)
		}
		if _, err := other.Get(ctx, n.Path); err == nil {
			t.Errorf("Get(%q) after DeleteSeq = nil error; want ErrNoNode", n.Path)
		}
	}
}

// TestFreshName: a new sequential name is the requested path followed by 16
// lowercase hexadecimal digits, zero-padded, and names do not repeat.
func TestFreshName(t *testing.T) {
	form := regexp.MustCompile(`^/q/item-[0-9a-f]{16}$`)
	seen := map[string]bool{}
	for range 1000 {
		n := etcdstore.FreshName("/q/item-")
		if !form.MatchString(n) {
			t.Fatalf("FreshName(/q/item-) = %q; want /q/item- and 16 hexadecimal digits", n)
		}
		if seen[n] {
			t.Fatalf("FreshName gave %q twice", n)
		}
		seen[n] = true
	}
}
