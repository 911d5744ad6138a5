package memstore_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/corral-go/corral/internal/backends"
	"github.com/corral-go/corral/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	storetest.Run(t, backends.Memory())
}
