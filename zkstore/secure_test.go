package zkstore_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/smoke"
	"github.com/corral-go/corral/internal/testing/testcert"
	"github.com/corral-go/corral/internal/testing/zkbackend"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	corralsync "github.com/corral-go/corral/sync"
	"github.com/corral-go/corral/zkstore"
)

// openOn opens a Store on addrs that is closed when the test ends.
func openOn(t *testing.T, addrs []string, opts ...zkstore.Option) *zkstore.Store {
	t.Helper()
	st, err := zkstore.Open(ctxFor(t), addrs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// openDir makes dir with an open ACL, so that the parents a Store with
// credentials creates below it do not lock other tests out of theirs.
func openDir(t *testing.T, addrs []string, dir string, opts ...zkstore.Option) {
	t.Helper()
	st := openOn(t, addrs, append(opts, zkstore.WithACL(zk.WorldACL(zk.PermAll)))...)
	must[store.Node](t)(st.Create(ctxFor(t), dir, nil, store.Persistent))
	st.Close()
}

// rawACL reads the ACL of p with a client of its own, with creds.
func rawACL(t *testing.T, addr, p string, creds ...string) []zk.ACL {
	t.Helper()
	conn, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, c := range creds {
		if err := conn.AddAuth("digest", []byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	acl, _, err := conn.GetACL(p)
	if err != nil {
		t.Fatalf("GetACL(%s) = %v", p, err)
	}
	return acl
}

// TestDigestACL: with digest credentials, the nodes corral creates are
// the creator's: another identity (or none) may read a Mutex holder's node
// but not change it, delete it or contend for the lock, all with
// ErrPermission; the holder may do all of it.
func TestDigestACL(t *testing.T) {
	srv, _ := server(t)
	addrs := []string{srv.Addr()}
	ctx, dir := ctxFor(t), dirFor(t)
	openDir(t, addrs, dir)
	alice := openOn(t, addrs, zkstore.WithDigestAuth("alice", "alice-pw"))
	mallory := openOn(t, addrs, zkstore.WithDigestAuth("mallory", "mallory-pw"))
	anon := openOn(t, addrs)

	m := corralsync.NewMutex(alice, dir+"/lock")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	kids := must[[]store.Child](t)(alice.Children(ctx, dir+"/lock"))
	if len(kids) != 1 {
		t.Fatalf("Children = %v; want the holder's node", kids)
	}
	holder := dir + "/lock/" + kids[0].Name

	want := []zk.ACL{
		{Perms: zk.PermAll, Scheme: "digest", ID: zk.DigestACL(0, "alice", "alice-pw")[0].ID},
		{Perms: zk.PermRead, Scheme: "world", ID: "anyone"},
	}
	for _, p := range []string{dir + "/lock", holder} {
		if got := rawACL(t, srv.Addr(), p, "alice:alice-pw"); !slices.Equal(got, want) {
			t.Errorf("ACL of %s = %v; want %v", p, got, want)
		}
	}

	for name, st := range map[string]*zkstore.Store{"other identity": mallory, "no identity": anon} {
		if _, err := st.Get(ctx, holder); err != nil {
			t.Errorf("%s: Get(holder) = %v; want the node (readable by all)", name, err)
		}
		if err := st.Delete(ctx, holder); !errors.Is(err, store.ErrPermission) {
			t.Errorf("%s: Delete(holder) = %v; want ErrPermission", name, err)
		}
		if _, err := st.Set(ctx, holder, []byte("mine"), store.AnyVersion); !errors.Is(err, store.ErrPermission) {
			t.Errorf("%s: Set(holder) = %v; want ErrPermission", name, err)
		}
		if _, err := st.Create(ctx, dir+"/lock/x-", nil, store.EphemeralSequential); !errors.Is(err, store.ErrPermission) {
			t.Errorf("%s: Create in the lock = %v; want ErrPermission", name, err)
		}
		if err := corralsync.NewMutex(st, dir+"/lock").Lock(ctx); !errors.Is(err, store.ErrPermission) {
			t.Errorf("%s: Mutex.Lock = %v; want ErrPermission", name, err)
		}
	}
	if err := m.Context().Err(); err != nil {
		t.Fatalf("the lock was lost: %v", context.Cause(m.Context()))
	}

	if _, err := alice.Set(ctx, holder, []byte("still mine"), store.AnyVersion); err != nil {
		t.Errorf("holder: Set = %v", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Errorf("holder: Unlock = %v", err)
	}
	if _, err := anon.Get(ctx, holder); !errors.Is(err, store.ErrNoNode) {
		t.Errorf("Get(holder) after Unlock = %v; want ErrNoNode", err)
	}
	// The lock's directory goes with its last node, under the ACL too.
	backends.WaitGone(t, anon, dir+"/lock")
}

// TestDigestWrongPassword: a password that does not match the user's entry
// in the ACL of the Store's root fails Open with ErrAuth; credentials the
// server refuses too.
func TestDigestWrongPassword(t *testing.T) {
	srv, _ := server(t)
	addrs := []string{srv.Addr()}
	ctx, dir := ctxFor(t), dirFor(t)
	openDir(t, addrs, dir)
	// The application's tree, readable by all, as CreatorACL makes it.
	app := openOn(t, addrs, zkstore.WithDigestAuth("app", "right"), zkstore.WithChroot(dir+"/app"))
	must[store.Node](t)(app.Create(ctx, "/data", []byte("x"), store.Persistent))
	// A tree only its user may touch at all.
	openOn(t, addrs, zkstore.WithDigestAuth("app", "right"), zkstore.WithChroot(dir+"/private"),
		zkstore.WithACL(zk.AuthACL(zk.PermAll)))

	for _, tc := range []struct {
		name string
		opts []zkstore.Option
		want error
	}{
		{"wrong password", []zkstore.Option{zkstore.WithDigestAuth("app", "wrong"), zkstore.WithChroot(dir + "/app")}, store.ErrAuth},
		{"wrong password, unreadable root", []zkstore.Option{zkstore.WithDigestAuth("app", "wrong"), zkstore.WithChroot(dir + "/private")}, store.ErrPermission},
		{"no credentials, unreadable root", []zkstore.Option{zkstore.WithChroot(dir + "/private")}, store.ErrPermission},
		{"unknown scheme", []zkstore.Option{zkstore.WithAuth("no-such-scheme", []byte("x"))}, store.ErrAuth},
		{"right password", []zkstore.Option{zkstore.WithDigestAuth("app", "right"), zkstore.WithChroot(dir + "/app")}, nil},
		{"another user", []zkstore.Option{zkstore.WithDigestAuth("other", "pw"), zkstore.WithChroot(dir + "/app")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := zkstore.Open(ctx, addrs, tc.opts...)
			if st != nil {
				defer st.Close()
			}
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Open = %v; want a session", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open = %v; want %v", err, tc.want)
			}
			t.Logf("Open: %v", err)
		})
	}
	// A user the root does not name opens, and is refused where the ACLs
	// say so.
	other := openOn(t, addrs, zkstore.WithDigestAuth("other", "pw"), zkstore.WithChroot(dir+"/app"))
	if _, err := other.Create(ctx, "/mine", nil, store.Persistent); !errors.Is(err, store.ErrPermission) {
		t.Errorf("Create by another user = %v; want ErrPermission", err)
	}
	if n, err := other.Get(ctx, "/data"); err != nil || string(n.Data) != "x" {
		t.Errorf("Get by another user = %q, %v; want x", n.Data, err)
	}
}

// TestAuthSurvivesReconnection: after the connection is lost and made
// again, the session still acts as its identity (the client sends its
// credentials again before anything else), and the nodes' ACLs still keep
// other identities out.
func TestAuthSurvivesReconnection(t *testing.T) {
	srv, b := server(t)
	ctx, dir := ctxFor(t), dirFor(t)
	openDir(t, []string{srv.Addr()}, dir)
	st, _ := b.OpenWithProxies(t, zkstore.WithDigestAuth("alice", "alice-pw"))
	mallory := openOn(t, []string{srv.Addr()}, zkstore.WithDigestAuth("mallory", "mallory-pw"))
	// Deleting a node takes the right on its parent: alice's.
	e := must[store.Node](t)(st.Create(ctx, dir+"/alice/e", []byte("v0"), store.Ephemeral))
	for i := range 2 {
		id := st.SessionID()
		b.Disconnect(t, st)
		b.Reconnect(t, st)
		if st.SessionID() != id || st.Context().Err() != nil {
			t.Fatalf("reconnection %d: the session changed or ended", i)
		}
		// Each of these takes the identity: create in dir, write e.
		must[store.Node](t)(st.Create(ctx, dir+"/alice/n-", nil, store.EphemeralSequential))
		if _, err := st.Set(ctx, e.Path, []byte("v1"), store.AnyVersion); err != nil {
			t.Fatalf("Set after reconnection %d = %v", i, err)
		}
		if err := mallory.Delete(ctx, e.Path); !errors.Is(err, store.ErrPermission) {
			t.Fatalf("another identity's Delete after reconnection %d = %v; want ErrPermission", i, err)
		}
	}
	if err := st.Delete(ctx, e.Path); err != nil {
		t.Errorf("Delete by the owner after reconnections = %v", err)
	}
}

// TestChroot: a Store with a chroot sees only its subtree, under its own
// paths, and passes the conformance suite there; two chroots do not see
// each other.
func TestChroot(t *testing.T) {
	srv, _ := server(t)
	addrs := []string{srv.Addr()}
	ctx, dir := ctxFor(t), dirFor(t)
	a := openOn(t, addrs, zkstore.WithChroot(dir+"/a"))
	b := openOn(t, addrs, zkstore.WithChroot(dir+"/b/deeper"))
	whole := openOn(t, addrs)

	na := must[store.Node](t)(a.Create(ctx, "/x/lock-", []byte("a"), store.EphemeralSequential))
	nb := must[store.Node](t)(b.Create(ctx, "/x/lock-", []byte("b"), store.EphemeralSequential))
	for _, n := range []store.Node{na, nb} {
		if !strings.HasPrefix(n.Path, "/x/_c_") {
			t.Errorf("Create = %s; want a path in the Store's tree, /x/_c_...", n.Path)
		}
	}
	for name, tc := range map[string]struct {
		st   *zkstore.Store
		n    store.Node
		data string
	}{"a": {a, na, "a"}, "b": {b, nb, "b"}} {
		kids := must[[]store.Child](t)(tc.st.Children(ctx, "/x"))
		if len(kids) != 1 || kids[0].Name != tc.n.Name() {
			t.Errorf("%s: Children(/x) = %v; want only %s", name, kids, tc.n.Name())
		}
		if got := must[store.Node](t)(tc.st.Get(ctx, tc.n.Path)); string(got.Data) != tc.data {
			t.Errorf("%s: Get = %q; want %q", name, got.Data, tc.data)
		}
	}
	for _, p := range []string{dir + "/a/x/" + na.Name(), dir + "/b/deeper/x/" + nb.Name()} {
		if _, err := whole.Get(ctx, p); err != nil {
			t.Errorf("Get(%s) without chroot = %v", p, err)
		}
	}
	if err := a.Delete(ctx, "/"); !errors.Is(err, store.ErrInvalidPath) {
		t.Errorf("Delete(/) = %v; want ErrInvalidPath", err)
	}
	if _, err := zkstore.Open(ctx, addrs, zkstore.WithChroot("app")); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("Open(WithChroot(app)) = %v; want ErrInvalidArgument", err)
	}
	t.Run("conformance", func(t *testing.T) {
		storetest.Run(t, zkbackend.New(addrs, zkstore.WithChroot(dir+"/conformance")))
	})
}

// tlsServer starts a ZooKeeper server with a secure client port that
// requires client certificates signed by its CA.
func tlsServer(t *testing.T) (*zkserver.Server, *testcert.CA) {
	t.Helper()
	ca := testcert.ForTest(t, "zk")
	srv := ca.MustServer(t, "zk-server")
	return zkserver.ForTest(t, zkserver.Config{TLS: &zkserver.TLS{KeyStore: srv.BundleFile, TrustStore: ca.File}}), ca
}

// TestTLS runs the conformance suite and the recipes over ZooKeeper's
// secure client port, with client certificates; a client without a
// certificate the server trusts, or that does not trust the server's,
// fails Open at once with ErrAuth; a client whose certificate the server
// takes for an identity may tie its nodes to it.
func TestTLS(t *testing.T) {
	srv, ca := tlsServer(t)
	addrs := []string{srv.TLSAddr()}
	client := ca.ClientTLS(ca.MustClient(t, "alice"))
	t.Run("conformance", func(t *testing.T) {
		storetest.Run(t, zkbackend.NewTLS(addrs, client))
	})
	t.Run("recipes", func(t *testing.T) {
		b := zkbackend.NewTLS(addrs, client)
		smoke.Recipes(t, b.Open(t), b.Open(t), dirFor(t))
	})
	t.Run("refused", func(t *testing.T) {
		stranger := testcert.ForTest(t, "stranger")
		for _, tc := range []struct {
			name string
			cfg  *tls.Config
			says string
		}{
			{"no client certificate", ca.ClientTLS(), "bad certificate"},
			{"certificate of another CA", &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{stranger.MustClient(t, "alice").Cert}}, "certificate"},
			{"server not trusted", stranger.ClientTLS(ca.MustClient(t, "alice")), "unknown authority"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				defer cancel()
				begun := time.Now()
				st, err := zkstore.Open(ctx, addrs, zkstore.WithTLS(tc.cfg))
				if err == nil {
					st.Close()
					t.Fatal("Open succeeded")
				}
				if !errors.Is(err, store.ErrAuth) || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("Open = %v; want ErrAuth, saying %q", err, tc.says)
				}
				if d := time.Since(begun); d > 10*time.Second {
					t.Errorf("Open took %v to fail; want it at once", d)
				}
				t.Logf("Open: %v", err)
			})
		}
	})
	t.Run("wrong port", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			addr  string
			opts  []zkstore.Option
			names string
		}{
			{"plain client, TLS port", srv.TLSAddr(), nil, "is it a TLS port?"},
			{"TLS client, plain port", srv.Addr(), []zkstore.Option{zkstore.WithTLS(client)}, "TLS handshake"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				st, err := zkstore.Open(ctx, []string{tc.addr}, tc.opts...)
				if err == nil {
					st.Close()
					t.Fatal("Open succeeded")
				}
				if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), tc.names) {
					t.Fatalf("Open = %v; want DeadlineExceeded, naming %q", err, tc.names)
				}
				t.Logf("Open: %v", err)
			})
		}
	})
	t.Run("certificate only", func(t *testing.T) {
		dir := dirFor(t)
		openDir(t, addrs, dir, zkstore.WithTLS(client))
		var logs recorder
		app := openOn(t, addrs, zkstore.WithTLS(ca.ClientTLS(ca.MustClient(t, "app"))), zkstore.WithLogger(slog.New(&logs)))
		bob := openOn(t, addrs, zkstore.WithTLS(ca.ClientTLS(ca.MustClient(t, "bob"))))
		assertCreatorOnly(t, srv.Addr(), dir, app, bob)
		for _, r := range logs.records() {
			if r.Level >= slog.LevelWarn {
				t.Errorf("a session with a certificate logged %q at %v", r.Message, r.Level)
			}
		}
	})
	t.Run("x509 identity", func(t *testing.T) {
		ctx, dir := ctxFor(t), dirFor(t)
		openDir(t, addrs, dir, zkstore.WithTLS(client))
		alice := openOn(t, addrs, zkstore.WithTLS(client), zkstore.WithACL(zkstore.CreatorACL()))
		bob := openOn(t, addrs, zkstore.WithTLS(ca.ClientTLS(ca.MustClient(t, "bob"))))
		n := must[store.Node](t)(alice.Create(ctx, dir+"/n", nil, store.Persistent))
		if _, err := bob.Set(ctx, n.Path, []byte("bob"), store.AnyVersion); !errors.Is(err, store.ErrPermission) {
			t.Errorf("Set by another certificate = %v; want ErrPermission", err)
		}
		if _, err := alice.Set(ctx, n.Path, []byte("alice"), store.AnyVersion); err != nil {
			t.Errorf("Set by the creator's certificate = %v", err)
		}
	})
}

