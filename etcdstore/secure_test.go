package etcdstore_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/internal/testing/smoke"
	"github.com/corral-go/corral/internal/testing/testcert"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	corralsync "github.com/corral-go/corral/sync"
)

// dialAs dials c as user (no credentials for ""), with opts.
func dialAs(ctx context.Context, c *etcdserver.Cluster, user, password string, opts ...etcdstore.Option) (*etcdstore.Store, error) {
	cfg := c.ClientConfig()
	cfg.Username, cfg.Password = user, password
	return etcdstore.Dial(ctx, cfg, opts...)
}

// TestAuth runs etcd with authentication: a user whose role grants only
// the prefix /app/ runs the conformance suite and the recipes with
// WithChroot("/app"), and no key outside /app/ is touched; missing or
// wrong credentials fail Dial with ErrAuth, a role that grants nothing
// there with ErrPermission, and a write a role does not grant fails with
// ErrPermission.
func TestAuth(t *testing.T) {
	c := etcdserver.Start(t, 1)
	// Each subtest has a timeout of its own: the conformance suite may
	// take most of one on a busy machine.
	ctx := ctxFor(t)
	if err := c.EnableAuth(ctx, "root-pw"); err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct{ user, prefix string }{{"app", "/app/"}, {"other", "/other/"}} {
		if err := c.AddUser(ctx, u.user, u.user+"-pw", u.prefix); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("conformance", func(t *testing.T) {
		storetest.Run(t, etcdbackend.NewAs(c, "app", "app-pw", etcdstore.WithChroot("/app")))
	})
	t.Run("recipes", func(t *testing.T) {
		ctx := ctxFor(t)
		var sts []store.Store
		for range 2 {
			st, err := dialAs(ctx, c, "app", "app-pw", etcdstore.WithChroot("/app"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			sts = append(sts, st)
		}
		smoke.Recipes(t, sts[0], sts[1], "/recipes")
	})
	t.Run("no key outside the chroot", func(t *testing.T) {
		ctx := ctxFor(t)
		resp, err := c.Client(t).Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		var app int
		for _, kv := range resp.Kvs {
			if k := string(kv.Key); !strings.HasPrefix(k, "/app/") {
				t.Errorf("key %q outside /app/", k)
			} else {
				app++
			}
		}
		if app == 0 {
			t.Error("no key under /app/: the tests above wrote nothing?")
		}
	})
	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			name, user, password string
			opts                 []etcdstore.Option
			want                 error
			says                 string
		}{
			{"no credentials", "", "", nil, store.ErrAuth, "user name is empty"},
			{"wrong password", "app", "wrong", nil, store.ErrAuth, "invalid user ID or password"},
			{"unknown user", "ghost", "pw", nil, store.ErrAuth, "invalid user ID or password"},
			{"no chroot", "app", "app-pw", nil, store.ErrPermission, "WithChroot"},
			{"another prefix", "other", "other-pw", []etcdstore.Option{etcdstore.WithChroot("/app")}, store.ErrPermission, "must grant read and write on the prefix /app/"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				st, err := dialAs(ctxFor(t), c, tc.user, tc.password, tc.opts...)
				if err == nil {
					st.Close()
					t.Fatal("Dial succeeded")
				}
				if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("Dial = %v; want %v, saying %q", err, tc.want, tc.says)
				}
				t.Logf("Dial: %v", err)
			})
		}
	})
	t.Run("read only", func(t *testing.T) {
		ctx := ctxFor(t)
		cli := c.Client(t)
		if _, err := cli.RoleAdd(ctx, "reader"); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.RoleGrantPermission(ctx, "reader", "/app/", "/app0", clientv3.PermissionType(clientv3.PermRead)); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.UserAdd(ctx, "reader", "reader-pw"); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.UserGrantRole(ctx, "reader", "reader"); err != nil {
			t.Fatal(err)
		}
		st, err := dialAs(ctx, c, "reader", "reader-pw", etcdstore.WithChroot("/app"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if _, err := st.Children(ctx, "/"); err != nil {
			t.Errorf("Children(/) = %v; want the listing", err)
		}
		if err := corralsync.NewMutex(st, "/readers-lock").Lock(ctx); !errors.Is(err, store.ErrPermission) {
			t.Errorf("Mutex.Lock = %v; want ErrPermission", err)
		}
		if _, err := st.Create(ctx, "/x", nil, store.Persistent); !errors.Is(err, store.ErrPermission) {
			t.Errorf("Create = %v; want ErrPermission", err)
		}
	})
}

// TestChroot: a Store with a chroot sees only the keys below it, under
// its own paths; two chroots do not see each other.
func TestChroot(t *testing.T) {
	c := etcdserver.Start(t, 1)
	ctx := ctxFor(t)
	open := func(opts ...etcdstore.Option) *etcdstore.Store {
		st, err := etcdstore.Dial(ctx, c.ClientConfig(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a, b, whole := open(etcdstore.WithChroot("/a")), open(etcdstore.WithChroot("/b/deeper")), open()
	na, err := a.Create(ctx, "/x/n-", []byte("a"), store.EphemeralSequential)
	if err != nil {
		t.Fatal(err)
	}
	nb, err := b.Create(ctx, "/x/n-", []byte("b"), store.EphemeralSequential)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		st *etcdstore.Store
		n  store.Node
	}{"a": {a, na}, "b": {b, nb}} {
		if !strings.HasPrefix(tc.n.Path, "/x/n-") {
			t.Errorf("%s: Create = %s; want a path in the Store's tree", name, tc.n.Path)
		}
		kids, err := tc.st.Children(ctx, "/x")
		if err != nil || len(kids) != 1 || kids[0].Name != tc.n.Name() {
			t.Errorf("%s: Children(/x) = %v, %v; want only %s", name, kids, err, tc.n.Name())
		}
		root, err := tc.st.Children(ctx, "/")
		if err != nil || len(root) != 1 || root[0].Name != "x" {
			t.Errorf("%s: Children(/) = %v, %v; want only x", name, root, err)
		}
	}
	for _, p := range []string{"/a/x/" + na.Name(), "/b/deeper/x/" + nb.Name()} {
		if _, err := whole.Get(ctx, p); err != nil {
			t.Errorf("Get(%s) without chroot = %v", p, err)
		}
	}
	if _, err := etcdstore.Dial(ctx, c.ClientConfig(), etcdstore.WithChroot("a")); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("Dial(WithChroot(a)) = %v; want ErrInvalidArgument", err)
	}
}

// TestTLS runs the conformance suite and the recipes on etcd serving
// clients over TLS with client certificates; clients without a
// certificate the server trusts, or that do not trust the server's, fail
// Dial with an error that says so.
func TestTLS(t *testing.T) {
	ca := testcert.ForTest(t, "etcd")
	c := etcdserver.Start(t, 1, etcdserver.WithTLS(ca, ca.MustServer(t, "etcd-server")))
	t.Run("conformance", func(t *testing.T) {
		storetest.Run(t, etcdbackend.New(c))
	})
	t.Run("recipes", func(t *testing.T) {
		b := etcdbackend.New(c)
		smoke.Recipes(t, b.Open(t), b.Open(t), "/recipes")
	})
	t.Run("refused", func(t *testing.T) {
		stranger := testcert.ForTest(t, "stranger")
		tls12 := &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{stranger.MustClient(t, "alice").Cert}, MaxVersion: tls.VersionTLS12}
		for _, tc := range []struct {
			name string
			tls  *tls.Config
			says string
		}{
			{"no client certificate", ca.ClientTLS(), "certificate required"},
			// crypto/tls sends no certificate the server's CAs did not
			// sign; under TLS 1.3 the server says so after the
			// client's side of the handshake is done.
			{"certificate of another CA", &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{stranger.MustClient(t, "alice").Cert}}, "certificate required"},
			{"certificate of another CA, TLS 1.2", tls12, "had none its CAs signed"},
			{"expired certificate", ca.ClientTLS(ca.MustExpiredClient(t, "alice")), "expired certificate"},
			{"server not trusted", stranger.ClientTLS(ca.MustClient(t, "alice")), "unknown authority"},
		} {
			// With a password, clientv3.New authenticates before Dial
			// sends anything, and waits up to DialTimeout; without,
			// the first request waits up to the attempt timeout. A
			// refusal fails Dial at once either way.
			for _, password := range []string{"", "secret"} {
				t.Run(fmt.Sprintf("%s/password=%q", tc.name, password), func(t *testing.T) {
					t.Parallel()
					cfg := c.ClientConfig()
					cfg.TLS = tc.tls
					cfg.Username, cfg.Password = "alice", password
					cfg.DialTimeout = 20 * time.Second
					ctx, cancel := context.WithTimeout(t.Context(), 2*cfg.DialTimeout)
					defer cancel()
					begun := time.Now()
					st, err := etcdstore.Dial(ctx, cfg)
					took := time.Since(begun)
					if err == nil {
						st.Close()
						t.Fatal("Dial succeeded")
					}
					host := strings.TrimPrefix(cfg.Endpoints[0], "https://")
					if !errors.Is(err, store.ErrAuth) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), host) {
						t.Errorf("Dial = %v; want ErrAuth, naming %s and saying %q", err, host, tc.says)
					}
					if errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded || took >= cfg.DialTimeout {
						t.Errorf("Dial = %v after %v; want a refusal, not a timeout", err, took)
					}
					t.Logf("Dial after %v: %v", took.Round(time.Millisecond), err)
				})
			}
		}
		// An endpoint that refuses beside one that accepts: the
		// client uses the one that accepts.
		t.Run("one endpoint of two refuses", func(t *testing.T) {
			t.Parallel()
			l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{stranger.MustServer(t, "stranger-server").Cert}})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					conn, err := l.Accept()
					if err != nil {
						return
					}
					conn.(*tls.Conn).HandshakeContext(t.Context())
					conn.Close()
				}
			})
			defer wg.Wait()
			defer l.Close()
			cfg := c.ClientConfig()
			cfg.Endpoints = append(cfg.Endpoints, "https://"+l.Addr().String())
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			st, err := etcdstore.Dial(ctx, cfg)
			if err != nil {
				t.Fatalf("Dial(%v) = %v; want a session on the endpoint that accepts", cfg.Endpoints, err)
			}
			st.Close()
		})
		// A connection that does not speak TLS is only unreachable.
		t.Run("no TLS", func(t *testing.T) {
			t.Parallel()
			cfg := c.ClientConfig()
			cfg.TLS = nil
			for i, ep := range cfg.Endpoints {
				cfg.Endpoints[i] = strings.Replace(ep, "https://", "http://", 1)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			st, err := etcdstore.Dial(ctx, cfg)
			if err == nil {
				st.Close()
				t.Fatal("Dial succeeded")
			}
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, store.ErrAuth) || !strings.Contains(err.Error(), "server preface: EOF") {
				t.Errorf("Dial = %v; want DeadlineExceeded, not ErrAuth, saying %q", err, "server preface: EOF")
			}
		})
	})
}
