package sync_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/sync"
)

// A transfer locks both accounts. Two transfers in opposite directions ask
// for the same two locks in opposite orders; the MultiMutex takes them in one
// order, so they never deadlock.
func ExampleMultiMutex() {
	ctx := context.Background()
	srv := memstore.NewServer() // in production, zkstore or etcdstore
	a, b := srv.Open(), srv.Open()
	defer a.Close()
	defer b.Close()

	toBob := sync.NewMultiMutex(a, []string{"/accounts/alice", "/accounts/bob"})
	toAlice := sync.NewMultiMutex(b, []string{"/accounts/bob", "/accounts/alice"})
	fmt.Println("order:", toAlice.Paths())

	if err := toBob.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	// Fence each account's writes with its own token.
	fmt.Println("tokens:", toBob.Token("/accounts/alice") >= 0, toBob.Token("/accounts/bob") >= 0)
	ok, _ := toAlice.TryLock(ctx)
	fmt.Println("other transfer got them:", ok)
	// An account alone is an ordinary lock.
	ok, _ = sync.NewMutex(b, "/accounts/bob").TryLock(ctx)
	fmt.Println("bob alone:", ok)

	if err := toBob.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	ok, _ = toAlice.TryLock(ctx)
	fmt.Println("other transfer after unlock:", ok)
	_ = toAlice.Unlock(ctx)
	// Output:
	// order: [/accounts/alice /accounts/bob]
	// tokens: true true
	// other transfer got them: false
	// bob alone: false
	// other transfer after unlock: true
}

// The hold ends as soon as any member is lost, and says which.
func ExampleMemberError() {
	ctx := context.Background()
	srv := memstore.NewServer()
	st, admin := srv.Open(), srv.Open()
	defer st.Close()
	defer admin.Close()

	m := sync.NewMultiMutex(st, []string{"/res/a", "/res/b"})
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	held := m.Context()

	// An operator deletes the node that holds /res/b.
	kids, _ := admin.Children(ctx, "/res/b")
	_ = admin.Delete(ctx, "/res/b/"+kids[0].Name)

	<-held.Done()
	var me *sync.MemberError
	cause := context.Cause(held)
	fmt.Println(errors.As(cause, &me), me.Path, errors.Is(cause, sync.ErrNodeDeleted))
	err := m.Unlock(ctx) // releases /res/a too
	fmt.Println("unlock:", errors.Is(err, sync.ErrLockLost))
	// Output:
	// true /res/b true
	// unlock: true
}
