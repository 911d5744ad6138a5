package sync_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/sync"
)

func ExampleMutex() {
	ctx := context.Background()
	srv := memstore.NewServer() // one shared tree; in production, zkstore or etcdstore
	a, b := srv.Open(), srv.Open()
	defer a.Close()
	defer b.Close()

	ma := sync.NewMutex(a, "/locks/report")
	mb := sync.NewMutex(b, "/locks/report")

	if err := ma.Lock(ctx); err != nil {
		fmt.Println("lock:", err)
		return
	}
	// Do the work under ma.Context(): it is cancelled the moment the lock
	// is lost. Pass ma.Token() to storage that fences stale holders.
	fmt.Println("a holds:", ma.Context().Err() == nil)

	ok, _ := mb.TryLock(ctx)
	fmt.Println("b got it too:", ok)

	held := ma.Context()
	if err := ma.Unlock(ctx); err != nil {
		fmt.Println("unlock:", err)
	}
	fmt.Println("a's hold ended:", context.Cause(held))

	ok, _ = mb.TryLock(ctx)
	fmt.Println("b got it now:", ok)
	_ = mb.Unlock(ctx)

	err := mb.Unlock(ctx)
	fmt.Println("unlock again is an error:", errors.Is(err, sync.ErrNotLocked))
	// Output:
	// a holds: true
	// b got it too: false
	// a's hold ended: corral: released
	// b got it now: true
	// unlock again is an error: true
}

func ExampleMutex_Context() {
	ctx := context.Background()
	srv := memstore.NewServer()
	st := srv.Open()
	defer st.Close()

	m := sync.NewMutex(st, "/locks/job")
	if err := m.Lock(ctx); err != nil {
		fmt.Println("lock:", err)
		return
	}
	held := m.Context()

	st.Expire() // the session is lost, as after a long partition

	<-held.Done()
	fmt.Println("lost:", context.Cause(held))
	err := m.Unlock(ctx)
	fmt.Println("unlock reports it:", errors.Is(err, sync.ErrLockLost))
	// Output:
	// lost: store: session expired
	// unlock reports it: true
}

func ExampleRWMutex() {
	ctx := context.Background()
	srv := memstore.NewServer()
	a, b, c := srv.Open(), srv.Open(), srv.Open()
	defer a.Close()
	defer b.Close()
	defer c.Close()

	ra := sync.NewRWMutex(a, "/locks/config")
	rb := sync.NewRWMutex(b, "/locks/config")
	w := sync.NewRWMutex(c, "/locks/config")

	r1, _ := ra.RLock(ctx) // each read hold is a handle
	r2, _ := rb.RLock(ctx) // readers share
	ok, _ := w.TryLock(ctx)
	fmt.Println("writer while read:", ok)

	_ = r1.Unlock(ctx)
	_ = r2.Unlock(ctx)
	ok, _ = w.TryLock(ctx)
	fmt.Println("writer when free:", ok)
	_, ok, _ = ra.TryRLock(ctx)
	fmt.Println("reader while written:", ok)
	_ = w.Unlock(ctx)
	// Output:
	// writer while read: false
	// writer when free: true
	// reader while written: false
}

func ExampleMutex_Locker() {
	srv := memstore.NewServer()
	st := srv.Open()
	defer st.Close()

	// For code that wants a sync.Locker; it panics if the store fails.
	l := sync.NewMutex(st, "/locks/legacy").Locker()
	l.Lock()
	fmt.Println("locked")
	l.Unlock()
	// Output:
	// locked
}
