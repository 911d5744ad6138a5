package backends

import (
	"os"
	gosync "sync"
	"testing"

	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/store/storetest"
)

// shared is the embedded etcd of the test binary, started by the first test
// that asks for it and stopped by stopEtcd.
var shared struct {
	gosync.Mutex
	dir     string
	cluster *etcdserver.Cluster
	backend *etcdbackend.Backend
	err     error
}

// etcd returns a backend on the binary's embedded single-member etcd. If it
// cannot start, the test is skipped, or fails under CI=true.
func etcd(t testing.TB) storetest.Backend {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if shared.backend == nil && shared.err == nil {
		shared.dir, shared.err = os.MkdirTemp("", "corral-etcd-")
		if shared.err == nil {
			shared.cluster, shared.err = etcdserver.New(shared.dir, 1)
		}
		if shared.err == nil {
			shared.backend = etcdbackend.New(shared.cluster)
		}
	}
	if shared.err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("backends: etcd: %v", shared.err)
		}
		t.Skipf("backends: etcd: %v", shared.err)
	}
	return shared.backend
}

// stopEtcd stops the shared etcd, if it was started, and removes its data.
func stopEtcd() {
	shared.Lock()
	defer shared.Unlock()
	if shared.cluster != nil {
		shared.cluster.Close()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	shared.cluster, shared.backend, shared.dir = nil, nil, ""
}
