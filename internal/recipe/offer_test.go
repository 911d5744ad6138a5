package recipe

import (
	"context"
	"errors"
	"testing"

	"github.com/corral-go/corral/store"
)

// TestOffer: a value is offered until taken and then a watch is waited
// for; a watch that fires first makes the offer stale; a nil channel only
// waits; an ended ctx stops both waits; with one watch and with several.
func TestOffer(t *testing.T) {
	fired := func() <-chan store.Event {
		ch := make(chan store.Event, 1)
		ch <- store.Event{Type: store.EventDeleted}
		close(ch)
		return ch
	}
	idle := func() <-chan store.Event { return make(chan store.Event) }
	for _, n := range []int{1, 3} {
		// watches returns n watches, the last of them w.
		watches := func(w <-chan store.Event) []<-chan store.Event {
			ws := []<-chan store.Event{}
			for range n - 1 {
				ws = append(ws, idle())
			}
			return append(ws, w)
		}
		t.Run("taken", func(t *testing.T) {
			out, stale := make(chan int), make(chan store.Event, 1)
			go func() {
				<-out
				stale <- store.Event{Type: store.EventDeleted}
			}()
			if taken, err := offer(t.Context(), out, 1, watches(stale)); !taken || err != nil {
				t.Errorf("offer(%d watches) = %v, %v; want true, nil", n, taken, err)
			}
		})
		t.Run("stale first", func(t *testing.T) {
			if taken, err := offer(t.Context(), make(chan int), 1, watches(fired())); taken || err != nil {
				t.Errorf("offer(%d watches) = %v, %v; want false, nil", n, taken, err)
			}
		})
		t.Run("nil out", func(t *testing.T) {
			if taken, err := offer(t.Context(), nil, 1, watches(fired())); taken || err != nil {
				t.Errorf("offer(%d watches) = %v, %v; want false, nil", n, taken, err)
			}
		})
		t.Run("ctx ends before the receiver", func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if taken, err := offer(ctx, make(chan int), 1, watches(idle())); taken || !errors.Is(err, context.Canceled) {
				t.Errorf("offer(%d watches) = %v, %v; want false, %v", n, taken, err, context.Canceled)
			}
		})
		t.Run("ctx ends before the watch", func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			out := make(chan int)
			go func() {
				<-out
				cancel()
			}()
			if taken, err := offer(ctx, out, 1, watches(idle())); !taken || !errors.Is(err, context.Canceled) {
				t.Errorf("offer(%d watches) = %v, %v; want true, %v", n, taken, err, context.Canceled)
			}
		})
	}
}
