package partition_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	gosync "sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/tcpproxy"
	"github.com/corral-go/corral/internal/testing/zkbackend"
	"github.com/corral-go/corral/partition"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/zkstore"
)

// chaosChildEnv makes the test binary a member process of TestChaos, with
// the chaosConfig (JSON) it holds.
const chaosChildEnv = "CORRAL_PARTITION_CHAOS_CHILD"

// chaosConfig is what a member process is told.
type chaosConfig struct {
	Store    string   // "zk" or "etcd"
	Addrs    []string // the servers
	Session  time.Duration
	Path     string
	Shards   int
	ID       string
	Grace    time.Duration
	Recorder string // the URL of the fenced resource
	// Drain is how long the work on a shard takes to stop once it is
	// told to (reassigned, or its member leaves); 0: drainWrites writes.
	Drain time.Duration
}

// writeEvery is how often a member process writes to each shard it works
// on; after it is told to hand a shard over, it writes drainWrites more
// times, writeEvery apart, before it releases the shard: work that takes a
// while to stop, as the grace allows.
const (
	writeEvery  = 20 * time.Millisecond
	drainWrites = 2
)

// TestChaos: members of one partition run as separate processes on a real
// ZooKeeper and a real etcd, each working on its shards by writing to a
// shared fenced resource (the recorder) while the test kills one with
// SIGKILL and stops another with SIGSTOP past its session, then lets it go
// on with SIGCONT, and then cuts a third one's links to the servers for less
// than its session. The recorder finds no two running processes working on
// one shard, no write of a running owner refused as stale (so tokens grow
// with every owner), no two owners with one token, and no more than the one
// request in flight per shard from a process after it was killed or woke
// (its shards end before it runs again); every shard is owned again, evenly,
// within twice the session plus the grace after each fault; the stopped
// member stops by itself when it wakes; and once the others have left, no
// node of any member is left in the store.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("starts member processes and waits out two sessions per store")
	}
	for _, name := range []string{"zk", "etcd"} {
		t.Run(name, func(t *testing.T) {
			if !backends.Selected(name) {
				t.Skipf("%s not in CORRAL_STORES", name)
			}
			chaos(t, name)
		})
	}
}

// TestChurn: members of one partition run as separate processes, and
// leave and join again and again while the work on a shard takes longer to
// stop than the grace. A member that leaves leaves the assignment first, so
// the others take its shards at once and no shard is assigned to a member
// that will never take it: no shard goes without a live owner for longer
// than the grace plus a second (a member that stayed in the assignment
// while its work drained left shards unowned for the whole drain, 8 to 14 s
// with the default grace). Work that outlasts the grace overlaps the next
// owner's, whose greater token fences the old one's writes.
func TestChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts member processes")
	}
	for _, name := range []string{"zk", "etcd"} {
		t.Run(name, func(t *testing.T) {
			if !backends.Selected(name) {
				t.Skipf("%s not in CORRAL_STORES", name)
			}
			churn(t, name)
		})
	}
}

func churn(t *testing.T, name string) {
	const (
		k      = 8
		grace  = 300 * time.Millisecond
		drain  = 800 * time.Millisecond // longer than the grace
		rounds = 3
		bound  = grace + time.Second
	)
	b := backends.Get(t, name)
	cfg := chaosConfig{Store: name, Session: 2 * time.Second, Path: dir(t), Shards: k, Grace: grace, Drain: drain}
	switch b := b.(type) {
	case *zkbackend.Backend:
		cfg.Addrs = b.Servers()
	case *etcdbackend.Backend:
		cfg.Addrs = b.Cluster().Endpoints()
	}
	rec := newRecorder(k)
	rec.overlap = true
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	cfg.Recorder = srv.URL
	defer rec.check(t)

	start := func(id string) *member {
		c := cfg
		c.ID = id
		return startMember(t, rec, c)
	}
	live := []string{"a", "b", "c"}
	procs := map[string]*member{}
	for _, id := range live {
		procs[id] = start(id)
	}
	rec.waitBalanced(t, live, timeout)
	rec.startGaps()
	for i := range rounds {
		// The oldest leaves while a newcomer joins.
		out, in := live[0], fmt.Sprintf("n%d", i)
		procs[in] = start(in)
		procs[out].leave(t)
		rec.mark(out, gone)
		live = append(live[1:], in)
		rec.waitBalanced(t, live, timeout)
	}
	if gap, shard := rec.maxGap(); gap > bound {
		t.Errorf("shard %d went %v without a live owner; want at most the grace plus a second (%v)", shard, gap, bound)
	} else {
		t.Logf("longest time a shard had no live owner: %v (shard %d), bound %v", gap, shard, bound)
	}
	for _, id := range live {
		procs[id].leave(t)
	}
	for id, p := range procs {
		p.exit()
		if err := p.wait(t); err != nil {
			t.Errorf("member %s exited with %v; want success", id, err)
		}
	}
	t.Logf("%d writes accepted, %d refused as stale", rec.accepted, rec.refused)
}

