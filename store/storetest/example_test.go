package storetest_test

import (
	"testing"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

// backend is what an adapter gives the suite: sessions on one shared store,
// and the faults the suite injects into them. memstore stands in for the
// adapter here.
type backend struct{ srv *memstore.Server }

func (b backend) Open(testing.TB) store.Store { return b.srv.Open() }

func (backend) Expire(_ testing.TB, s store.Store) { s.(*memstore.Store).Expire() }

// Disconnect and Reconnect make backend a storetest.Disconnector: the suite
// then checks what a lost connection does, too.
func (backend) Disconnect(_ testing.TB, s store.Store) { s.(*memstore.Store).Disconnect() }
func (backend) Reconnect(_ testing.TB, s store.Store)  { s.(*memstore.Store).Reconnect() }

// testConformance is the adapter's test; in its _test.go it is named
// TestConformance, and go test runs it.
func testConformance(t *testing.T) {
	storetest.Run(t, backend{memstore.NewServer()})
}

// An adapter shows it keeps the store contract with one test that runs the
// whole suite against its backend. The example is compiled, not run: it
// needs a *testing.T.
func Example() {
	_ = testConformance
}
