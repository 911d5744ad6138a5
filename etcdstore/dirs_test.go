package etcdstore_test

import (
	"slices"
	"testing"

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