func chaos(t *testing.T, name string) {
	const (
		k       = 8
		session = 2 * time.Second
		grace   = 500 * time.Millisecond
		// bound is how soon every shard must be owned again after a
		// fault: the server ends the dead member's session within
		// the session timeout (etcd checks leases twice a second,
		// ZooKeeper every tick), the others see its node go and take
		// its shards within a few round trips, and a shard that moves
		// between live members waits at most the grace; the second
		// session's worth is room for a loaded machine.
		bound = 2*session + grace
	)
	b := backends.Get(t, name)
	cfg := chaosConfig{Store: name, Session: session, Path: dir(t), Shards: k, Grace: grace}
	switch b := b.(type) {
	case *zkbackend.Backend:
		cfg.Addrs = b.Servers()
	case *etcdbackend.Backend:
		cfg.Addrs = b.Cluster().Endpoints()
	}
	rec := newRecorder(k)
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close) // after the processes are gone: cleanups run last first
	cfg.Recorder = srv.URL
	defer rec.check(t)

	ids := []string{"a", "b", "c", "d"}
	procs := map[string]*member{}
	// c reaches the servers through proxies of its own, for its links to
	// be cut.
	var cLinks *links
	for _, id := range ids {
		c := cfg
		c.ID = id
		if id == "c" {
			c.Addrs, cLinks = proxied(t, cfg.Addrs)
		}
		procs[id] = startMember(t, rec, c)
	}
	rec.waitBalanced(t, ids, timeout)

	// a is killed: its shards are taken once its session ends.
	rec.mark("a", dead)
	procs["a"].signal(t, syscall.SIGKILL)
	t.Logf("kill -9: every shard owned again after %v", rec.waitBalanced(t, ids[1:], bound))
	if err := procs["a"].wait(t); !signalled(err, syscall.SIGKILL) {
		t.Errorf("killed member exited with %v; want killed", err)
	}

	// b is stopped past its session: the others take its shards, and
	// when it goes on it has none and stops.
	rec.mark("b", frozen)
	procs["b"].signal(t, syscall.SIGSTOP)
	t.Logf("SIGSTOP: every shard owned again after %v", rec.waitBalanced(t, ids[2:], bound))
	rec.mark("b", woken)
	procs["b"].signal(t, syscall.SIGCONT)
	if err := procs["b"].wait(t); exitCode(err) != 3 {
		t.Errorf("member stopped past its session exited with %v; want exit status 3 (member stopped)", err)
	}

	// c's links are cut, for less than its session: it reconnects with
	// the same session and keeps its shards, and nobody else works on
	// them meanwhile (the recorder would say so). Its Leave below then
	// finds it still a member.
	cLinks.cut(t)
	t.Logf("link cut: every shard owned evenly after %v", rec.waitBalanced(t, ids[2:], bound))

	// The others leave; their sessions live on until they exit.
	for _, id := range ids[2:] {
		procs[id].leave(t)
	}
	if left := ownedNodes(t, b.Open(t), cfg.Path); len(left) > 0 {
		t.Errorf("nodes left under %s after every member left or died: %q", cfg.Path, left)
	}
	for _, id := range ids[2:] {
		procs[id].exit()
		if err := procs[id].wait(t); err != nil {
			t.Errorf("member %s exited with %v after Leave; want success", id, err)
		}
	}
	t.Logf("%d writes accepted, %d refused as stale", rec.accepted, rec.refused)
}

