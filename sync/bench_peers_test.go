package sync_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	gosync "sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/sync"
	"github.com/corral-go/corral/zkstore"
)

// BenchmarkLockPeers puts corral's Mutex beside the lock each store's own
// client offers (go-zookeeper's zk.Lock, etcd's concurrency.Mutex), with N
// sessions, each with a client of its own, contending for one lock: every
// contender locks and unlocks at once, in a loop. It runs rounds of both in
// turns (A B, B A, ...) on the same server and the same sessions, a new lock
// path per round, and reports the medians over the rounds:
//
//   - acq/s: lock handoffs per second (acquisitions granted in the
//     measured window over its length), and ratio, corral's over the
//     peer's;
//   - p99-ms: the 99th percentile of a Lock call's duration;
//   - srv-µs/acq: the server's CPU time per acquisition (ZooKeeper runs in
//     a JVM of its own; etcd runs in a process of its own, an embedded 3.6
//     server by default);
//   - cli-µs/acq: this process's CPU time per acquisition (the clients),
//     allocs/acq: the heap objects it allocated per acquisition, and
//     faults/acq: its minor page faults per acquisition;
//   - kB/acq: bytes the server sent to the clients per acquisition (etcd:
//     payload as gRPC counts it; ZooKeeper: mntr's zk_response_bytes,
//     responses and watch events), and on etcd req/acq: messages the clients sent
//     (unary requests, watch creations and cancellations, lease renewals);
//   - req/acq (ZooKeeper): requests the server received (srvr's
//     "Received", pings included).
//
// Each round begins with a garbage collection, and the variants first run
// two rounds each that are not counted (A B A B). The test process holds
// every variant's sessions at once (go-zookeeper keeps 3 MB of buffers per
// connection: about 200 MB at N=32), so its heap collects rarely: a round
// allocates from pages no collection has freed yet, and the runtime hands
// free pages back to the system while the other variant runs
// (GODEBUG=scavtrace=1 shows it; with GODEBUG=madvdontneed=0 those pages
// come back without faults). A variant whose objects are in size classes
// with no room left then faults in a fresh page per 4 kB (corral's
// listings are a few kB each; zk.Lock's are many small strings, in spans
// that already had room). Measured at N=32 with a warm-up of a second per
// variant and no collections between rounds: corral's rounds faulted about
// 10,000 times each and zk.Lock's about 60, which cost corral a tenth of
// its handoffs. Now neither faults more than about 0.5 times per
// acquisition (faults/acq), and a program with one session, whose heap
// collects often, sees no such thing.
//
// At N=1 ZooKeeper also runs the floor: go-zookeeper's protected create,
// getChildren and delete on one connection, the requests of an
// uncontended lock cycle with nothing else.
//
// corral's etcd sessions get the lease TTL concurrency.Session has by
// default (60 s), so that both renew their leases as often.
//
//	go test -run '^$' -bench LockPeers -benchtime 1x -timeout 60m ./sync/
//
// Environment: CORRAL_STORES (zk, etcd), CORRAL_PEER_N (default
// "1,8,32,128,512"; ZooKeeper stops at 128 unless asked), CORRAL_PEER_ROUNDS
// (3), CORRAL_PEER_SECONDS (measured seconds per round, 3; a second of
// warm-up comes first), CORRAL_ETCD_BIN (an etcd binary to serve instead of
// the embedded server, such as Debian's etcd-server 3.4: /usr/bin/etcd),
// CORRAL_PEER_ONLY (run only the variant so named, to profile it),
// CORRAL_PEER_DATA=none (corral's nodes hold no identity record),
// CORRAL_ETCD_CPUPROFILE (a file: the embedded etcd server's CPU profile,
// written when the benchmark ends; read it with go tool pprof and a test
// binary built by go test -c).
func BenchmarkLockPeers(b *testing.B) {
	for _, name := range []string{"zk", "etcd"} {
		b.Run(name, func(b *testing.B) {
			if !backends.Selected(name) {
				b.Skipf("%s not in CORRAL_STORES", name)
			}
			var env peerEnv
			if name == "zk" {
				env = newZKPeers(b)
			} else {
				env = newEtcdPeers(b)
			}
			for _, n := range envInts("CORRAL_PEER_N", []int{1, 8, 32, 128, 512}) {
				if name == "zk" && n > 128 && os.Getenv("CORRAL_PEER_N") == "" {
					continue
				}
				b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
					for b.Loop() {
						comparePeers(b, env, n)
					}
				})
			}
		})
	}
}

