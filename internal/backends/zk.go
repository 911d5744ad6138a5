package backends

import (
	"testing"

	"github.com/corral-go/corral/store/storetest"
)

// zooKeeper is a placeholder until the ZooKeeper harness lands.
func zooKeeper(t testing.TB) storetest.Backend {
	t.Skip("zk backend not built yet")
	return nil
}

func stopZooKeeper() {}
