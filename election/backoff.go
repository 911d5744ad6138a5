package election

import (
	"context"
	"time"
)

// backoff spaces out retries while the connection is lost.
type backoff struct{ d time.Duration }

const (
	minBackoff = 2 * time.Millisecond
	maxBackoff = 500 * time.Millisecond
)

// wait sleeps for the next interval, or returns ctx.Err() when ctx ends
// first.
func (b *backoff) wait(ctx context.Context) error {
	b.d = min(max(2*b.d, minBackoff), maxBackoff)
	t := time.NewTimer(b.d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *backoff) reset() { b.d = 0 }

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