// peerEnv is one store's server and the variants run on it.
type peerEnv interface {
	// variants returns the variants at n contenders, corral's first and
	// the peer second.
	variants(b *testing.B, n int) []*peerVariant
	// snapshot returns the server's counters now.
	snapshot(b *testing.B, v *peerVariant) counters
}

// peerVariant is one lock implementation with n open sessions.
type peerVariant struct {
	name string
	// lockers returns one locker per session on the lock at path.
	lockers func(path string) []benchLocker
	close   func()
	// bytes and msgs count what the variant's clients received and sent
	// (etcd only).
	bytes, msgs atomic.Int64
}

type counters struct {
	srvCPU, cliCPU time.Duration
	bytes, reqs    int64
	allocs         int64 // heap objects this process allocated (the clients)
	faults         int64 // this process's minor page faults
}

func (c counters) sub(d counters) counters {
	return counters{c.srvCPU - d.srvCPU, c.cliCPU - d.cliCPU, c.bytes - d.bytes, c.reqs - d.reqs, c.allocs - d.allocs, c.faults - d.faults}
}

type roundResult struct {
	acqPerSec float64
	p99       time.Duration
	perAcq    counters // per acquisition, bytes in bytes
	acq       int
}

var peerRuns atomic.Int64

// comparePeers runs the rounds at n contenders and reports the medians.
func comparePeers(b *testing.B, env peerEnv, n int) {
	all := env.variants(b, n)
	defer func() {
		for _, v := range all {
			v.close()
		}
	}()
	vs := all
	if only := os.Getenv("CORRAL_PEER_ONLY"); only != "" {
		// For profiling one variant: the others are opened but not run.
		vs = slices.DeleteFunc(slices.Clone(vs), func(v *peerVariant) bool { return v.name != only })
		if len(vs) == 0 {
			b.Fatalf("CORRAL_PEER_ONLY=%q names no variant", only)
		}
	}
	rounds := envInts("CORRAL_PEER_ROUNDS", []int{3})[0]
	measured := time.Duration(envInts("CORRAL_PEER_SECONDS", []int{3})[0]) * time.Second
	// A fresh server (a JVM compiling its hot paths, an etcd with empty
	// caches) favours whoever comes second: every variant warms up first,
	// and twice over, for this process's heap (see BenchmarkLockPeers).
	for range 2 {
		for _, v := range vs {
			peerRound(b, env, v, v.lockers(fmt.Sprintf("/bench/peers/warm-%s-%d-%d", v.name, n, peerRuns.Add(1))), time.Second, measured)
		}
	}
	results := make([][]roundResult, len(vs))
	for r := range rounds {
		for k := range vs {
			i := k
			if r%2 == 1 {
				i = len(vs) - 1 - k // A B, B A, A B, ...
			}
			v := vs[i]
			path := fmt.Sprintf("/bench/peers/%s-%d-%d-%d", v.name, n, r, peerRuns.Add(1))
			res := peerRound(b, env, v, v.lockers(path), time.Second, measured)
			results[i] = append(results[i], res)
			// Printed, not logged: a benchmark's log keeps ten lines.
			fmt.Printf("round %d %-18s N=%-3d %8.0f acq/s  p99 %7.2f ms  srv %6.0f µs/acq  cli %6.0f µs/acq  %5.0f allocs/acq  %5.2f faults/acq  %6.2f kB/acq  %5.2f req/acq  (%d acq)\n",
				r, v.name, n, res.acqPerSec, ms(res.p99), us(res.perAcq.srvCPU), us(res.perAcq.cliCPU),
				float64(res.perAcq.allocs)/1000, float64(res.perAcq.faults)/1000, float64(res.perAcq.bytes)/1e6, float64(res.perAcq.reqs)/1000, res.acq)
		}
	}
	med := make([]roundResult, len(vs))
	for i, rs := range results {
		med[i] = medianResult(rs)
		v := vs[i].name
		b.ReportMetric(med[i].acqPerSec, v+"-acq/s")
		b.ReportMetric(ms(med[i].p99), v+"-p99-ms")
		b.ReportMetric(us(med[i].perAcq.srvCPU), v+"-srv-µs/acq")
		b.ReportMetric(us(med[i].perAcq.cliCPU), v+"-cli-µs/acq")
		b.ReportMetric(float64(med[i].perAcq.allocs)/1000, v+"-allocs/acq")
		b.ReportMetric(float64(med[i].perAcq.faults)/1000, v+"-faults/acq")
		if med[i].perAcq.bytes > 0 {
			b.ReportMetric(float64(med[i].perAcq.bytes)/1e6, v+"-kB/acq")
		}
		b.ReportMetric(float64(med[i].perAcq.reqs)/1000, v+"-req/acq")
	}
	for i := 1; i < len(vs) && vs[0].name == "corral"; i++ {
		b.ReportMetric(med[0].acqPerSec/med[i].acqPerSec, "ratio-"+vs[i].name)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// us turns a per-acquisition duration (kept in nanoseconds ×1000) into µs.
func us(d time.Duration) float64 { return float64(d) / 1e6 }

// medianResult returns, field by field, the median of rs.
func medianResult(rs []roundResult) roundResult {
	med := func(f func(roundResult) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	return roundResult{
		acqPerSec: med(func(r roundResult) float64 { return r.acqPerSec }),
		p99:       time.Duration(med(func(r roundResult) float64 { return float64(r.p99) })),
		perAcq: counters{
			srvCPU: time.Duration(med(func(r roundResult) float64 { return float64(r.perAcq.srvCPU) })),
			cliCPU: time.Duration(med(func(r roundResult) float64 { return float64(r.perAcq.cliCPU) })),
			bytes:  int64(med(func(r roundResult) float64 { return float64(r.perAcq.bytes) })),
			reqs:   int64(med(func(r roundResult) float64 { return float64(r.perAcq.reqs) })),
			allocs: int64(med(func(r roundResult) float64 { return float64(r.perAcq.allocs) })),
			faults: int64(med(func(r roundResult) float64 { return float64(r.perAcq.faults) })),
		},
	}
}

// peerRound runs the contenders ls for warm+measured, counting the
// acquisitions granted within the measured window, then lets every
// contender finish its cycle.
func peerRound(b *testing.B, env peerEnv, v *peerVariant, ls []benchLocker, warm, measured time.Duration) roundResult {
	ctx := b.Context()
	runtime.GC() // see BenchmarkLockPeers
	start := time.Now()
	from, until := start.Add(warm), start.Add(warm+measured)
	var (
		mu     gosync.Mutex
		lat    []time.Duration
		c0, c1 counters
		wg     gosync.WaitGroup
		errs   = make(chan error, len(ls))
	)
	wg.Go(func() {
		time.Sleep(time.Until(from))
		c0 = env.snapshot(b, v)
		time.Sleep(time.Until(until))
		c1 = env.snapshot(b, v)
	})
	for _, l := range ls {
		wg.Go(func() {
			for time.Now().Before(until) {
				t0 := time.Now()
				if err := l.lock(ctx); err != nil {
					errs <- err
					return
				}
				t1 := time.Now()
				if !t1.Before(from) && t1.Before(until) {
					mu.Lock()
					lat = append(lat, t1.Sub(t0))
					mu.Unlock()
				}
				if err := l.unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	if len(lat) == 0 {
		b.Fatalf("%s: no acquisition in %v", v.name, measured)
	}
	slices.Sort(lat)
	d := c1.sub(c0)
	n := int64(len(lat))
	return roundResult{
		acqPerSec: float64(n) / measured.Seconds(),
		p99:       lat[len(lat)*99/100],
		// Kept ×1000 so that integer division loses nothing that matters.
		perAcq: counters{d.srvCPU * 1000 / time.Duration(n), d.cliCPU * 1000 / time.Duration(n), d.bytes * 1000 / n, d.reqs * 1000 / n, d.allocs * 1000 / n, d.faults * 1000 / n},
		acq:    len(lat),
	}
}

// corralOpts returns the options of corral's mutexes: with
// CORRAL_PEER_DATA=none their nodes hold no identity record (as the peers'
// hold no data), to weigh what the record costs.
func corralOpts() []sync.LockOption {
	if os.Getenv("CORRAL_PEER_DATA") == "none" {
		return []sync.LockOption{sync.WithData(nil)}
	}
	return nil
}

// envInts parses a comma-separated list of integers from the environment.
func envInts(name string, def []int) []int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			panic(fmt.Sprintf("%s=%q: want positive integers", name, s))
		}
		out = append(out, n)
	}
	return out
}

// procCPU returns the CPU time (user and system) of process pid.
func procCPU(b testing.TB, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name, in parentheses, may hold spaces: skip past it.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// self returns this process's counters: its CPU time, heap objects
// allocated and minor page faults so far.
func self() counters {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return counters{cliCPU: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), allocs: selfAllocs(), faults: int64(ru.Minflt)}
}

// selfAllocs returns the heap objects this process has allocated so far.
func selfAllocs() int64 {
	m := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	metrics.Read(m)
	return int64(m[0].Value.Uint64())
}

// ZooKeeper.

type zkPeers struct {
	srv   *zkserver.Server
	addrs []string
}

func newZKPeers(b *testing.B) *zkPeers {
	srv := zkserver.ForTest(b, zkserver.Config{})
	e := &zkPeers{srv: srv, addrs: []string{srv.Addr()}}
	warmZK(b, e.addrs, 3*time.Second)
	return e
}

var (
	zkReceived = regexp.MustCompile(`(?m)^Received: (\d+)`)
	// zkResponseBytes is what the server sent its clients: responses and
	// watch events (mntr's counter).
	zkResponseBytes = regexp.MustCompile(`(?m)^zk_response_bytes\s+(\d+)`)
)

func (e *zkPeers) snapshot(b *testing.B, _ *peerVariant) counters {
	c := self()
	c.srvCPU = procCPU(b, e.srv.Pid())
	out, err := zkserver.FourLetter(e.srv.Addr(), "srvr")
	if m := zkReceived.FindStringSubmatch(out); err == nil && m != nil {
		c.reqs, _ = strconv.ParseInt(m[1], 10, 64)
	}
	out, err = zkserver.FourLetter(e.srv.Addr(), "mntr")
	if m := zkResponseBytes.FindStringSubmatch(out); err == nil && m != nil {
		c.bytes, _ = strconv.ParseInt(m[1], 10, 64)
	}
	return c
}

func (e *zkPeers) variants(b *testing.B, n int) []*peerVariant {
	ctx := b.Context()
	var sts []*zkstore.Store
	var conns []*zk.Conn
	for range n {
		st, err := zkstore.Open(ctx, e.addrs, zkstore.WithLogger(nil))
		if err != nil {
			b.Fatal(err)
		}
		sts = append(sts, st)
		conns = append(conns, dialZK(b, e.addrs))
	}
	vs := []*peerVariant{{
		name: "corral",
		lockers: func(path string) []benchLocker {
			ls := make([]benchLocker, n)
			for i, st := range sts {
				m := sync.NewMutex(st, path, corralOpts()...)
				ls[i] = benchLocker{lock: m.Lock, unlock: m.Unlock}
			}
			return ls
		},
		close: func() {
			for _, st := range sts {
				st.Close()
			}
		},
	}, {
		name: "zk.Lock",
		lockers: func(path string) []benchLocker {
			ls := make([]benchLocker, n)
			for i, c := range conns {
				l := zk.NewLock(c, path, zk.WorldACL(zk.PermAll))
				ls[i] = benchLocker{
					lock:   func(context.Context) error { return l.Lock() },
					unlock: func(context.Context) error { return l.Unlock() },
				}
			}
			return ls
		},
		close: func() {
			for _, c := range conns {
				c.Close()
			}
		},
	}}
	if n == 1 {
		c := dialZK(b, e.addrs)
		acl := zk.WorldACL(zk.PermAll)
		vs = append(vs, &peerVariant{
			name: "floor",
			lockers: func(path string) []benchLocker {
				if _, err := c.Create(path, nil, 0, acl); err != nil {
					b.Fatal(err)
				}
				var node string
				return []benchLocker{{
					lock: func(context.Context) (err error) {
						if node, err = c.CreateProtectedEphemeralSequential(path+"/lock-", nil, acl); err != nil {
							return err
						}
						_, _, err = c.Children(path)
						return err
					},
					unlock: func(context.Context) error { return c.Delete(node, -1) },
				}}
			},
			close: c.Close,
		})
	}
	return vs
}

func dialZK(b *testing.B, addrs []string) *zk.Conn {
	conn, events, err := zk.Connect(addrs, zkstore.DefaultSessionTimeout, zk.WithLogger(quiet{}), zk.WithLogInfo(false))
	if err != nil {
		b.Fatal(err)
	}
	waitZK(b, events)
	return conn
}

// etcd.

type etcdPeers struct {
	endpoint string
	pid      int
}

// newEtcdPeers starts an etcd server in a process of its own: this test
// binary again, running TestEtcdServerProcess, or CORRAL_ETCD_BIN.
func newEtcdPeers(b *testing.B) *etcdPeers {
	endpoint, pid := startEtcdProcess(b)
	return &etcdPeers{endpoint: endpoint, pid: pid}
}

func startEtcdProcess(b *testing.B) (string, int) {
	dir := b.TempDir()
	var cmd *exec.Cmd
	if bin := os.Getenv("CORRAL_ETCD_BIN"); bin != "" {
		ports := freeTCPPorts(b, 2)
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		cmd = exec.Command(bin, "--data-dir", dir, "--name", "m0",
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", "m0="+peer, "--log-level", "error", "--logger", "zap")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		waitEtcd(b, client)
		return client, cmd.Process.Pid
	}
	cmd = exec.Command(os.Args[0], "-test.run=^TestEtcdServerProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "CORRAL_ETCD_PROCESS="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if url, ok := strings.CutPrefix(sc.Text(), "ENDPOINT "); ok {
			go io.Copy(io.Discard, stdout)
			return url, cmd.Process.Pid
		}
	}
	b.Fatalf("etcd server process: no endpoint: %v", sc.Err())
	return "", 0
}

func freeTCPPorts(b *testing.B, n int) []int {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func waitEtcd(b *testing.B, endpoint string) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, Logger: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(b.Context(), time.Second)
		_, err = cli.Get(ctx, "/")
		cancel()
		if err == nil {
			return
		}
	}
	b.Fatalf("etcd at %s: %v", endpoint, err)
}

// TestEtcdServerProcess is not a test: it is the etcd server of the peer
// benchmarks, run by them in a process of its own (this test binary again)
// so that they can read its CPU time. It serves until its stdin closes.
func TestEtcdServerProcess(t *testing.T) {
	dir := os.Getenv("CORRAL_ETCD_PROCESS")
	if dir == "" {
		t.Skip("the etcd server of BenchmarkLockPeers, run by it")
	}
	c, err := etcdserver.New(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if prof := os.Getenv("CORRAL_ETCD_CPUPROFILE"); prof != "" {
		f, err := os.Create(prof)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Printf("ENDPOINT %s\n", c.Members[0].ListenURL)
	io.Copy(io.Discard, os.Stdin)
}

func (e *etcdPeers) snapshot(b *testing.B, v *peerVariant) counters {
	c := self()
	c.srvCPU, c.bytes, c.reqs = procCPU(b, e.pid), v.bytes.Load(), v.msgs.Load()
	return c
}

// config returns a client configuration whose traffic counts toward v.
func (e *etcdPeers) config(v *peerVariant) clientv3.Config {
	return clientv3.Config{
		Endpoints:   []string{e.endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithStatsHandler(&trafficCounter{v})},
	}
}

func (e *etcdPeers) variants(b *testing.B, n int) []*peerVariant {
	ctx := b.Context()
	corral := &peerVariant{name: "corral"}
	peer := &peerVariant{name: "concurrency.Mutex"}
	var sts []*etcdstore.Store
	var sess []*concurrency.Session
	var clis []*clientv3.Client
	for range n {
		st, err := etcdstore.Dial(ctx, e.config(corral), etcdstore.WithTTL(60*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		sts = append(sts, st)
		cli, err := clientv3.New(e.config(peer))
		if err != nil {
			b.Fatal(err)
		}
		s, err := concurrency.NewSession(cli)
		if err != nil {
			b.Fatal(err)
		}
		clis, sess = append(clis, cli), append(sess, s)
	}
	corral.lockers = func(path string) []benchLocker {
		ls := make([]benchLocker, n)
		for i, st := range sts {
			m := sync.NewMutex(st, path, corralOpts()...)
			ls[i] = benchLocker{lock: m.Lock, unlock: m.Unlock}
		}
		return ls
	}
	corral.close = func() {
		for _, st := range sts {
			st.Close()
		}
	}
	peer.lockers = func(path string) []benchLocker {
		ls := make([]benchLocker, n)
		for i, s := range sess {
			m := concurrency.NewMutex(s, path)
			ls[i] = benchLocker{lock: m.Lock, unlock: m.Unlock}
		}
		return ls
	}
	peer.close = func() {
		for i, s := range sess {
			s.Close()
			clis[i].Close()
		}
	}
	return []*peerVariant{corral, peer}
}

// trafficCounter counts the payload bytes a client receives and the
// messages it sends.
type trafficCounter struct{ v *peerVariant }

func (t *trafficCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (t *trafficCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (t *trafficCounter) HandleConn(context.Context, stats.ConnStats) {}
func (t *trafficCounter) HandleRPC(_ context.Context, s stats.RPCStats) {
	switch s := s.(type) {
	case *stats.InPayload:
		t.v.bytes.Add(int64(s.WireLength))
	case *stats.OutPayload:
		t.v.msgs.Add(1)
	}
}

// BenchmarkLockHistory locks and unlocks one lock on one etcd server that
// is never compacted, 50,000 cycles in all at N sessions (1 and 8), corral's
// Mutex and concurrency.Mutex in turns, a hundredth of the cycles at a time,
// each on its own lock path that it keeps: etcd keeps every key ever
// written until compaction, so a lock whose cost grows with the keys its
// directory ever held slows down tenth by tenth. Each tenth runs in ten
// slices, the two in turns. It prints, for every tenth,
// cycles/s, the server's CPU time per cycle and the acquire p99, and
// reports the first and last tenths and their ratio (last ÷ first).
//
//	go test -run '^$' -bench LockHistory -benchtime 1x -timeout 60m ./sync/
//
// Environment: CORRAL_HISTORY_CYCLES (50000), CORRAL_HISTORY_N ("1,8"),
// CORRAL_ETCD_BIN (as for BenchmarkLockPeers: /usr/bin/etcd runs Debian's
// etcd-server 3.4).
func BenchmarkLockHistory(b *testing.B) {
	if !backends.Selected("etcd") {
		b.Skip("etcd not in CORRAL_STORES")
	}
	env := newEtcdPeers(b)
	cycles := envInts("CORRAL_HISTORY_CYCLES", []int{50000})[0]
	for _, n := range envInts("CORRAL_HISTORY_N", []int{1, 8}) {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			for b.Loop() {
				history(b, env, n, cycles)
			}
		})
	}
}

func history(b *testing.B, env *etcdPeers, n, cycles int) {
	vs := env.variants(b, n)
	defer func() {
		for _, v := range vs {
			v.close()
		}
	}()
	run := peerRuns.Add(1)
	ls := make([][]benchLocker, len(vs))
	for i, v := range vs {
		ls[i] = v.lockers(fmt.Sprintf("/bench/history/%s-%d-%d", v.name, n, run))
	}
	type tenth struct {
		perSec float64
		srv    time.Duration
		p99    time.Duration
	}
	for _, v := range vs {
		// Warm up on a path of its own, which leaves the measured path's
		// history alone.
		cycle(b, v.lockers(fmt.Sprintf("/bench/history/warm-%s-%d-%d", v.name, n, run)), min(1000, cycles/10))
	}
	tenths := make([][]tenth, len(vs))
	// Each tenth runs in ten slices, the variants in turns, so that the
	// load of a shared machine weighs on both alike.
	for t := range 10 {
		took := make([]time.Duration, len(vs))
		srv := make([]time.Duration, len(vs))
		lats := make([][]time.Duration, len(vs))
		for slice := range 10 {
			for k := range vs {
				i := (k + slice) % len(vs)
				c0 := env.snapshot(b, vs[i])
				start := time.Now()
				lats[i] = append(lats[i], cycle(b, ls[i], cycles/100)...)
				took[i] += time.Since(start)
				srv[i] += env.snapshot(b, vs[i]).sub(c0).srvCPU
			}
		}
		for i, v := range vs {
			lat := lats[i]
			slices.Sort(lat)
			tn := tenth{
				perSec: float64(len(lat)) / took[i].Seconds(),
				srv:    srv[i] / time.Duration(len(lat)),
				p99:    lat[len(lat)*99/100],
			}
			tenths[i] = append(tenths[i], tn)
			fmt.Printf("tenth %2d %-18s N=%d %7.0f cycles/s  srv %5.0f µs/cycle  p99 %7.2f ms\n",
				t+1, v.name, n, tn.perSec, float64(tn.srv.Nanoseconds())/1000, ms(tn.p99))
		}
	}
	for i, v := range vs {
		first, last := tenths[i][0], tenths[i][9]
		b.ReportMetric(first.perSec, v.name+"-first-cycles/s")
		b.ReportMetric(last.perSec, v.name+"-last-cycles/s")
		b.ReportMetric(float64(first.srv.Nanoseconds())/1000, v.name+"-first-srv-µs")
		b.ReportMetric(float64(last.srv.Nanoseconds())/1000, v.name+"-last-srv-µs")
		b.ReportMetric(last.perSec/first.perSec, v.name+"-last/first")
	}
	b.ReportMetric(tenths[0][9].perSec/tenths[1][9].perSec, "ratio-last-tenth")
}

// cycle runs count lock cycles spread over the contenders ls and returns
// the acquire latencies.
func cycle(b *testing.B, ls []benchLocker, count int) []time.Duration {
	ctx := b.Context()
	var (
		next atomic.Int64
		mu   gosync.Mutex
		lat  []time.Duration
		wg   gosync.WaitGroup
		errs = make(chan error, len(ls))
	)
	for _, l := range ls {
		wg.Go(func() {
			for next.Add(1) <= int64(count) {
				t0 := time.Now()
				if err := l.lock(ctx); err != nil {
					errs <- err
					return
				}
				d := time.Since(t0)
				if err := l.unlock(ctx); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return lat
}

// BenchmarkEtcdCycleCost sends by hand the requests of one uncontended lock
// cycle in several shapes, on one session, and measures the server's CPU
// time per cycle of each: corral's as etcdstore sends them (a create
// transaction that checks that the name is free, the session's create
// fence, and that the parent exists with no lease, puts the identity record
// and reads the directory; a delete that checks the Seq and that the node
// has no children), the same without each of its checks in turn, and
// concurrency.Mutex's. The shapes take turns, 500 cycles at a time.
//
//	go test -run '^$' -bench EtcdCycleCost -benchtime 1x ./sync/
func BenchmarkEtcdCycleCost(b *testing.B) {
	if !backends.Selected("etcd") {
		b.Skip("etcd not in CORRAL_STORES")
	}
	env := newEtcdPeers(b)
	v := &peerVariant{name: "shapes"}
	cli, err := clientv3.New(env.config(v))
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	ctx := b.Context()
	grant, err := cli.Grant(ctx, 60)
	if err != nil {
		b.Fatal(err)
	}
	lease := grant.ID
	const dir, fence = "/bench/cost", "\x00bench/fence"
	if _, err := cli.Put(ctx, dir, ""); err != nil {
		b.Fatal(err)
	}
	record := strings.Repeat("r", 90) // about an identity record's size
	type shape struct {
		name                               string
		fence, parent, data, seq, children bool
	}
	shapes := []shape{
		{"corral", true, true, true, true, true},
		{"no-fence", false, true, true, true, true},
		{"no-parent-check", true, false, true, true, true},
		{"no-record", true, true, false, true, true},
		{"no-seq-check", true, true, true, false, true},
		{"no-children-check", true, true, true, true, false},
		{"bare", false, false, false, false, false},
	}
	probe := clientv3.OpGet(dir+"/", clientv3.WithRange(dir+"0"), clientv3.WithKeysOnly(), clientv3.WithLimit(8))
	cycleOf := func(s shape, key string) {
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}
		if s.fence {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(fence), "=", 0))
		}
		if s.parent {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(dir), ">", 0),
				clientv3.Compare(clientv3.LeaseValue(dir), "=", 0))
		}
		val := ""
		if s.data {
			val = record
		}
		resp, err := cli.Txn(ctx).If(cmps...).Then(clientv3.OpPut(key, val, clientv3.WithLease(lease)), probe).Commit()
		if err != nil || !resp.Succeeded {
			b.Fatal(err)
		}
		var dcmps []clientv3.Cmp
		if s.seq {
			dcmps = append(dcmps, clientv3.Compare(clientv3.CreateRevision(key), "=", resp.Header.Revision))
		}
		if s.children {
			dcmps = append(dcmps, clientv3.Compare(clientv3.CreateRevision(key+"/"), "=", 0).WithPrefix())
		}
		if len(dcmps) == 0 {
			_, err = cli.Delete(ctx, key)
		} else {
			_, err = cli.Txn(ctx).If(dcmps...).Then(clientv3.OpDelete(key)).Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).Commit()
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	peer := func(key string) {
		first := clientv3.OpGet(dir+"/", clientv3.WithFirstCreate()...)
		_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, "", clientv3.WithLease(lease)), first).
			Else(clientv3.OpGet(key), first).Commit()
		if err == nil {
			_, err = cli.Delete(ctx, key)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	names := []string{}
	for _, s := range shapes {
		names = append(names, s.name)
	}
	names = append(names, "concurrency.Mutex")
	srv := make([]time.Duration, len(names))
	took := make([]time.Duration, len(names))
	const chunk, chunks = 500, 10
	for range chunks {
		for i, name := range names {
			key := fmt.Sprintf("%s/%s-%x", dir, name, lease) // one name per shape, as a session reuses its own
			c0 := env.snapshot(b, v)
			start := time.Now()
			for range chunk {
				if i < len(shapes) {
					cycleOf(shapes[i], key)
				} else {
					peer(key)
				}
			}
			took[i] += time.Since(start)
			srv[i] += env.snapshot(b, v).sub(c0).srvCPU
		}
	}
	for i, name := range names {
		perCycle := float64(srv[i].Microseconds()) / (chunk * chunks)
		fmt.Printf("%-18s srv %5.0f µs/cycle  %6.0f cycles/s\n", name, perCycle, chunk*chunks/took[i].Seconds())
		b.ReportMetric(perCycle, name+"-srv-µs")
	}
}
