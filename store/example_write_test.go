package store_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/store"
)

// A guarded write is applied only while the guard's node exists, decided by
// the server in the same step as the write: here an ephemeral node that
// stands for a hold, and a late write refused once its session ended.
func ExampleWrite() {
	ctx := context.Background()
	srv := memstore.NewServer()
	owner, other := srv.Open(), srv.Open()
	defer other.Close()

	n, err := owner.Create(ctx, "/owners/report", nil, store.Ephemeral)
	if err != nil {
		log.Fatal(err)
	}
	guard := []store.Guard{{Path: n.Path, Seq: n.Seq}}
	_, err = store.Write(ctx, owner, guard, []store.Op{store.CreateOp("/report", []byte("v1"))})
	fmt.Println("while the node exists:", err)

	owner.Expire() // its session ends: the node goes
	_, err = store.Write(ctx, other, guard, []store.Op{store.SetOp("/report", []byte("v2"), 0)})
	var we *store.WriteError
	fmt.Println("after:", errors.Is(err, store.ErrGuardFailed), errors.As(err, &we) && we.Guard == 0)
	// Output:
	// while the node exists: <nil>
	// after: true true
}

// WatchNode returns a node's Stat and a one-shot watch of its next change.
func ExampleWatchNode() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := memstore.New()
	defer st.Close()
	if _, err := st.Create(ctx, "/config/mode", []byte("blue"), store.Persistent); err != nil {
		log.Fatal(err)
	}

	stat, ev, err := store.WatchNode(ctx, st, "/config/mode")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("version", stat.Version)
	_, _ = st.Set(ctx, "/config/mode", []byte("green"), stat.Version)
	select {
	case e := <-ev:
		fmt.Println(e.Type, e.Path)
	case <-ctx.Done():
	}
	// Output:
	// version 0
	// data-changed /config/mode
}

// Find tells whether a store has an optional capability, looking through
// wrappers; recipes find capabilities only this way.
func ExampleFind() {
	st := memstore.New()
	defer st.Close()
	_, ok := store.Find[store.GuardedWriter](st)
	fmt.Println("guarded writes:", ok)
	_, ok = store.Find[store.ImplicitDirLister](st) // etcd's alone
	fmt.Println("implicit directories:", ok)
	// Output:
	// guarded writes: true
	// implicit directories: false
}

// The path helpers split and build paths, and read the sequence suffix of
// a sequential node's name.
func Example_paths() {
	p := store.Join("/locks/report", "lock-"+store.FormatSeq(42))
	fmt.Println(p)
	fmt.Println(store.Parent(p), store.Base(p))
	seq, ok := store.ParseSeq(store.Base(p))
	fmt.Println(seq, ok)
	// Output:
	// /locks/report/lock-0000000042
	// /locks/report lock-0000000042
	// 42 true
}
