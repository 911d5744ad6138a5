package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/zkstore"
)

// bin is the corral binary the end-to-end tests run, built by TestMain.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "corral-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "corral")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build corral:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

const wait = 60 * time.Second // bounds every wait on a process

// server is a real store for the processes under test, and a session of the
// test's own on it.
type server struct {
	url string
	st  store.Store
}

// servers starts a real ZooKeeper and a real etcd, each with 2 s sessions
// for the processes, and runs fn on each.
func servers(t *testing.T, fn func(t *testing.T, srv server)) {
	t.Run("zk", func(t *testing.T) {
		zkserver.Require(t)
		zs := zkserver.ForTest(t, zkserver.Config{})
		st, err := zkstore.Open(t.Context(), []string{zs.Addr()}, zkstore.WithLogger(nil))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, server{url: "zk://" + zs.Addr() + "?session=2s", st: st})
	})
	t.Run("etcd", func(t *testing.T) {
		c := etcdserver.Start(t, 1)
		st, err := etcdstore.Dial(t.Context(), c.ClientConfig())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		host := strings.TrimPrefix(c.Endpoints()[0], "http://")
		fn(t, server{url: "etcd://" + host + "?session=2s", st: st})
	})
}

// proc is a running corral process whose stdout lines arrive on lines.
type proc struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *strings.Builder
	done   chan struct{}
	err    error
}

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	return startEnv(t, nil, args...)
}

// startEnv is start with env added to the environment.
func startEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), lines: make(chan string, 100), stderr: &strings.Builder{}, done: make(chan struct{})}
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		io.Copy(io.Discard, out)
		p.err = p.cmd.Wait()
		close(p.lines)
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// line waits for the next stdout line.
func (p *proc) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatalf("corral %v exited without output: %v\n%s", p.cmd.Args[1:], p.err, p.stderr)
		}
		return l
	case <-time.After(wait):
		t.Fatalf("corral %v: no output in %v", p.cmd.Args[1:], wait)
	}
	return ""
}

// exit waits for the process and returns its exit code.
func (p *proc) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(wait):
		t.Fatalf("corral %v did not exit in %v", p.cmd.Args[1:], wait)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return 0
}

// TestLockExcludes: commands run by corral lock from several processes on
// one path never overlap.
func TestLockExcludes(t *testing.T) {
	servers(t, func(t *testing.T, srv server) {
		log := filepath.Join(t.TempDir(), "log")
		script := fmt.Sprintf("echo start >> %s; sleep 0.2; echo end >> %s", log, log)
		var ps []*proc
		for range 3 {
			ps = append(ps, start(t, "lock", "--store", srv.url, "/e2e/excl", "--", "sh", "-c", script))
		}
		for _, p := range ps {
			if code := p.exit(t); code != 0 {
				t.Fatalf("corral lock exit %d; want 0\n%s", code, p.stderr)
			}
		}
		data, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(data), strings.Repeat("start\nend\n", 3); got != want {
			t.Errorf("commands overlapped:\n%s", got)
		}
		assertNoContenders(t, srv, "/e2e/excl")
	})
}

// assertNoContenders checks that no lock node is left under p.
func assertNoContenders(t *testing.T, srv server, p string) {
	t.Helper()
	kids, err := srv.st.Children(t.Context(), p)
	if err != nil && !errors.Is(err, store.ErrNoNode) {
		t.Fatal(err)
	}
	if len(kids) != 0 {
		t.Errorf("nodes left under %s: %v", p, kids)
	}
}

// TestLockKilledHolder: the lock of a holder killed outright passes on
// once its session times out, and its command dies with it.
func TestLockKilledHolder(t *testing.T) {
	servers(t, func(t *testing.T, srv server) {
		holder := start(t, "lock", "--store", srv.url, "/e2e/killed", "--", "sh", "-c", "echo $$; exec sleep 600")
		pid, err := strconv.Atoi(holder.line(t))
		if err != nil {
			t.Fatal(err)
		}
		begun := time.Now()
		holder.cmd.Process.Kill()
		holder.exit(t)
		next := start(t, "lock", "--store", srv.url, "--timeout", "30s", "/e2e/killed", "--", "echo", "second")
		if l := next.line(t); l != "second" {
			t.Errorf("second holder printed %q", l)
		}
		if code := next.exit(t); code != 0 {
			t.Fatalf("second corral lock exit %d; want 0\n%s", code, next.stderr)
		}
		t.Logf("lock passed on %v after the holder was killed", time.Since(begun).Round(time.Millisecond))
		if err := waitGone(pid); err != nil {
			t.Error(err)
		}
	})
}

