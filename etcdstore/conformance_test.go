package etcdstore_test

import (
	"testing"

	"github.com/corral-go/corral/internal/testing/etcdbackend"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, etcdbackend.New(etcdserver.Start(t, 1)))
}
