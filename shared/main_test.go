package shared_test

import (
	"os"
	"testing"

	"github.com/corral-go/corral/internal/testing/backends"
)

func TestMain(m *testing.M) {
	if env := os.Getenv(holderChildEnv); env != "" {
		os.Exit(holderChild(env)) // a holder process of TestPausedHolder
	}
	backends.Main(m)
}
