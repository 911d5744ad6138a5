// Package backends gives recipe tests the stores they run on: memstore
// always, and a real ZooKeeper and a real etcd, each started once per test
// binary on 127.0.0.1. One test body loops over all of them:
//
//	func TestMain(m *testing.M) { backends.Main(m) }
//
//	func TestMutex(t *testing.T) {
//		backends.Run(t, func(t *testing.T, b storetest.Backend) { ... })
//	}
//
// CORRAL_STORES (a comma-separated subset of "mem,zk,etcd") narrows the set
// for a quick local run. A real server that cannot start skips its subtests
// on a developer's machine and fails them under CI=true.
//
// It is test-only, like every package under internal/testing: _test.go
// files and the other internal/testing packages import it; code that ships
// never does (test.sh checks).
package backends

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/zkbackend"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/zkstore"
)

// Names lists the backends in the order Run runs them.
var Names = []string{"mem", "zk", "etcd"}

// Run runs fn as one subtest per selected backend.
func Run(t *testing.T, fn func(t *testing.T, b storetest.Backend)) { run(t, Get, fn) }

// RunEager is Run on the backends Eager returns: sessions that remove a
// directory with the last node in it, at once.
func RunEager(t *testing.T, fn func(t *testing.T, b storetest.Backend)) { run(t, Eager, fn) }

// run runs fn as one subtest per selected backend, as get returns it.
func run(t *testing.T, get func(testing.TB, string) storetest.Backend, fn func(t *testing.T, b storetest.Backend)) {
	for _, name := range Names {
		t.Run(name, func(t *testing.T) {
			if !Selected(name) {
				t.Skipf("%s not in CORRAL_STORES", name)
			}
			fn(t, get(t, name))
		})
	}
}

// Get returns the named backend, starting its server if needed.
func Get(t testing.TB, name string) storetest.Backend {
	switch name {
	case "mem":
		return Memory()
	case "zk":
		return zooKeeper(t)
	case "etcd":
		return etcd(t)
	}
	t.Fatalf("backends: unknown backend %q", name)
	return nil
}

// Selected reports whether CORRAL_STORES selects the named backend.
func Selected(name string) bool {
	env := os.Getenv("CORRAL_STORES")
	return env == "" || slices.Contains(strings.Split(env, ","), name)
}

// Main runs the tests of a package, stops the servers they started and
// fails the run if a goroutine leaked.
func Main(m *testing.M) {
	code := m.Run()
	stopZooKeeper()
	stopEtcd()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Meter is implemented by the backends of real servers: they count the
// bytes each session sends and receives, for the benchmarks.
type Meter interface {
	Traffic(t testing.TB, s store.Store) (up, down int64)
}

// Memory returns a backend on a new memstore.Server.
func Memory() storetest.Backend { return memBackend{memstore.NewServer()} }

type memBackend struct{ srv *memstore.Server }

func (b memBackend) Open(testing.TB) store.Store      { return b.srv.Open() }
func (memBackend) Expire(_ testing.TB, s store.Store) { s.(*memstore.Store).Expire() }

// ReapWithin implements storetest.Reaper: memstore removes a directory
// emptied by a session's end in the same step.
func (memBackend) ReapWithin() time.Duration { return 0 }
func (memBackend) LoseNextCreateReply(_ testing.TB, s store.Store) {
	s.(*memstore.Store).LoseNextCreateReply()
}
func (memBackend) Disconnect(_ testing.TB, s store.Store) { s.(*memstore.Store).Disconnect() }
func (memBackend) Reconnect(_ testing.TB, s store.Store)  { s.(*memstore.Store).Reconnect() }

// Eager returns the named backend with sessions that remove a directory
// Create made with the delete of its last node, not a reclaim delay after
// (zkstore and etcdstore WithReclaimDelay(0)), as memstore does: for tests
// that compare the stores call by call.
func Eager(t testing.TB, name string) storetest.Backend {
	t.Helper()
	switch b := Get(t, name).(type) {
	case *zkbackend.Backend:
		return zkbackend.New(b.Servers(), zkstore.WithReclaimDelay(0))
	case *etcdbackend.Backend:
		return etcdbackend.New(b.Cluster(), etcdstore.WithReclaimDelay(0))
	case memBackend:
		return b
	}
	t.Fatalf("backends: no eager sessions on %q", name)
	return nil
}

// Short returns a backend on the named real server (zk or etcd) whose
// sessions have the given timeout (ZooKeeper's session timeout asked for,
// etcd's lease TTL), for tests that wait for sessions to expire.
func Short(t testing.TB, name string, timeout time.Duration) storetest.Backend {
	t.Helper()
	switch b := Get(t, name).(type) {
	case *zkbackend.Backend:
		return zkbackend.New(b.Servers(), zkstore.WithSessionTimeout(timeout))
	case *etcdbackend.Backend:
		return etcdbackend.New(b.Cluster(), etcdstore.WithTTL(timeout))
	}
	t.Fatalf("backends: no short sessions on %q", name)
	return nil
}

// Open opens n sessions of b, each closed when t ends.
func Open(t testing.TB, b storetest.Backend, n int) []store.Store {
	t.Helper()
	sts := make([]store.Store, n)
	for i := range sts {
		sts[i] = b.Open(t)
		t.Cleanup(func() { _ = sts[i].Close() })
	}
	return sts
}

// Async runs fn in a goroutine and returns its result on a channel.
func Async(fn func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- fn() }()
	return ch
}