// links are the proxies one member reaches the servers through, so that
// the test can cut them and see it reconnect.
type links struct {
	proxies []*tcpproxy.Proxy
	newest  []atomic.Uint64 // by proxy: the newest connection that relayed anything
	relayed chan struct{}   // cap 1: a connection relayed something
}

// proxied returns addrs, servers' addresses as a member is given them
// (host:port, or a URL), each through a proxy of its own, and the proxies.
func proxied(t *testing.T, addrs []string) ([]string, *links) {
	t.Helper()
	l := &links{newest: make([]atomic.Uint64, len(addrs)), relayed: make(chan struct{}, 1)}
	var out []string
	for i, a := range addrs {
		target, scheme := a, ""
		if u, err := url.Parse(a); err == nil && u.Host != "" {
			target, scheme = u.Host, u.Scheme+"://"
		}
		p, err := tcpproxy.New(target)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		// Whatever has arrived is one message: only its connection
		// matters.
		p.SetHook(func(b []byte) int { return len(b) }, func(m tcpproxy.Message) tcpproxy.Action {
			for cur := l.newest[i].Load(); m.Conn > cur && !l.newest[i].CompareAndSwap(cur, m.Conn); cur = l.newest[i].Load() {
			}
			select {
			case l.relayed <- struct{}{}:
			default:
			}
			return tcpproxy.Forward
		})
		l.proxies = append(l.proxies, p)
		out = append(out, scheme+p.Addr())
	}
	return out, l
}

// cut closes every connection of the links, and waits until a connection
// opened since relays something: the member has reconnected.
func (l *links) cut(t *testing.T) {
	t.Helper()
	before := make([]uint64, len(l.proxies))
	for i, p := range l.proxies {
		before[i] = l.newest[i].Load()
		p.Cut()
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		for i := range l.proxies {
			if l.newest[i].Load() > before[i] {
				return
			}
		}
		select {
		case <-l.relayed:
		case <-timer.C:
			t.Fatalf("no connection through the cut links after %v", timeout)
		}
	}
}

// ownedNodes returns the nodes under root (root included) that belong to a
// session: those of a member that never went.
func ownedNodes(t *testing.T, st store.Store, root string) []string {
	t.Helper()
	ctx := ctxFor(t)
	var left []string
	var walk func(p string)
	walk = func(p string) {
		n, err := st.Get(ctx, p)
		if err == nil && n.Owner != 0 {
			left = append(left, p)
		}
		if err != nil && !errors.Is(err, store.ErrNoNode) {
			t.Errorf("Get(%s) = %v", p, err)
		}
		kids, err := st.Children(ctx, p)
		if err != nil && !errors.Is(err, store.ErrNoNode) {
			t.Errorf("Children(%s) = %v", p, err)
		}
		for _, c := range kids {
			walk(store.Join(p, c.Name))
		}
	}
	walk(root)
	return left
}

func signalled(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

// member is one member process.
type member struct {
	id     string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr bytes.Buffer // written until done is closed
	done   chan struct{}
	err    error // set before done is closed
}

// startMember starts the test binary as the member process c describes;
// it is killed, if it still runs, when the test ends.
func startMember(t *testing.T, rec *recorder, c chaosConfig) *member {
	t.Helper()
	env, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	m := &member{id: c.ID, done: make(chan struct{})}
	m.cmd = exec.Command(os.Args[0], "-test.run=^$")
	m.cmd.Env = append(os.Environ(), chaosChildEnv+"="+string(env))
	m.cmd.Stderr = &m.stderr
	if m.stdin, err = m.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	m.stdout = bufio.NewReader(out)
	rec.mark(c.ID, running)
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		m.err = m.cmd.Wait()
		close(m.done)
	}()
	t.Cleanup(func() {
		select {
		case <-m.done:
		default:
			// SIGKILL ends a stopped process too.
			_ = m.cmd.Process.Signal(syscall.SIGKILL)
			<-m.done
		}
		if t.Failed() && m.stderr.Len() > 0 {
			t.Logf("member %s stderr:\n%s", m.id, m.stderr.String())
		}
	})
	return m
}

// signal sends sig to the member's process, by its pid.
func (m *member) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := m.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to member %s: %v", sig, m.id, err)
	}
}