// waitGone waits until no process has pid.
func waitGone(pid int) error {
	deadline := time.Now().Add(wait)
	for {
		if err := exec.Command("kill", "-0", strconv.Itoa(pid)).Run(); err != nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("command %d outlived its killed corral", pid)
		}
		time.Sleep(20 * time.Millisecond) // polling a process table: there is no event to wait on
	}
}

// TestLockLost: when the holder's node is deleted under it, its command
// is stopped and corral exits 125, saying the lock was lost.
func TestLockLost(t *testing.T) {
	servers(t, func(t *testing.T, srv server) {
		holder := start(t, "lock", "--store", srv.url, "--grace", "2s", "/e2e/lost", "--", "sh", "-c", "echo held; exec sleep 600")
		holder.line(t)
		kids, err := srv.st.Children(t.Context(), "/e2e/lost")
		if err != nil || len(kids) != 1 {
			t.Fatalf("Children = %v, %v; want the holder's node", kids, err)
		}
		if err := srv.st.Delete(t.Context(), store.Join("/e2e/lost", kids[0].Name)); err != nil {
			t.Fatal(err)
		}
		if code := holder.exit(t); code != exitRunFailed {
			t.Errorf("corral lock exit %d; want %d\n%s", code, exitRunFailed, holder.stderr)
		}
		if !strings.Contains(holder.stderr.String(), "lost") {
			t.Errorf("stderr does not say the lock was lost:\n%s", holder.stderr)
		}
	})
}

// TestLockTimeout: --timeout gives up with exit 124 and leaves no node.
func TestLockTimeout(t *testing.T) {
	servers(t, func(t *testing.T, srv server) {
		holder := start(t, "lock", "--store", srv.url, "/e2e/timeout", "--", "sh", "-c", "echo held; exec sleep 600")
		holder.line(t)
		waiter := start(t, "lock", "--store", srv.url, "--timeout", "300ms", "/e2e/timeout", "--", "echo", "never")
		if code := waiter.exit(t); code != exitRunTimeout {
			t.Errorf("corral lock --timeout exit %d; want %d\n%s", code, exitRunTimeout, waiter.stderr)
		}
		kids, err := srv.st.Children(t.Context(), "/e2e/timeout")
		if err != nil || len(kids) != 1 {
			t.Errorf("Children = %v, %v; want only the holder's node", kids, err)
		}
	})
}

// TestElectHandover: when the leader's process is killed, the other
// candidate's command starts.
func TestElectHandover(t *testing.T) {
	servers(t, func(t *testing.T, srv server) {
		ps := map[string]*proc{}
		for _, v := range []string{"a", "b"} {
			ps[v] = start(t, "elect", "--store", srv.url, "--value", v, "/e2e/elect", "--", "sh", "-c", "echo leader; exec sleep 600")
		}
		// The first to print leads; the other must not print until then.
		var first, second string
		select {
		case <-ps["a"].lines:
			first, second = "a", "b"
		case <-ps["b"].lines:
			first, second = "b", "a"
		case <-time.After(wait):
			t.Fatal("nobody was elected")
		}
		observer := start(t, "leader", "--store", srv.url, "/e2e/elect")
		if l := observer.line(t); !strings.HasPrefix(l, first+"\t") {
			t.Errorf("corral leader = %q; want %s", l, first)
		}
		select {
		case l := <-ps[second].lines:
			t.Fatalf("%s printed %q while %s led", second, l, first)
		default:
		}
		ps[first].cmd.Process.Kill()
		ps[first].exit(t)
		if l := ps[second].line(t); l != "leader" {
			t.Errorf("%s printed %q; want leader", second, l)
		}
	})
}

var tokenRE = regexp.MustCompile(`holds the mutex\s+token=(\d+)`)