// TestExpiredCertificate: a client certificate out of its validity period
// fails Open at once with ErrAuth, saying it expired, before any I/O
// (nothing listens on the address).
func TestExpiredCertificate(t *testing.T) {
	ca := testcert.ForTest(t, "zk")
	st, err := zkstore.Open(t.Context(), []string{"127.0.0.1:1"}, zkstore.WithTLS(ca.ClientTLS(ca.MustExpiredClient(t, "app"))))
	if st != nil {
		st.Close()
	}
	if !errors.Is(err, store.ErrAuth) || !strings.Contains(err.Error(), `"CN=app" expired at`) {
		t.Errorf("Open with an expired certificate = %v; want ErrAuth, saying it expired", err)
	}
}

// Options that cannot work fail Open with ErrInvalidArgument, before any
// I/O (nothing listens on the address).
func TestSecureOptionsInvalid(t *testing.T) {
	for name, opt := range map[string]zkstore.Option{
		"nil TLS":           zkstore.WithTLS(nil),
		"empty ACL":         zkstore.WithACL(nil),
		"empty digest user": zkstore.WithDigestAuth("", "pw"),
		"':' in user":       zkstore.WithDigestAuth("a:b", "pw"),
		"empty scheme":      zkstore.WithAuth("", []byte("x")),
		"relative chroot":   zkstore.WithChroot("app"),
		"chroot ending /":   zkstore.WithChroot("/app/"),
		"negative delay":    zkstore.WithReclaimDelay(-time.Second),
	} {
		st, err := zkstore.Open(t.Context(), []string{"127.0.0.1:1"}, opt)
		if st != nil {
			st.Close()
		}
		if !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("Open(%s) = %v; want ErrInvalidArgument", name, err)
		}
	}
}

