package backends

import (
	"testing"

	"github.com/corral-go/corral/store/storetest"
)

// etcd is a placeholder until the etcd harness lands.
func etcd(t testing.TB) storetest.Backend {
	t.Skip("etcd backend not built yet")
	return nil
}

func stopEtcd() {}
