package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/store"
)

// TestSignals: SIGTERM and SIGHUP (a closed terminal or ssh session) stop
// the command, release the lock before corral exits, and exit 128+N.
func TestSignals(t *testing.T) {
	servers(t, func(t *testing.T, srv server) {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
			path := "/e2e/signal-" + strings.ToLower(strings.TrimPrefix(sig.String(), "SIG"))
			holder := start(t, "lock", "--store", srv.url, path, "--", "sh", "-c", "echo held; exec sleep 600")
			holder.line(t)
			kids, err := srv.st.Children(t.Context(), path)
			if err != nil || len(kids) != 1 {
				t.Fatalf("Children(%s) = %v, %v; want the holder's node", path, kids, err)
			}
			holder.cmd.Process.Signal(sig)
			if code := holder.exit(t); code != 128+int(sig) {
				t.Errorf("corral lock after %v: exit %d; want %d\n%s", sig, code, 128+int(sig), holder.stderr)
			}
			if !strings.Contains(holder.stderr.String(), "released") {
				t.Errorf("corral lock after %v does not say the lock was released:\n%s", sig, holder.stderr)
			}
			// Released before the exit, not left to the session's end.
			after, err := srv.st.Children(t.Context(), path)
			if err != nil && !errors.Is(err, store.ErrNoNode) {
				t.Fatal(err)
			}
			if slices.ContainsFunc(after, func(c store.Child) bool { return c.Name == kids[0].Name }) {
				t.Errorf("after %v, the holder's node %s is still there", sig, kids[0].Name)
			}
		}
	})
}

// TestLookBeforeLock: a command that does not exist is found out before
// the lock is taken: corral exits 127 at once, even while another holds
// the lock, and never creates a node.
func TestLookBeforeLock(t *testing.T) {
	servers(t, func(t *testing.T, srv server) {
		holder := start(t, "lock", "--store", srv.url, "/e2e/look", "--", "sh", "-c", "echo held; exec sleep 600")
		holder.line(t)
		for _, cmd := range []string{"lock", "elect"} {
			p := start(t, cmd, "--store", srv.url, "--timeout", "20s", "/e2e/look", "--", "corral-no-such-command")
			if code := p.exit(t); code != exitNotFound {
				t.Errorf("corral %s of a missing command: exit %d; want %d\n%s", cmd, code, exitNotFound, p.stderr)
			}
		}
		if kids, err := srv.st.Children(t.Context(), "/e2e/look"); err != nil || len(kids) != 1 {
			t.Errorf("Children = %v, %v; want only the holder's node", kids, err)
		}
	})
}

// TestReleaseRefused: when the store refuses the release (the holder's
// right to delete its node was taken away while it held), corral says so
// and exits 125, although the command succeeded.
func TestReleaseRefused(t *testing.T) {
	check := func(t *testing.T, p *proc, revoke func()) {
		t.Helper()
		p.line(t)
		revoke()
		// The command ends, with status 0, once the FIFO is opened for
		// writing; the open waits for its reader, the command, which must
		// still be there.
		fifo := p.cmd.Env[len(p.cmd.Env)-1][len("FIFO="):]
		opened := make(chan error, 1)
		go func() {
			f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err == nil {
				f.Close()
			}
			opened <- err
		}()
		// unblock opens the FIFO's other end, which frees the open above.
		unblock := func() {
			if r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
				<-opened
				r.Close()
			}
		}
		select {
		case err := <-opened:
			if err != nil {
				t.Fatal(err)
			}
		case <-p.done:
			// The hold ended first: etcd cancels the watch of a key
			// whose read permission went (the holder's watch on its
			// own node), and a hold it can no longer watch is lost, its
			// command stopped. The release is refused all the same.
			unblock()
			t.Logf("the hold ended before the command: %v", p.err)
		case <-time.After(wait):
			unblock()
			t.Fatalf("the command did not open its FIFO in %v", wait)
		}
		if code := p.exit(t); code != exitRunFailed {
			t.Errorf("corral lock with its release refused: exit %d; want %d\n%s", code, exitRunFailed, p.stderr)
		}
		if s := p.stderr.String(); !strings.Contains(s, "release of the lock failed") || !strings.Contains(s, "permission denied") {
			t.Errorf("corral lock stderr = %q; want the refused release", s)
		}
		t.Logf("stderr: %s", p.stderr)
	}
	holdUntilFIFO := func(t *testing.T, env []string, args ...string) *proc {
		fifo := filepath.Join(t.TempDir(), "fifo")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "/e2e/refused", "--", "sh", "-c", `echo held; cat "$FIFO" >/dev/null`)
		return startEnv(t, append(env, "CORRAL_PASSWORD=app-pw", "FIFO="+fifo), args...)
	}
	t.Run("zk", func(t *testing.T) {
		zkserver.Require(t)
		zs := zkserver.ForTest(t, zkserver.Config{})
		p := holdUntilFIFO(t, nil, "lock", "--store", "zk://"+zs.Addr()+"?session=2s", "--user", "app")
		check(t, p, func() {
			conn, _, err := zk.Connect([]string{zs.Addr()}, 10*time.Second, zk.WithLogger(quietZK{}))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := conn.AddAuth("digest", []byte("app:app-pw")); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.SetACL("/e2e/refused", zk.DigestACL(zk.PermAll&^zk.PermDelete, "app", "app-pw"), -1); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("etcd", func(t *testing.T) {
		c := etcdserver.Start(t, 1)
		if err := c.EnableAuth(t.Context(), "root-pw"); err != nil {
			t.Fatal(err)
		}
		if err := c.AddUser(t.Context(), "app", "app-pw", "/app/"); err != nil {
			t.Fatal(err)
		}
		host := strings.TrimPrefix(c.Endpoints()[0], "http://")
		p := holdUntilFIFO(t, nil, "lock", "--store", "etcd://"+host+"/app?session=2s", "--user", "app")
		check(t, p, func() {
			if _, err := c.Client(t).RoleRevokePermission(t.Context(), "app", "/app/", clientv3.GetPrefixRangeEnd("/app/")); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// quietZK is a go-zookeeper logger that logs nothing.
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}