// assertCreatorOnly checks that the nodes of a Mutex that owner holds in
// dir are owner's (its certificate's identity, x509:CN=app, has every
// right; anyone may read): other may read the holder's node but neither
// delete it, change it nor contend for the lock, and owner keeps it.
func assertCreatorOnly(t *testing.T, plainAddr, dir string, owner, other *zkstore.Store) {
	t.Helper()
	ctx := ctxFor(t)
	m := corralsync.NewMutex(owner, dir+"/lock")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	kids := must[[]store.Child](t)(owner.Children(ctx, dir+"/lock"))
	if len(kids) != 1 {
		t.Fatalf("Children = %v; want the holder's node", kids)
	}
	holder := dir + "/lock/" + kids[0].Name
	// ZooKeeper's X509AuthenticationProvider names a certificate by its
	// subject's X.500 name, in RFC 2253 form.
	want := []zk.ACL{
		{Perms: zk.PermAll, Scheme: "x509", ID: "CN=app"},
		{Perms: zk.PermRead, Scheme: "world", ID: "anyone"},
	}
	for _, p := range []string{dir + "/lock", holder} {
		if got := rawACL(t, plainAddr, p); !slices.Equal(got, want) {
			t.Errorf("ACL of %s = %v; want %v", p, got, want)
		}
	}
	if _, err := other.Get(ctx, holder); err != nil {
		t.Errorf("another identity: Get(holder) = %v; want the node (readable by all)", err)
	}
	if err := other.Delete(ctx, holder); !errors.Is(err, store.ErrPermission) {
		t.Errorf("another identity: Delete(holder) = %v; want ErrPermission", err)
	}
	if _, err := other.Set(ctx, holder, []byte("mine"), store.AnyVersion); !errors.Is(err, store.ErrPermission) {
		t.Errorf("another identity: Set(holder) = %v; want ErrPermission", err)
	}
	if err := corralsync.NewMutex(other, dir+"/lock").Lock(ctx); !errors.Is(err, store.ErrPermission) {
		t.Errorf("another identity: Mutex.Lock while the owner holds = %v; want ErrPermission", err)
	}
	if err := m.Context().Err(); err != nil {
		t.Fatalf("the owner's lock was lost: %v", context.Cause(m.Context()))
	}
	if err := m.Unlock(ctx); err != nil {
		t.Errorf("owner: Unlock = %v", err)
	}
	backends.WaitGone(t, owner, dir+"/lock") // it goes with its last node
}

