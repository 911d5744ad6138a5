package proptest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/inspect"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/partition"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/sync"
	"github.com/corral-go/corral/twophase"
)

// maxErrText bounds the text of an error about a path of any length: the
// path shortened (store.ShortPath) in each layer that names it, and the
// rest of the message.
const maxErrText = 1024

// TestErrorTextShortensPaths: errors about a path of nearly MaxPathSize
// bytes, from every primitive and every store, name it shortened, not in
// full at every layer (which made 8 KB errors).
func TestErrorTextShortensPaths(t *testing.T) {
	backends.Run(t, func(t *testing.T, b storetest.Backend) {
		st, closed := b.Open(t), b.Open(t)
		closed.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		ended, end := context.WithCancel(ctx)
		end()
		// The longest path a recipe may use, and a node below it.
		base := "/errtext/" + strings.NewReplacer("/", "-").Replace(t.Name()) + "/"
		long := base + strings.Repeat("x", store.MaxPathSize-200-len(base))
		if _, err := st.Create(ctx, long+"/lock-", nil, store.EphemeralSequential); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			what string
			call func() error
		}{
			{"Store.Get", func() error { _, err := st.Get(ctx, long+"/missing"); return err }},
			{"Store.Delete", func() error { return st.Delete(ctx, long) }},
			{"Store.Create", func() error { _, err := st.Create(ctx, long, nil, store.Persistent); return err }},
			{"Store.Get closed", func() error { _, err := closed.Get(ctx, long); return err }},
			{"Mutex.Lock", func() error { return sync.NewMutex(st, long).Lock(ended) }},
			{"Semaphore.Acquire", func() error { _, err := sync.NewSemaphore(st, long, 2).Acquire(ctx); return err }},
			{"Barrier.Wait", func() error { return sync.NewBarrier(closed, long).Wait(ctx) }},
			{"Election.Campaign", func() error { _, err := election.New(st, long).Campaign(ended, nil); return err }},
			{"group.Join", func() error { _, err := group.Join(ctx, st, long, nil); return err }},
			{"partition.Join", func() error { _, err := partition.Join(ctx, closed, long, 1, "a"); return err }},
			{"Queue.Put", func() error { return queue.New(st, long).Put(ctx, nil) }},
			{"twophase.Await", func() error { return twophase.Await(ended, st, long) }},
			{"inspect.Read", func() error { _, err := inspect.Read(ctx, closed, long); return err }},
		} {
			err := c.call()
			if err == nil {
				t.Errorf("%s(a %d-byte path) = nil; want an error", c.what, len(long))
				continue
			}
			if n := len(err.Error()); n > maxErrText || strings.Contains(err.Error(), long[len(long)-300:]) {
				t.Errorf("%s(a %d-byte path): an error of %d bytes; want the path shortened in it: %.300s", c.what, len(long), n, err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("[%d bytes]", len(long))) && !errors.Is(err, store.ErrInvalidPath) {
				t.Logf("%s: %v", c.what, err)
			}
		}
	})
}
