package backends

import (
	"sync"
	"testing"

	"github.com/corral-go/corral/internal/testing/zkbackend"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/store/storetest"
)

// zkShared is the ZooKeeper server shared by the whole test binary, started
// on first use and stopped by stopZooKeeper.
var zkShared struct {
	once    sync.Once
	srv     *zkserver.Server
	backend *zkbackend.Backend
	err     error
}

// zooKeeper returns a backend on a real ZooKeeper server shared by the test
// binary. Each session gets a proxy of its own, so faults injected into one
// never touch another; Expire closes the session on the server at once. When
// ZooKeeper is not installed it skips t, or fails it under CI=true.
func zooKeeper(t testing.TB) storetest.Backend {
	t.Helper()
	zkserver.Require(t)
	zkShared.once.Do(func() {
		// Short ticks: the server notices dead sessions quickly.
		zkShared.srv, zkShared.err = zkserver.Start(zkserver.Config{})
		if zkShared.err == nil {
			zkShared.backend = zkbackend.New([]string{zkShared.srv.Addr()})
		}
	})
	if zkShared.err != nil {
		t.Fatalf("backends: start ZooKeeper: %v", zkShared.err)
	}
	return zkShared.backend
}

// stopZooKeeper kills the shared server, if one was started, and removes
// its data.
func stopZooKeeper() {
	if zkShared.srv != nil {
		zkShared.srv.Close()
	}
}