// TestDemo: the demo runs with nothing installed and its timeline shows
// what it claims.
func TestDemo(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), bin, "demo").CombinedOutput()
	if err != nil {
		t.Fatalf("corral demo: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "every invariant held") {
		t.Errorf("demo output lacks its verdict:\n%s", out)
	}
	prev := int64(-1)
	matches := tokenRE.FindAllStringSubmatch(string(out), -1)
	if len(matches) != 8 {
		t.Errorf("demo shows %d mutex grants; want 8", len(matches))
	}
	for _, m := range matches {
		tok, _ := strconv.ParseInt(m[1], 10, 64)
		if tok <= prev {
			t.Errorf("demo token %d after %d", tok, prev)
		}
		prev = tok
	}
	for _, want := range []string{"leads", "knows it lost", "takes job-4 priority=10", "past Leave"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
}

// TestUsage: bad command lines and unreachable stores get clear messages
// and their documented exit codes.
func TestUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{nil, exitUsage, "Usage"},
		{[]string{"help"}, exitOK, "Exit codes"},
		{[]string{"frobnicate"}, exitUsage, "unknown command"},
		// The commands that run CMD keep 124-127 for themselves, as
		// timeout(1) does, and pass CMD's status through.
		{[]string{"lock", "/x", "--", "true"}, exitRunFailed, "no store"},
		{[]string{"lock", "--store", "redis://h:1", "/x", "--", "true"}, exitRunFailed, "scheme"},
		{[]string{"lock", "--store", "mem://", "x", "--", "true"}, exitRunFailed, "invalid path"},
		{[]string{"lock", "--store", "mem://", "/x"}, exitRunFailed, "no command"},
		{[]string{"lock", "--store", "zk://127.0.0.1:1", "--connect-timeout", "500ms", "/x", "--", "true"}, exitRunFailed, "unreachable"},
		{[]string{"lock", "--store", "mem://", "/x", "--", "sh", "-c", "exit 7"}, 7, ""},
		{[]string{"lock", "--store", "mem://", "/x", "--", "sh", "-c", "exit 3"}, 3, ""},
		{[]string{"lock", "--store", "mem://", "/x", "--", "sh", "-c", "exit 125"}, 125, ""},
		{[]string{"lock", "--store", "mem://", "/x", "--", "sh", "-c", "kill -TERM $$"}, 143, ""},
		{[]string{"lock", "--store", "mem://", "/x", "--", "/nonexistent/corral-test-cmd"}, exitNotFound, "command /nonexistent/corral-test-cmd"},
		{[]string{"lock", "--store", "mem://", "/x", "--", "corral-no-such-command"}, exitNotFound, "not found"},
		{[]string{"lock", "--store", "mem://", "/x", "--", "/dev/null"}, exitCannotRun, "permission denied"},
		{[]string{"elect", "--store", "mem://", "/x", "--", "/nonexistent/corral-test-cmd"}, exitNotFound, "command"},
		{[]string{"barrier", "--store", "mem://", "enter", "1", "/b", "--", "/nonexistent/corral-test-cmd"}, exitNotFound, "command"},
		{[]string{"lock", "--store", "mem://", "/", "--", "true"}, exitRunFailed, "root"},
		{[]string{"leader", "--store", "mem://", "/nobody"}, exitOK, "no leader"},
		{[]string{"barrier", "enter", "0", "/b", "--", "true"}, exitRunFailed, "positive"},
		{[]string{"barrier", "wait"}, exitUsage, "PATH"},
		{[]string{"queue", "pop", "/q"}, exitUsage, "unknown queue action"},
		{[]string{"lock", "--help"}, exitOK, "Usage: corral lock"},
		// Every path error exits 2, the library's refusals too.
		{[]string{"shards", "--store", "mem://", "/"}, exitUsage, "root"},
		{[]string{"group", "--store", "mem://", "/"}, exitUsage, "root"},
		{[]string{"group", "--store", "mem://", "x"}, exitUsage, "invalid path"},
		{[]string{"locks", "--store", "127.0.0.1:2181", "/x"}, exitUsage, "no scheme: want zk://HOST:PORT, etcd://HOST:PORT or mem://"},
		{[]string{"group", "join", "--store", "mem://", "/", "v", "--", "true"}, exitRunFailed, "root"},
		{[]string{"group", "join", "--store", "mem://", "/g", "--", "true"}, exitRunFailed, "PATH VALUE"},
		{[]string{"group", "join", "--store", "mem://", "/g", "v", "--", "sh", "-c", "exit 7"}, 7, ""},
		{[]string{"group", "join", "--store", "mem://", "/g", "v", "--", "/nonexistent/corral-test-cmd"}, exitNotFound, "command"},
		{[]string{"shards", "run", "--store", "mem://", "/p", "0", "a", "--", "true"}, exitRunFailed, "want a number of shards"},
		{[]string{"shards", "run", "--store", "mem://", "/p", "2", "a"}, exitRunFailed, "no command"},
		{[]string{"shards", "run", "--store", "mem://", "/p", "1", "a", "--", "sh", "-c", "exit 9"}, 9, "exited with status 9"},
		{[]string{"shards", "run", "--store", "mem://", "/p", "1", "a", "--", "corral-no-such-command"}, exitNotFound, "not found"},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithTimeout(t.Context(), wait)
		out, err := exec.CommandContext(ctx, bin, tt.args...).CombinedOutput()
		cancel()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tt.code || !strings.Contains(string(out), tt.msg) {
			t.Errorf("corral %q: exit %d, output %q; want exit %d and %q", tt.args, code, out, tt.code, tt.msg)
		}
	}
}