// leave tells the member to leave, and waits until it has.
func (m *member) leave(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(m.stdin, "leave\n"); err != nil {
		t.Fatalf("member %s: %v", m.id, err)
	}
	line := make(chan string, 1)
	go func() {
		l, _ := m.stdout.ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if l != "left\n" {
			t.Fatalf("member %s answered %q to leave; want left", m.id, l)
		}
	case <-time.After(timeout):
		t.Fatalf("member %s has not left %v later", m.id, timeout)
	}
}

// exit tells the member to exit (to leave first if it has not).
func (m *member) exit() { _ = m.stdin.Close() }

// wait waits for the member's process to exit, and returns how.
func (m *member) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-m.done:
		return m.err
	case <-time.After(timeout):
		t.Fatalf("member %s still running %v later", m.id, timeout)
	}
	return nil
}

// A procState is what the test has done to a member process.
type procState int

const (
	running procState = iota
	frozen            // stopped by SIGSTOP
	woken             // continued by SIGCONT after a stop past its session
	dead              // killed by SIGKILL
	gone              // left, and its work on every shard stopped
)

// recorder is the shared resource the member processes work on: it takes
// a write for a shard only with a token at least the last it took for that
// shard (fencing), and checks, from the begin and end of each owner's work
// and the test's signals, that no two running processes work on one shard.
type recorder struct {
	k    int
	tick chan struct{} // cap 1: ownership changed

	mu       gosync.Mutex
	state    map[string]procState
	open     []map[owner]bool // by shard: the works on it, and whether each was told to stop
	begun    []int64          // by shard: the greatest token work began under
	last     []int64          // by shard: the token of the last write taken
	lastBy   []string         // by shard: who wrote it
	late     map[string]int   // "id/shard": requests after a kill or a wake
	woke     map[string]time.Time
	accepted int
	refused  int
	errs     []string

	// overlap: a process told to stop working on a shard (op told)
	// may go on until its end while the next owner begins; its writes
	// after that are refused as stale, and that is no failure.
	overlap bool
	// gaps: since startGaps, how long each shard went with no live
	// owner (none working that was not told to stop).
	gaps     bool
	unowned  []time.Time // by shard: since when, or the zero Time
	gap      time.Duration
	gapShard int
}

func newRecorder(k int) *recorder {
	r := &recorder{k: k, tick: make(chan struct{}, 1), state: map[string]procState{},
		open: make([]map[owner]bool, k), begun: make([]int64, k), last: make([]int64, k),
		lastBy: make([]string, k), late: map[string]int{}, woke: map[string]time.Time{},
		unowned: make([]time.Time, k)}
	for i := range r.open {
		r.open[i] = map[owner]bool{}
		r.begun[i], r.last[i] = -1, -1
	}
	return r
}

// owner is one process's work on a shard, under one token.
type owner struct {
	id  string
	tok int64
}

func (r *recorder) fail(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.errs {
		t.Error(e)
	}
}

// mark records what the test is about to do to process id. A process
// killed, or woken after a stop past its session, owns nothing from then
// on: its shards' contexts end before it runs again, so a woken process
// that finds one live (a request whose check came after the wake) is a
// failure, and it sends at most the request it had in flight.
func (r *recorder) mark(id string, s procState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state[id] = s
	if s == woken {
		r.woke[id] = time.Now()
	}
	if s == dead || s == woken {
		for _, o := range r.open {
			for q := range o {
				if q.id == id {
					delete(o, q)
				}
			}
		}
	}
}

// ServeHTTP takes a member's request: op begin, write or end, for shard
// under token. A write refused as stale gets 409.
func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	id, op := q.Get("id"), q.Get("op")
	s, err1 := strconv.Atoi(q.Get("shard"))
	tok, err2 := strconv.ParseInt(q.Get("token"), 10, 64)
	if err1 != nil || err2 != nil || s < 0 || s >= r.k {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	checked, err := strconv.ParseInt(q.Get("checked"), 10, 64)
	if err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	if t, ok := r.woke[id]; ok && op != "end" && checked > t.UnixNano() {
		r.fail("shard %d: %s found its shard's context live (%s, token %d) %v after it woke past its session",
			s, id, op, tok, time.Duration(checked-t.UnixNano()))
	}
	ok := r.apply(op, id, s, tok)
	r.mu.Unlock()
	select {
	case r.tick <- struct{}{}:
	default:
	}
	if !ok {
		http.Error(w, "stale token", http.StatusConflict)
	}
}

