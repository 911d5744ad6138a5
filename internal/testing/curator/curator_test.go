package curator_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corral-go/corral/internal/testing/curator"
	"github.com/corral-go/corral/internal/testing/zkserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestQueue: the program puts, in the background and in the foreground,
// and drains what it put, on a real ZooKeeper.
func TestQueue(t *testing.T) {
	if err := curator.Available(); err != nil {
		t.Skip(err) // a benchmark's rig: the project's tests never need Curator
	}
	srv := zkserver.ForTest(t, zkserver.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	q, err := curator.Start(ctx, t.TempDir(), srv.Addr())
	if err != nil {
		t.Fatalf("Start() = %v; want nil", err)
	}
	defer q.Close()
	for _, fg := range []bool{false, true} {
		took, peak, mean, err := q.Put(ctx, "/curator-test/q", 3, 50, fg)
		if err != nil || took <= 0 || peak < 1 || mean <= 0 {
			t.Fatalf("Put(3 producers, 50 items, foreground %v) = %v, %d, %.2f, %v; want a time, a peak and a mean in flight", fg, took, peak, mean, err)
		}
	}
	if took, err := q.Drain(ctx, "/curator-test/q", 100); err != nil || took <= 0 {
		t.Fatalf("Drain(100 items) = %v, %v; want a time", took, err)
	}
	for range 2 {
		if err := q.Close(); err != nil {
			t.Errorf("Close() = %v; want nil", err)
		}
	}
}
