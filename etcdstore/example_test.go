package etcdstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/corral-go/corral/etcdstore"
	"github.com/corral-go/corral/internal/testing/etcdserver"
	"github.com/corral-go/corral/store"
)

// A session on etcd: an ephemeral sequential contender, listed beside its
// siblings in the same transaction, and gone for everyone once the session
// is closed.
func Example() {
	dir, err := os.MkdirTemp("", "etcdstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cluster, err := etcdserver.New(dir, 1)
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	cli, err := cluster.NewClient()
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close() // after the Store: Open never closes the client

	ctx := context.Background()
	s, err := etcdstore.Open(ctx, cli)
	if err != nil {
		log.Fatal(err)
	}
	n, kids, err := s.CreateAndList(ctx, "/locks/printer/lock-", []byte("me"), store.EphemeralSequential)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("holder:", kids[0].Name == n.Name(), "owner is session:", n.Owner == s.SessionID())

	if err := s.Close(); err != nil {
		log.Fatal(err)
	}
	resp, err := cli.Get(ctx, n.Path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("keys left after Close:", resp.Count)
	// Output:
	// holder: true owner is session: true
	// keys left after Close: 0
}