func (r *recorder) apply(op, id string, s int, tok int64) bool {
	st := r.state[id]
	if (st == dead || st == woken) && op != "end" {
		// Its shards ended while it could not run: at most the
		// request it was making then may come.
		key := fmt.Sprintf("%s/%d", id, s)
		if r.late[key]++; r.late[key] > 1 {
			r.fail("shard %d: %s %d requests (%s, token %d) after it was killed or woke past its session; want at most the one in flight", s, id, r.late[key], op, tok)
		}
		if op == "write" {
			return r.fence(id, s, tok)
		}
		return true
	}
	defer r.owned(s)
	me := owner{id, tok}
	switch op {
	case "told":
		if _, ok := r.open[s][me]; ok {
			r.open[s][me] = true
		}
	case "begin":
		for q, told := range r.open[s] {
			if r.overlap && told {
				continue // its work drains beside ours, fenced
			}
			if q.id != id && r.state[q.id] == running {
				r.fail("shard %d: %s begins (token %d) while %s works on it (token %d)", s, id, tok, q.id, q.tok)
			}
			delete(r.open[s], q) // a stopped owner's work is over
		}
		if tok <= r.begun[s] {
			r.fail("shard %d: %s begins with token %d, not above %d", s, id, tok, r.begun[s])
		}
		r.open[s][me], r.begun[s] = false, max(r.begun[s], tok)
	case "write":
		told, ok := r.open[s][me]
		if !ok {
			r.fail("shard %d: %s writes with token %d and has not begun work under it", s, id, tok)
		}
		if !r.fence(id, s, tok) {
			if !told {
				r.fail("shard %d: write of %s, working on it, refused: token %d below %d of %s", s, id, tok, r.last[s], r.lastBy[s])
			}
			return false
		}
	case "end":
		delete(r.open[s], me)
	}
	return true
}

// startGaps starts measuring how long shards go without a live owner.
func (r *recorder) startGaps() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gaps = true
	for s := range r.k {
		r.owned(s)
	}
}

// owned notes whether shard s has a live owner now: one working on it that
// was not told to stop. r.mu is held.
func (r *recorder) owned(s int) {
	if !r.gaps {
		return
	}
	live := false
	for q, told := range r.open[s] {
		live = live || !told && r.state[q.id] == running
	}
	switch {
	case live && !r.unowned[s].IsZero():
		if d := time.Since(r.unowned[s]); d > r.gap {
			r.gap, r.gapShard = d, s
		}
		r.unowned[s] = time.Time{}
	case !live && r.unowned[s].IsZero():
		r.unowned[s] = time.Now()
	}
}

// maxGap returns the longest time a shard went without a live owner, and
// which.
func (r *recorder) maxGap() (time.Duration, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for s := range r.k {
		r.owned(s)
	}
	return r.gap, r.gapShard
}

// fence takes or refuses a write.
func (r *recorder) fence(id string, s int, tok int64) bool {
	switch {
	case tok < r.last[s]:
		r.refused++
		return false
	case tok == r.last[s] && id != r.lastBy[s]:
		r.fail("shard %d: %s and %s both write with token %d", s, r.lastBy[s], id, tok)
	}
	r.last[s], r.lastBy[s] = tok, id
	r.accepted++
	return true
}

// balanced reports whether every shard is worked on by one running
// process alone, the one of ids that Assign gives it (so each has ⌊k/M⌋
// or ⌈k/M⌉ shards).
func (r *recorder) balanced(ids []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	owners, err := partition.Assign(ids, r.k)
	if err != nil {
		return false
	}
	for s, owner := range owners {
		var owners []string
		for q, told := range r.open[s] {
			if !told && r.state[q.id] == running {
				owners = append(owners, q.id)
			}
		}
		if len(owners) != 1 || owners[0] != owner {
			return false
		}
	}
	return true
}

