package partition_test

import (
	"context"
	"fmt"
	"log"
	"sync/atomic"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/partition"
)

// A replica works on the shards it is granted, each under the shard's own
// context and fencing token.
func Example_quickStart() {
	ctx, shutdown := context.WithCancel(context.Background())
	st := memstore.New()
	defer st.Close()
	var started atomic.Int32
	work := func(ctx context.Context, shard int, token int64) error {
		fmt.Println("working on shard", shard)
		if started.Add(1) == 4 {
			shutdown() // alone, the replica got all 4; the service stops
		}
		<-ctx.Done()
		return nil
	}

	m, err := partition.Join(ctx, st, "/jobs/tenants", 4, "replica-a") // 4 shards; this member's id
	if err != nil {
		log.Fatal(err)
	}
	err = m.Run(ctx, func(ctx context.Context, s *partition.Shard) error {
		return work(ctx, s.ID(), s.Token()) // ctx ends when the shard moves or is lost
	}) // a shard is released when its function returns; Run returns when ctx ends
	fmt.Println("run:", err)
	// Unordered output:
	// working on shard 0
	// working on shard 1
	// working on shard 2
	// working on shard 3
	// run: <nil>
}