// TestInterrupt: Ctrl-C stops the command, releases the lock and exits 130;
// a waiter interrupted while acquiring leaves no node either.
func TestInterrupt(t *testing.T) {
	servers(t, func(t *testing.T, srv server) {
		holder := start(t, "lock", "--store", srv.url, "/e2e/intr", "--", "sh", "-c", "echo held; exec sleep 600")
		holder.line(t)
		waiter := start(t, "lock", "--store", srv.url, "/e2e/intr", "--", "echo", "never")
		waitChildren(t, srv, "/e2e/intr", 2)
		for _, p := range []*proc{waiter, holder} {
			p.cmd.Process.Signal(os.Interrupt)
			if code := p.exit(t); code != exitInterrupted {
				t.Errorf("corral lock after Ctrl-C: exit %d; want %d\n%s", code, exitInterrupted, p.stderr)
			}
		}
		assertNoContenders(t, srv, "/e2e/intr")

		// Commands that run until interrupted end with 130 too.
		for _, args := range [][]string{{"queue", "consume"}, {"leader", "--watch"}} {
			path := "/e2e/intr-" + args[0]
			if args[0] == "queue" {
				if code := start(t, "queue", "put", "--store", srv.url, path, "x").exit(t); code != 0 {
					t.Fatalf("corral queue put: exit %d", code)
				}
			}
			p := start(t, append(args, "--store", srv.url, path)...)
			p.line(t) // "no leader", or the item: it is running
			p.cmd.Process.Signal(os.Interrupt)
			if code := p.exit(t); code != exitInterrupted {
				t.Errorf("corral %s after Ctrl-C: exit %d; want %d\n%s", args[0], code, exitInterrupted, p.stderr)
			}
		}
	})
}

// waitChildren waits until p has n children.
func waitChildren(t *testing.T, srv server, p string, n int) {
	t.Helper()
	backends.WaitChildren(t, srv.st, p, backends.Count(n))
}

// corral runs corral to its end with stdin as its standard input and
// returns its standard output and exit code.
func corral(t *testing.T, stdin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		t.Fatalf("corral %q: %v\n%s", args, err, stderr.String())
	}
	return string(out), 0
}