// waitBalanced waits until the shards are balanced over ids, for at most
// bound, and returns how long that took.
func (r *recorder) waitBalanced(t *testing.T, ids []string, bound time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	for !r.balanced(ids) {
		select {
		case <-r.tick:
		case <-timer.C:
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("shards not owned evenly by %v within %v: %v", ids, bound, r.open)
		}
	}
	return time.Since(start)
}

// chaosChild is the member process: it joins the partition and runs it,
// working on each shard it owns by writing to the recorder until the
// shard's context ends; it leaves on a line or the end of its stdin, says
// "left" on stdout, and exits with status 0 (closing its session) when its
// stdin ends. When the member stops by itself it exits with status 3, and
// with 2 on any other failure.
func chaosChild(env string) int {
	var c chaosConfig
	if err := json.Unmarshal([]byte(env), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	st, err := openChild(ctx, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer st.Close()
	m, err := partition.Join(ctx, st, c.Path, c.Shards, c.ID, partition.WithGrace(c.Grace))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	w := &childWorker{cfg: c, cli: &http.Client{Timeout: timeout}}
	ran := make(chan error, 1)
	go func() { ran <- m.Run(context.Background(), w.work) }()
	// Any line on stdin, or its end, says leave; "left" on stdout says
	// done, and the session lives until stdin ends.
	in := bufio.NewReader(os.Stdin)
	leave := make(chan struct{})
	go func() {
		_, _ = in.ReadString('\n')
		close(leave)
	}()
	code := 0
	select {
	case <-leave:
		lctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := m.Leave(lctx); err != nil {
			fmt.Fprintln(os.Stderr, "leave:", err)
			code = 2
		}
		if err := <-ran; err != nil {
			fmt.Fprintln(os.Stderr, "run:", err)
			code = 2
		}
		fmt.Println("left")
		_, _ = io.Copy(io.Discard, in)
	case err := <-ran:
		fmt.Fprintln(os.Stderr, "member stopped:", err)
		code = 3
	}
	return code
}

func openChild(ctx context.Context, c chaosConfig) (store.Store, error) {
	if c.Store == "zk" {
		return zkstore.Open(ctx, c.Addrs, zkstore.WithSessionTimeout(c.Session))
	}
	return etcdstore.Dial(ctx, clientv3.Config{Endpoints: c.Addrs, DialTimeout: 5 * time.Second}, etcdstore.WithTTL(c.Session))
}

// childWorker works on a member process's shards.
type childWorker struct {
	cfg chaosConfig
	cli *http.Client
}

// work tells the recorder it begins work on s, writes until ctx (s's
// context) ends, says it ended, and returns, which releases s. Each request
// completes before the next step, so that the release comes after the last
// write.
func (w *childWorker) work(ctx context.Context, s *partition.Shard) error {
	op := "begin"
	var live time.Time // when ctx was last found live
	for {
		// The time is read before the check, so that the check was
		// made no earlier: a process stopped between the two would
		// otherwise report the time it woke.
		now := time.Now()
		if ctx.Err() != nil {
			break
		}
		live = now
		w.post(op, s, live)
		op = "write"
		select {
		case <-ctx.Done():
		case <-time.After(writeEvery):
		}
	}
	if op == "write" {
		if c := context.Cause(ctx); errors.Is(c, partition.ErrReassigned) || errors.Is(c, partition.ErrLeft) {
			// Told to hand the shard over: its work takes a while
			// to stop, and nobody else may begin before it returns
			// or the grace passes.
			w.post("told", s, live)
			told := time.Now()
			for i := 0; i < drainWrites || time.Since(told) < w.cfg.Drain; i++ {
				time.Sleep(writeEvery)
				w.post("write", s, live)
			}
		}
		w.post("end", s, live)
	}
	return nil
}

// post makes a request of the recorder; checked is when the shard's
// context was last found live.
func (w *childWorker) post(op string, s *partition.Shard, checked time.Time) {
	q := url.Values{"op": {op}, "id": {w.cfg.ID}, "shard": {strconv.Itoa(s.ID())},
		"token": {strconv.FormatInt(s.Token(), 10)}, "checked": {strconv.FormatInt(checked.UnixNano(), 10)}}
	resp, err := w.cli.Post(w.cfg.Recorder+"?"+q.Encode(), "text/plain", strings.NewReader(""))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s %v: %v\n", op, s, err)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}
