package election

import (
	"context"

	"github.com/corral-go/corral/internal/recipe"
)

// pause waits before the next retry after a lost connection, as every
// recipe paces its retries (recipe.Pause), and counts it in attempt. It
// returns ctx's error, or the session's cause, when either ends first.
func (e *Election) pause(ctx context.Context, attempt *int) error {
	err := recipe.Pause(ctx, e.st, *attempt)
	*attempt++
	return err
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
