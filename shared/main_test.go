package shared_test

import (
	"testing"

	"github.com/corral-go/corral/internal/testing/backends"
)

func TestMain(m *testing.M) { backends.Main(m) }
