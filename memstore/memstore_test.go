package memstore_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// backend runs the conformance suite on one Server.
type backend struct{ srv *memstore.Server }

func (b backend) Open(testing.TB) store.Store      { return b.srv.Open() }
func (backend) Expire(_ testing.TB, s store.Store) { s.(*memstore.Store).Expire() }
func (backend) LoseNextCreateReply(_ testing.TB, s store.Store) {
	s.(*memstore.Store).LoseNextCreateReply()
}
func (backend) Disconnect(_ testing.TB, s store.Store) { s.(*memstore.Store).Disconnect() }
func (backend) Reconnect(_ testing.TB, s store.Store)  { s.(*memstore.Store).Reconnect() }

func TestConformance(t *testing.T) {
	storetest.Run(t, backend{memstore.NewServer()})
}
