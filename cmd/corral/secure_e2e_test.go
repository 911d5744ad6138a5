package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/internal/testing/testcert"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/zkstore"
)

// runEnv runs corral with args and the extra environment env, and returns
// its exit code and combined output.
func runEnv(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	// A session of its own: no controlling terminal to prompt on.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	case err != nil:
		t.Fatal(err)
	}
	return 0, string(out)
}

// secured is a store that takes TLS with client certificates and a
// password, for the processes under test.
type secured struct {
	url      string // with the chroot the user may use
	bare     string // the same servers, no chroot
	ca       string
	cert     testcert.Pair
	stranger testcert.Pair // signed by another CA
	expired  testcert.Pair // expired an hour ago
	st       store.Store   // the test's own session, in the chroot
}

// securedServers runs fn on a ZooKeeper server with a TLS port, where the
// tree /app belongs to the digest user app and /other to another, and on
// an etcd with TLS client
// certificates and auth, where the user app's role grants the prefix
// /app/ only. app's password is app-pw on both.
func securedServers(t *testing.T, fn func(t *testing.T, srv secured)) {
	ca := testcert.ForTest(t, "e2e")
	stranger := testcert.ForTest(t, "stranger").MustClient(t, "app")
	client := ca.MustClient(t, "app")
	expired := ca.MustExpiredClient(t, "app")
	t.Run("zk", func(t *testing.T) {
		zkserver.Require(t)
		zs := zkserver.ForTest(t, zkserver.Config{TLS: &zkserver.TLS{KeyStore: ca.MustServer(t, "zk").BundleFile, TrustStore: ca.File}})
		st, err := zkstore.Open(t.Context(), []string{zs.TLSAddr()}, zkstore.WithTLS(ca.ClientTLS(client)),
			zkstore.WithDigestAuth("app", "app-pw"), zkstore.WithChroot("/app"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		// A tree of another user's.
		// Its certificate is another's too: the server authenticates
		// a session as its certificate's subject as well, and
		// CreatorACL grants the creator's every identity.
		other, err := zkstore.Open(t.Context(), []string{zs.TLSAddr()}, zkstore.WithTLS(ca.ClientTLS(ca.MustClient(t, "other"))),
			zkstore.WithDigestAuth("other", "other-pw"), zkstore.WithChroot("/other"))
		if err != nil {
			t.Fatal(err)
		}
		other.Close()
		base := "zk://" + zs.TLSAddr()
		fn(t, secured{url: base + "/app?session=2s", bare: base, ca: ca.File, cert: client, stranger: stranger, expired: expired, st: st})
	})
	t.Run("etcd", func(t *testing.T) {
		c := etcdserver.Start(t, 1, etcdserver.WithTLS(ca, ca.MustServer(t, "etcd")))
		if err := c.EnableAuth(t.Context(), "root-pw"); err != nil {
			t.Fatal(err)
		}
		if err := c.AddUser(t.Context(), "app", "app-pw", "/app/"); err != nil {
			t.Fatal(err)
		}
		st, err := etcdstore.Dial(t.Context(), c.ClientConfig(), etcdstore.WithChroot("/app"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		base := "etcd://" + strings.TrimPrefix(c.Endpoints()[0], "https://")
		fn(t, secured{url: base + "/app?session=2s", bare: base, ca: ca.File, cert: client, stranger: stranger, expired: expired, st: st})
	})
}

// TestSecure: the commands work against secured stores with the
// credentials and certificates given by flags and the environment, and
// fail clearly, with exit code 6, without them.
func TestSecure(t *testing.T) {
	securedServers(t, func(t *testing.T, srv secured) {
		pwFile := filepath.Join(t.TempDir(), "pw")
		if err := os.WriteFile(pwFile, []byte("app-pw\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		tlsEnv := []string{"CORRAL_CACERT=" + srv.ca, "CORRAL_CERT=" + srv.cert.CertFile, "CORRAL_KEY=" + srv.cert.KeyFile}

		// Flags, a password file.
		code, out := runEnv(t, nil, "lock", "--store", srv.url, "--user", "app", "--password-file", pwFile,
			"--cacert", srv.ca, "--cert", srv.cert.CertFile, "--key", srv.cert.KeyFile, "/e2e/lock", "--", "echo", "held")
		if code != 0 || !strings.Contains(out, "held") {
			t.Fatalf("corral lock: exit %d\n%s", code, out)
		}
		// The environment alone, the user in the URL.
		env := append([]string{"CORRAL_PASSWORD=app-pw", "CORRAL_STORE=" + strings.Replace(srv.url, "://", "://app@", 1)}, tlsEnv...)
		if code, out := runEnv(t, env, "queue", "put", "/e2e/q", "job"); code != 0 {
			t.Fatalf("corral queue put: exit %d\n%s", code, out)
		}
		if code, out := runEnv(t, env, "queue", "take", "/e2e/q"); code != 0 || !strings.Contains(out, "job") {
			t.Fatalf("corral queue take: exit %d\n%s", code, out)
		}
		if code, out := runEnv(t, env, "elect", "--value", "me", "/e2e/elect", "--", "echo", "leading"); code != 0 || !strings.Contains(out, "leading") {
			t.Fatalf("corral elect: exit %d\n%s", code, out)
		}
		// The chroot: the test's session, rooted there too, sees the
		// queue's settings where the command stored them (a lock's
		// directory goes with its last node).
		if _, err := srv.st.Get(t.Context(), "/e2e/q/config"); err != nil {
			t.Errorf("Get(/e2e/q/config) in the chroot = %v", err)
		}

		empty := filepath.Join(t.TempDir(), "empty")
		if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		env = append([]string{"CORRAL_USER=app"}, tlsEnv...)
		for _, tc := range []struct {
			name string
			env  []string
			args []string
			code int
			says string
		}{
			{"wrong password", []string{"CORRAL_PASSWORD=wrong"}, []string{"--store", srv.url}, exitDenied, "authentication failed"},
			{"no client certificate", []string{"CORRAL_PASSWORD=app-pw", "CORRAL_CERT=", "CORRAL_KEY="}, []string{"--store", srv.url}, exitDenied, "certificate"},
			{"certificate of another CA", []string{"CORRAL_PASSWORD=app-pw", "CORRAL_CERT=" + srv.stranger.CertFile, "CORRAL_KEY=" + srv.stranger.KeyFile}, []string{"--store", srv.url}, exitDenied, "certificate"},
			{"expired certificate", []string{"CORRAL_PASSWORD=app-pw", "CORRAL_CERT=" + srv.expired.CertFile, "CORRAL_KEY=" + srv.expired.KeyFile}, []string{"--store", srv.url}, exitDenied, "expired at"},
			{"outside the user's tree", []string{"CORRAL_PASSWORD=app-pw"}, []string{"--store", srv.bare + "/other"}, exitDenied, "permission denied"},
			{"password in the URL", nil, []string{"--store", strings.Replace(srv.url, "://", "://app:app-pw@", 1)}, exitUsage, "has a password"},
			{"password in --user", nil, []string{"--store", srv.url, "--user", "app:app-pw"}, exitUsage, "password on the command line"},
			// An empty password is refused the same way from every source.
			{"empty $CORRAL_PASSWORD, no terminal", []string{"CORRAL_PASSWORD="}, []string{"--store", srv.url}, exitUsage, "empty password for user \"app\""},
			{"empty --password-file", []string{"CORRAL_PASSWORD=app-pw", "CORRAL_PASSWORD_FILE=" + empty}, []string{"--store", srv.url}, exitUsage, "empty password for user \"app\" (from --password-file"},
			{"empty --password-file, unknown user", []string{"CORRAL_USER=nosuchuser", "CORRAL_PASSWORD_FILE=" + empty}, []string{"--store", srv.url}, exitUsage, "empty password for user \"nosuchuser\""},
			{"cert without key", []string{"CORRAL_PASSWORD=app-pw", "CORRAL_KEY="}, []string{"--store", srv.url}, exitUsage, "--cert and --key"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				// corral queue put, whose exit codes tell refusals
				// apart (lock keeps 125 for them all).
				cmd := append([]string{"queue", "put", "--connect-timeout", "2s"}, tc.args...)
				cmd = append(cmd, "/e2e/refused", "never")
				code, out := runEnv(t, append(env, tc.env...), cmd...)
				if code != tc.code || !strings.Contains(out, tc.says) {
					t.Errorf("corral %q: exit %d, output %q; want exit %d and %q", cmd, code, out, tc.code, tc.says)
				}
				if strings.Contains(out, "app-pw") {
					t.Errorf("corral %q printed the password: %q", cmd, out)
				}
			})
		}
	})
}
