package inspect_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/corral-go/corral/inspect"
	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/sync"
)

// Who holds the lock: Read lists the holders in order, with the identity
// each one's node records and the fencing token of its grant.
func ExampleRead() {
	ctx := context.Background()
	srv := memstore.NewServer()
	a, b := srv.Open(), srv.Open()
	defer a.Close()
	defer b.Close()

	backup, _ := sync.NewRWMutex(a, "/locks/config", sync.WithLabel("backup")).RLock(ctx)
	report, _ := sync.NewRWMutex(b, "/locks/config", sync.WithLabel("report")).RLock(ctx)
	defer backup.Unlock(ctx)
	defer report.Unlock(ctx)

	r, err := inspect.Read(ctx, b, "/locks/config")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Kind, len(r.Holders), "holders,", len(r.Waiters), "waiting")
	for _, h := range r.Holders {
		fmt.Println(h.Mode, h.Identity.Label, h.Identity.PID == os.Getpid(), h.Seq == backup.Token())
	}
	// Output:
	// lock 2 holders, 0 waiting
	// read backup true true
	// read report true false
}

// Walk reports every recipe below a path, the way "corral locks" lists them.
func ExampleWalk() {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()

	m := sync.NewMutex(st, "/app/locks/report")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)
	q := queue.New(st, "/app/jobs")
	if err := q.PutBatch(ctx, [][]byte{[]byte("a"), []byte("b")}); err != nil {
		log.Fatal(err)
	}

	err := inspect.Walk(ctx, st, "/app", func(r inspect.Report) error {
		switch r.Kind {
		case inspect.Queue:
			fmt.Println(r.Path, r.Kind, r.Queue.Items, "items")
		default:
			fmt.Println(r.Path, r.Kind, len(r.Holders), "holder")
		}
		return nil
	})
	fmt.Println(err)
	// Output:
	// /app/jobs queue 2 items
	// /app/locks/report lock 1 holder
	// <nil>
}

// A watcher follows a lock's line as it changes: a waiter arrives, and
// becomes the holder when the holder unlocks.
func ExampleWatch() {
	srv := memstore.NewServer()
	a, b := srv.Open(), srv.Open()
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	ma := sync.NewMutex(a, "/locks/report", sync.WithLabel("a"))
	if err := ma.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	w := inspect.Watch(ctx, a, "/locks/report")
	defer w.Close()
	mb := sync.NewMutex(b, "/locks/report", sync.WithLabel("b"))
	locked := make(chan error, 1)
	last := ""
	for rs := range w.Reports() {
		line := describe(rs)
		if line == last {
			continue
		}
		fmt.Println(line)
		last = line
		if line == "b holds, 0 waiting" {
			break
		}
		switch line {
		case "a holds, 0 waiting":
			go func() { locked <- mb.Lock(ctx) }()
		case "a holds, 1 waiting":
			_ = ma.Unlock(ctx)
		}
	}
	select {
	case err := <-locked:
		fmt.Println("b locked:", err, mb.Unlock(ctx))
	case <-ctx.Done():
	}
	// Output:
	// a holds, 0 waiting
	// a holds, 1 waiting
	// b holds, 0 waiting
	// b locked: <nil> <nil>
}

// describe says who holds the one lock of rs and how many wait.
func describe(rs []inspect.Report) string {
	if len(rs) != 1 || len(rs[0].Holders) != 1 {
		return "no holder"
	}
	return fmt.Sprintf("%s holds, %d waiting", rs[0].Holders[0].Identity.Label, len(rs[0].Waiters))
}

// An election candidate can proclaim who it is as an identity record, which
// inspect then reports as the leader's Identity; other data is not one.
func ExampleParseIdentity() {
	id, ok := inspect.ParseIdentity(inspect.IdentityRecord("scheduler"))
	fmt.Println(ok, id.Label, id.PID == os.Getpid())
	_, ok = inspect.ParseIdentity([]byte("10.0.0.1")) // Curator's host address
	fmt.Println(ok)
	// Output:
	// true scheduler true
	// false
}
