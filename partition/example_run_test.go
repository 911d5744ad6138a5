package partition_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"sync/atomic"
	"time"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/partition"
)

// A member alone is granted every shard; Run calls the function once per
// shard, each in its own goroutine, until Run's ctx ends.
func ExampleMember_Run() {
	st := memstore.New()
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var working atomic.Int32
	work := func(ctx context.Context, shard int, token int64) error {
		if working.Add(1) == 16 {
			cancel() // every shard is being worked: end the example
		}
		<-ctx.Done() // write to the shard's data, fenced by token
		return nil
	}

	m, err := partition.Join(ctx, st, "/jobs/tenants", 16, "worker-1")
	if err != nil {
		log.Fatal(err)
	}
	err = m.Run(ctx, func(ctx context.Context, s *partition.Shard) error {
		return work(ctx, s.ID(), s.Token()) // until ctx ends
	})
	fmt.Println("shards worked:", working.Load(), "run:", err, "member:", m.Err())
	// Output: shards worked: 16 run: <nil> member: partition: member left
}

// Every member computes who owns which shard from the member ids alone, with
// no store round trip: the same ids give the same owners, in any order.
func ExampleAssign() {
	three, _ := partition.Assign([]string{"a", "b", "c"}, 8)
	two, _ := partition.Assign([]string{"b", "a"}, 8) // c went
	back, _ := partition.Assign([]string{"c", "b", "a"}, 8)
	fmt.Println(three)
	fmt.Println(two)
	fmt.Println("c back, its shards back:", slices.Equal(back, three))
	// Output:
	// [b a b a c a c b]
	// [b a a a b a b b]
	// c back, its shards back: true
}
