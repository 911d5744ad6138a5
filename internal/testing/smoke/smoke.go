// Package smoke runs corral's recipes briefly on two sessions of one store:
// a Mutex handed over, an election handed over, a queue drained in order.
// It is the check of a transport or an identity (TLS, a role scoped to a
// prefix) whose store already passes storetest: it fails when a recipe
// cannot do its work through it.
//
// It is test-only, like every package under internal/testing: _test.go
// files and the other internal/testing packages import it; code that ships
// never does (test.sh checks).
package smoke

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/store"
	corralsync "github.com/corral-go/corral/sync"
)

// Timeout bounds the whole run.
const Timeout = 30 * time.Second

// Recipes runs a Mutex, an election and an at-least-once queue at dir on
// the sessions a and b, each handing over from a to b.
func Recipes(t *testing.T, a, b store.Store, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Timeout)
	defer cancel()
	if err := recipes(ctx, a, b, dir); err != nil {
		t.Fatal(err)
	}
}

func recipes(ctx context.Context, a, b store.Store, dir string) error {
	// Mutex: b cannot have it while a holds it, and gets it after.
	ma, mb := corralsync.NewMutex(a, dir+"/lock"), corralsync.NewMutex(b, dir+"/lock")
	if err := ma.Lock(ctx); err != nil {
		return fmt.Errorf("smoke: Mutex.Lock(a) = %w", err)
	}
	if ok, err := mb.TryLock(ctx); ok || err != nil {
		return fmt.Errorf("smoke: Mutex.TryLock(b) while a holds = %v, %v; want false, nil", ok, err)
	}
	first := ma.Token()
	got := make(chan error, 1)
	go func() { got <- mb.Lock(ctx) }()
	if err := ma.Unlock(ctx); err != nil {
		return fmt.Errorf("smoke: Mutex.Unlock(a) = %w", err)
	}
	if err := <-got; err != nil {
		return fmt.Errorf("smoke: Mutex.Lock(b) = %w", err)
	}
	if mb.Token() <= first {
		return fmt.Errorf("smoke: Mutex token %d after %d; want it to grow", mb.Token(), first)
	}
	if err := mb.Unlock(ctx); err != nil {
		return fmt.Errorf("smoke: Mutex.Unlock(b) = %w", err)
	}

	// Election: b leads once a resigns.
	la, err := election.New(a, dir+"/elect").Campaign(ctx, []byte("a"))
	if err != nil {
		return fmt.Errorf("smoke: Campaign(a) = %w", err)
	}
	type won struct {
		l   *election.Leadership
		err error
	}
	wins := make(chan won, 1)
	go func() {
		l, err := election.New(b, dir+"/elect").Campaign(ctx, []byte("b"))
		wins <- won{l, err}
	}()
	// Once b's candidate is there, b must still be waiting.
	if err := waitChildren(ctx, a, dir+"/elect", 2); err != nil {
		return err
	}
	select {
	case w := <-wins:
		return fmt.Errorf("smoke: Campaign(b) = %v, %v while a leads", w.l, w.err)
	default:
	}
	if err := la.Resign(ctx); err != nil {
		return fmt.Errorf("smoke: Resign(a) = %w", err)
	}
	w := <-wins
	if w.err != nil {
		return fmt.Errorf("smoke: Campaign(b) = %w", w.err)
	}
	if !bytes.Equal(w.l.Value(), []byte("b")) || w.l.Token() <= la.Token() {
		return fmt.Errorf("smoke: b's leadership: value %q, token %d after %d", w.l.Value(), w.l.Token(), la.Token())
	}
	if err := w.l.Resign(ctx); err != nil {
		return fmt.Errorf("smoke: Resign(b) = %w", err)
	}

	// Queue: what a puts, b takes, in order.
	qa := queue.New(a, dir+"/queue", queue.WithDelivery(queue.AtLeastOnce))
	qb := queue.New(b, dir+"/queue", queue.WithDelivery(queue.AtLeastOnce))
	for _, item := range []string{"one", "two"} {
		if err := qa.Put(ctx, []byte(item)); err != nil {
			return fmt.Errorf("smoke: Put(%s) = %w", item, err)
		}
	}
	for _, want := range []string{"one", "two"} {
		it, err := qb.Take(ctx)
		if err != nil {
			return fmt.Errorf("smoke: Take = %w", err)
		}
		if string(it.Data) != want {
			return fmt.Errorf("smoke: Take = %q; want %q", it.Data, want)
		}
		if err := it.Ack(ctx); err != nil {
			return fmt.Errorf("smoke: Ack(%s) = %w", want, err)
		}
	}
	return nil
}

// waitChildren waits, with watches, until p has n children.
func waitChildren(ctx context.Context, st store.Store, p string, n int) error {
	for {
		kids, ev, err := st.ChildrenW(ctx, p)
		if err != nil {
			return fmt.Errorf("smoke: ChildrenW(%s) = %w", p, err)
		}
		if len(kids) == n {
			return nil
		}
		if e := <-ev; e.Err != nil {
			return fmt.Errorf("smoke: waiting for %d children of %s: %w", n, p, e.Err)
		}
	}
}
