package etcdstore_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/store"
)

// TestImplicitDirs: the directories that are no key but have keys below
// them are found anywhere below the path asked, in a chroot too; the
// parents corral makes are keys, and are not among them.
func TestImplicitDirs(t *testing.T) {
	c := etcdserver.Start(t, 1)
	ctx := ctxFor(t)
	for _, chroot := range []string{"", "/app"} {
		var opts []etcdstore.Option
		if chroot != "" {
			opts = append(opts, etcdstore.WithChroot(chroot))
		}
		st := open(t, etcdbackend.New(c, opts...))
		for _, k := range []string{"/x/elock/694d1", "/x/elock/694d2", "/y/z/w/v"} {
			if _, err := c.Client(t).Put(ctx, chroot+k, ""); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := st.Create(ctx, "/y/made/n", nil, store.Persistent); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			path string
			want []string
		}{
			{"/", []string{"/x", "/x/elock", "/y/z", "/y/z/w"}},
			{"/x", []string{"/x/elock"}},
			{"/y", []string{"/y/z", "/y/z/w"}},
			{"/x/elock", []string{}},
			{"/nothing", []string{}},
		} {
			got, err := st.ImplicitDirs(ctx, tc.path)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("chroot %q: ImplicitDirs(%s) = %q, %v; want %q", chroot, tc.path, got, err, tc.want)
			}
		}
		if _, err := st.ImplicitDirs(ctx, "x/"); err == nil {
			t.Errorf("ImplicitDirs(x/) succeeded")
		}
	}
}

// TestDeleteSeqTakesDirRecords: a directory made implicitly and then
// deleted with DeleteSeq goes with its marker and its front record, while
// the session's own ephemeral node, which can be neither (its delete leaves
// them out), is deleted all the same; no key of either is left anywhere.
func TestDeleteSeqTakesDirRecords(t *testing.T) {
	c := etcdserver.Start(t, 1)
	ctx := ctxFor(t)
	st := open(t, etcdbackend.New(c, etcdstore.WithReclaimDelay(time.Hour)))
	n := must[store.Node](t)(st.Create(ctx, "/d/sub/n-", nil, store.EphemeralSequential))
	dir := must[store.Node](t)(st.Get(ctx, "/d/sub"))
	// The front record of /d/sub, and no reclaiming within the test.
	if err := st.DeleteFront(ctx, n.Path, n.Seq); err != nil {
		t.Fatal(err)
	}
	left := func(sub string) []string {
		t.Helper()
		resp, err := c.Client(t).Get(ctx, "", clientv3.WithFromKey(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, kv := range resp.Kvs {
			if strings.Contains(string(kv.Key), sub) {
				ks = append(ks, string(kv.Key))
			}
		}
		return ks
	}
	if ks := left("/d/sub"); len(ks) < 3 {
		t.Fatalf("keys of /d/sub before its delete: %q; want the directory, its marker and its front record", ks)
	}
	if err := st.DeleteSeq(ctx, "/d/sub", dir.Seq); err != nil {
		t.Fatal(err)
	}
	if ks := left("/d/sub"); len(ks) > 0 {
		t.Errorf("keys left after DeleteSeq of the directory: %q", ks)
	}
	e := must[store.Node](t)(st.Create(ctx, "/d/e-", nil, store.EphemeralSequential))
	if err := st.DeleteSeq(ctx, e.Path, e.Seq); err != nil {
		t.Fatal(err)
	}
	if ks := left(e.Path); len(ks) > 0 {
		t.Errorf("keys left after DeleteSeq of an ephemeral node: %q", ks)
	}
}
