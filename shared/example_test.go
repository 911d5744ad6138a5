package shared_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/shared"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/sync"
)

// A read-modify-write of a shared value: read it with its version, and
// set it only if nobody wrote it since.
func ExampleValue() {
	ctx := context.Background()
	st := memstore.New() // in production, zkstore or etcdstore
	defer st.Close()

	v := shared.NewValue(st, "/config/mode")
	cur, _ := v.Get(ctx)
	fmt.Println("never set:", cur.Version == shared.NoVersion)

	cur, _ = v.CompareAndSet(ctx, []byte("blue"), cur.Version)
	fmt.Printf("set %s at version %d\n", cur.Data, cur.Version)

	other := shared.NewValue(st, "/config/mode") // another process, say
	_, _ = other.Set(ctx, []byte("green"))

	_, err := v.CompareAndSet(ctx, []byte("red"), cur.Version)
	fmt.Println("stale compare-and-set:", errors.Is(err, shared.ErrVersionMoved))
	// Output:
	// never set: true
	// set blue at version 0
	// stale compare-and-set: true
}

// A counter many processes add to: each Add returns the new value.
func ExampleCounter() {
	ctx := context.Background()
	srv := memstore.NewServer()
	a, b := srv.Open(), srv.Open()
	defer a.Close()
	defer b.Close()

	ca, cb := shared.NewCounter(a, "/stats/jobs"), shared.NewCounter(b, "/stats/jobs")
	v, _ := ca.Add(ctx, 5)
	fmt.Println("a added 5:", v)
	v, _ = cb.Add(ctx, -2)
	fmt.Println("b added -2:", v)
	v, _ = ca.Get(ctx)
	fmt.Println("now:", v)
	// Output:
	// a added 5: 5
	// b added -2: 3
	// now: 3
}

// Writes applied only while a lock is held: once the holder's session has
// ended, the server refuses them, however late they arrive.
func ExampleWrite() {
	ctx := context.Background()
	srv := memstore.NewServer()
	holder, other := srv.Open(), srv.Open()
	defer other.Close()

	m := sync.NewMutex(holder, "/locks/jobs")
	_ = m.Lock(ctx)
	_, err := shared.Write(ctx, holder, m, []store.Op{
		store.CreateOp("/jobs", []byte("42 done")),
	})
	fmt.Println("while held:", err)

	holder.Expire() // the holder's session ends, as after a long pause
	// A write the holder sent before it learned, arriving late through
	// another session, say:
	_, err = shared.Write(ctx, other, m, []store.Op{store.SetOp("/jobs", []byte("43 done"), 0)})
	fmt.Println("after:", errors.Is(err, shared.ErrLost))

	got, _ := shared.NewValue(other, "/jobs").Get(ctx)
	fmt.Printf("jobs: %s\n", got.Data)
	// Output:
	// while held: <nil>
	// after: true
	// jobs: 42 done
}

// A value set only while its writer holds a lock.
func ExampleValue_SetWhile() {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()

	m := sync.NewMutex(st, "/locks/owner")
	_ = m.Lock(ctx)
	v := shared.NewValue(st, "/state/owner")
	got, err := v.SetWhile(ctx, m, []byte("me"))
	fmt.Printf("%s at version %d, %v\n", got.Data, got.Version, err)

	_ = m.Unlock(ctx)
	_, err = v.SetWhile(ctx, m, []byte("still me?"))
	fmt.Println("after Unlock:", errors.Is(err, shared.ErrNotHeld))
	// Output:
	// me at version 0, <nil>
	// after Unlock: true
}

// A watcher sends the value now, then after each change.
func ExampleValue_Watch() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := memstore.New()
	defer st.Close()

	v := shared.NewValue(st, "/config/mode")
	w := v.Watch(ctx)
	defer w.Close()

	s := <-w.Snapshots()
	fmt.Println("first:", s.Version == shared.NoVersion)
	_, _ = v.Set(ctx, []byte("blue"))
	s = <-w.Snapshots()
	fmt.Printf("then: %s at version %d\n", s.Data, s.Version)
	// Output:
	// first: true
	// then: blue at version 0
}