// TestIdentity: whether a session holds an identity is what the server
// says: a certificate it asked for is one (ssl.clientAuth=want here), and
// a session without a certificate or a digest user holds none. Such a
// session opens with a Warn that its nodes are open to everyone, and
// makes them so; WithIdentityRequired refuses it with ErrNoIdentity.
func TestIdentity(t *testing.T) {
	zkserver.Require(t)
	ca := testcert.ForTest(t, "zk")
	srv := zkserver.ForTest(t, zkserver.Config{TLS: &zkserver.TLS{
		KeyStore: ca.MustServer(t, "zk-server").BundleFile, TrustStore: ca.File, ClientAuth: "want"}})
	app := zkstore.WithTLS(ca.ClientTLS(ca.MustClient(t, "app")))
	bob := zkstore.WithTLS(ca.ClientTLS(ca.MustClient(t, "bob")))
	ctx := ctxFor(t)

	t.Run("certificate", func(t *testing.T) {
		dir := dirFor(t)
		openDir(t, []string{srv.Addr()}, dir)
		assertCreatorOnly(t, srv.Addr(), dir, openOn(t, []string{srv.TLSAddr()}, app), openOn(t, []string{srv.TLSAddr()}, bob))
	})
	for _, tc := range []struct {
		name string
		addr string
		opts []zkstore.Option
	}{
		{"TLS, no certificate", srv.TLSAddr(), []zkstore.Option{zkstore.WithTLS(ca.ClientTLS())}},
		{"plain, no credentials", srv.Addr(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs recorder
			st := openOn(t, []string{tc.addr}, append(tc.opts, zkstore.WithLogger(slog.New(&logs)))...)
			warned := 0
			for _, r := range logs.records() {
				if r.Level == slog.LevelWarn && strings.Contains(r.Message, "open to everyone") {
					warned++
					var cause error
					r.Attrs(func(a slog.Attr) bool {
						if a.Key == "cause" {
							cause, _ = a.Value.Any().(error)
						}
						return true
					})
					if !errors.Is(cause, zkstore.ErrNoIdentity) {
						t.Errorf("the Warn's cause = %v; want an error wrapping ErrNoIdentity", cause)
					}
				}
			}
			if warned != 1 {
				t.Errorf("%d Warn records that the nodes are open to everyone; want 1", warned)
			}
			n := must[store.Node](t)(st.Create(ctx, dirFor(t)+"/n", nil, store.Persistent))
			if got, want := rawACL(t, srv.Addr(), n.Path), zk.WorldACL(zk.PermAll); !slices.Equal(got, want) {
				t.Errorf("ACL of %s = %v; want %v", n.Path, got, want)
			}

			st, err := zkstore.Open(ctx, []string{tc.addr}, append(tc.opts, zkstore.WithIdentityRequired())...)
			if err == nil {
				st.Close()
				t.Fatal("Open(WithIdentityRequired) succeeded")
			}
			if !errors.Is(err, zkstore.ErrNoIdentity) || !errors.Is(err, store.ErrAuth) {
				t.Errorf("Open(WithIdentityRequired) = %v; want ErrNoIdentity and ErrAuth", err)
			}
			t.Logf("Open: %v", err)
		})
	}
	t.Run("identity required, certificate", func(t *testing.T) {
		openOn(t, []string{srv.TLSAddr()}, app, zkstore.WithIdentityRequired())
	})
}