// TestQueueCLI: put reads the item from standard input when no DATA is
// given; len, peek and take report the queue; --format json frames items
// with their id, priority and deliveries.
func TestQueueCLI(t *testing.T) {
	servers(t, func(t *testing.T, srv server) {
		path := "/e2e/queue-cli"
		if _, code := corral(t, "line one\nline two\n", "queue", "put", "--store", srv.url, "--priority", "3", path); code != 0 {
			t.Fatalf("queue put from stdin: exit %d", code)
		}
		if _, code := corral(t, "", "queue", "put", "--store", srv.url, path, "second"); code != 0 {
			t.Fatalf("queue put: exit %d", code)
		}
		if out, code := corral(t, "", "queue", "len", "--store", srv.url, path); code != 0 || out != "2\n" {
			t.Errorf("queue len = %q, exit %d; want 2", out, code)
		}
		out, code := corral(t, "", "queue", "peek", "--format", "json", "--store", srv.url, path)
		var peeked struct {
			ID         string `json:"id"`
			Priority   int    `json:"priority"`
			Deliveries int    `json:"deliveries"`
			Data       string `json:"data"`
		}
		if err := json.Unmarshal([]byte(out), &peeked); code != 0 || err != nil || peeked.Data != "line one\nline two\n" || peeked.Priority != 3 || peeked.Deliveries != 0 || peeked.ID == "" {
			t.Errorf("queue peek --format json = %q, exit %d (%v); want the stdin item, priority 3", out, code, err)
		}
		out, code = corral(t, "", "queue", "take", "--format", "json", "--store", srv.url, path)
		var took struct {
			ID         string `json:"id"`
			Deliveries int    `json:"deliveries"`
			Data       string `json:"data"`
		}
		if err := json.Unmarshal([]byte(out), &took); code != 0 || err != nil || took.ID != peeked.ID || took.Deliveries != 1 || took.Data != peeked.Data {
			t.Errorf("queue take --format json = %q, exit %d (%v); want the peeked item, delivered once", out, code, err)
		}
		if out, code := corral(t, "", "queue", "take", "--store", srv.url, path); code != 0 || out != "second" {
			t.Errorf("queue take = %q, exit %d; want second, as it was put", out, code)
		}
		// Raw items round-trip any bytes, as a tar archive must.
		blob := make([]byte, 10240)
		for i := range blob {
			blob[i] = byte(i * 7)
		}
		blob[len(blob)-1] = '\n'
		if out, code := corral(t, string(blob), "queue", "put", "--store", srv.url, path); code != 0 {
			t.Fatalf("queue put of %d bytes = %q, exit %d", len(blob), out, code)
		}
		if out, code := corral(t, "", "queue", "take", "--store", srv.url, path); code != 0 || out != string(blob) {
			t.Errorf("queue take of %d bytes put = %d bytes, exit %d; want them as they were put", len(blob), len(out), code)
		}
		if out, code := corral(t, "", "queue", "put", "--store", srv.url, path, "a"); code != 0 {
			t.Fatalf("queue put = %q, exit %d", out, code)
		}
		if out, code := corral(t, "", "queue", "take", "--format", "line", "--store", srv.url, path); code != 0 || out != "a\n" {
			t.Errorf("queue take --format line = %q, exit %d; want a line", out, code)
		}
		// Empty standard input is refused; an empty DATA is put.
		if out, code := corral(t, "", "queue", "put", "--store", srv.url, path); code != exitUsage {
			t.Errorf("queue put of empty standard input = %q, exit %d; want %d", out, code, exitUsage)
		}
		if n, code := corral(t, "", "queue", "len", "--store", srv.url, path); code != 0 || n != "0\n" {
			t.Errorf("queue len after a refused put = %q, exit %d; want 0", n, code)
		}
		if out, code := corral(t, "", "queue", "put", "--store", srv.url, path, ""); code != 0 {
			t.Errorf("queue put of DATA \"\" = %q, exit %d; want 0", out, code)
		}
		if out, code := corral(t, "", "queue", "take", "--store", srv.url, path); code != 0 || out != "" {
			t.Errorf("queue take of the empty item = %q, exit %d", out, code)
		}
		if out, code := corral(t, "", "queue", "peek", "--store", srv.url, path); code != exitTimeout || out != "" {
			t.Errorf("queue peek of an empty queue = %q, exit %d; want exit %d", out, code, exitTimeout)
		}
		if out, code := corral(t, "\xff\xfe", "queue", "put", "--store", srv.url, path); code != 0 {
			t.Fatalf("queue put of binary data = %q, exit %d", out, code)
		}
		p := start(t, "queue", "consume", "--format", "json", "--store", srv.url, path)
		if l := p.line(t); !strings.Contains(l, `"data_base64":"//4="`) {
			t.Errorf("queue consume --format json of binary data = %q; want data_base64", l)
		}
		p.cmd.Process.Signal(os.Interrupt)
		if code := p.exit(t); code != exitInterrupted {
			t.Errorf("queue consume after Ctrl-C: exit %d; want %d", code, exitInterrupted)
		}
		if out, code := corral(t, "", "queue", "take", "--format", "yaml", "--store", srv.url, path); code != exitUsage {
			t.Errorf("queue take --format yaml = %q, exit %d; want %d", out, code, exitUsage)
		}
	})
}
