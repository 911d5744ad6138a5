package shared_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/zkbackend"
	"github.com/corral-go/corral/shared"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/sync"
	"github.com/corral-go/corral/zkstore"
)

// holderChildEnv makes the test binary a holder process of
// TestPausedHolder, with the holderConfig (JSON) it holds.
const holderChildEnv = "CORRAL_SHARED_HOLDER_CHILD"

// holderConfig is what a holder process is told.
type holderConfig struct {
	Store string   // "zk" or "etcd"
	Addrs []string // the servers
	// Session is the timeout of the session that holds the lock; Data
	// that of a second session, which outlives the pause, that the
	// process writes through as well.
	Session, Data time.Duration
	Lock, Value   string
}

// TestPausedHolder: a holder runs as a process of its own on a real
// ZooKeeper and a real etcd, takes a lock and writes under it; it is
// stopped (SIGSTOP) past its lock's session, the next holder takes the
// lock and writes, and the first one is continued (SIGCONT) and writes
// again under its old hold, through its lock's session and through a
// second session still alive: both writes are refused, the second by the
// server because the hold's node is gone (ErrLost), and the next holder's
// write stands.
func TestPausedHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a holder process and waits out its session on each store")
	}
	for _, name := range []string{"zk", "etcd"} {
		t.Run(name, func(t *testing.T) {
			if !backends.Selected(name) {
				t.Skipf("%s not in CORRAL_STORES", name)
			}
			pausedHolder(t, name)
		})
	}
}

func pausedHolder(t *testing.T, name string) {
	ctx := ctxFor(t)
	b := backends.Get(t, name)
	dir := fmt.Sprintf("/shared/%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
	cfg := holderConfig{Store: name, Session: 2 * time.Second, Data: 30 * time.Second, Lock: dir + "/lock", Value: dir + "/state"}
	switch b := b.(type) {
	case *zkbackend.Backend:
		cfg.Addrs = b.Servers()
	case *etcdbackend.Backend:
		cfg.Addrs = b.Cluster().Endpoints()
	}
	p := startHolder(t, cfg)
	if l := p.line(t); l != "held" {
		t.Fatalf("holder process said %q; want held (stderr: %s)", l, p.stderr.String())
	}
	p.signal(t, syscall.SIGSTOP)

	st := b.Open(t)
	t.Cleanup(func() { _ = st.Close() })
	m := sync.NewMutex(st, cfg.Lock)
	if err := m.Lock(ctx); err != nil { // once the stopped holder's session ends
		t.Fatalf("Lock by the next holder = %v", err)
	}
	defer m.Unlock(context.Background())
	next := m
	v := shared.NewValue(st, cfg.Value)
	got, err := v.SetWhile(ctx, next, []byte("next holder"))
	wantSnap(t, "SetWhile by the next holder", got, err, "next holder", 1)

	p.signal(t, syscall.SIGCONT)
	if _, err := io.WriteString(p.stdin, "write\n"); err != nil {
		t.Fatal(err)
	}
	want := "data:lost lock:refused held:false"
	if l := p.line(t); l != want {
		t.Errorf("stale holder after SIGCONT: %q; want %q (stderr: %s)", l, want, p.stderr.String())
	}
	if err := p.wait(t); err != nil {
		t.Errorf("holder process: %v (stderr: %s)", err, p.stderr.String())
	}
	got, err = v.Get(ctx)
	wantSnap(t, "value after the stale holder's writes", got, err, "next holder", 1)
	got, err = v.SetWhile(ctx, next, []byte("next holder again"))
	wantSnap(t, "SetWhile by the next holder after them", got, err, "next holder again", 2)
}

// holderProc is a running holder process.
type holderProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr strings.Builder
	done   chan error
}

func startHolder(t *testing.T, c holderConfig) *holderProc {
	t.Helper()
	env, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	p := &holderProc{done: make(chan error, 1)}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), holderChildEnv+"="+string(env))
	p.cmd.Stderr = &p.stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdout = bufio.NewReader(out)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL) // a stopped process too
		<-p.done
	})
	return p
}

func (p *holderProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// line reads the process's next line.
func (p *holderProc) line(t *testing.T) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		l, _ := p.stdout.ReadString('\n')
		ch <- strings.TrimSuffix(l, "\n")
	}()
	select {
	case l := <-ch:
		return l
	case <-time.After(30 * time.Second):
		t.Fatalf("holder process said nothing for 30s (stderr: %s)", p.stderr.String())
	}
	return ""
}

func (p *holderProc) wait(t *testing.T) error {
	t.Helper()
	_ = p.stdin.Close()
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("holder process still running 30s later")
	}
	return nil
}

// holderChild is a holder process: it takes the lock on a session of
// config.Session, writes under it through a second session, says "held",
// and on a line from stdin writes again under the same hold, through both
// sessions, and says what became of the writes and of its hold.
func holderChild(env string) int {
	var c holderConfig
	if err := json.Unmarshal([]byte(env), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lockSt, err := openStore(ctx, c, c.Session)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer lockSt.Close()
	dataSt, err := openStore(ctx, c, c.Data)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer dataSt.Close()
	m := sync.NewMutex(lockSt, c.Lock)
	if err := m.Lock(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	held := m.Context()
	h := m // the lock is the hold its writes go under
	data := shared.NewValue(dataSt, c.Value)
	if _, err := data.SetWhile(ctx, h, []byte("first holder")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("held")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// Woken: the hold's context says it ended, but this process writes
	// anyway, as one whose check came before the pause would. The Mutex
	// still names its node until it is unlocked: the server decides.
	_, viaData := data.SetWhile(ctx, h, []byte("stale, through a live session"))
	_, viaLock := shared.NewValue(lockSt, c.Value).SetWhile(ctx, h, []byte("stale, through its own session"))
	fmt.Printf("data:%s lock:%s held:%v\n", outcome(viaData), outcome(viaLock), held.Err() == nil)
	if viaData != nil || viaLock != nil {
		fmt.Fprintln(os.Stderr, "data:", viaData, "lock:", viaLock)
	}
	return 0
}

// outcome names what became of a write: written, lost (the server refused
// it: the hold's node was gone), refused (its session had ended, or it was
// lost), or the error.
func outcome(err error) string {
	switch {
	case err == nil:
		return "written"
	case errors.Is(err, shared.ErrLost) && !errors.Is(err, store.ErrSessionExpired):
		return "lost"
	case errors.Is(err, store.ErrSessionExpired), errors.Is(err, shared.ErrLost):
		return "refused"
	}
	return err.Error()
}

func openStore(ctx context.Context, c holderConfig, session time.Duration) (store.Store, error) {
	if c.Store == "zk" {
		return zkstore.Open(ctx, c.Addrs, zkstore.WithSessionTimeout(session))
	}
	return etcdstore.Dial(ctx, clientv3.Config{Endpoints: c.Addrs, DialTimeout: 5 * time.Second}, etcdstore.WithTTL(session))
}
