package partition_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	gosync "sync"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/partition"
)

// Three replicas share 16 shards; one is killed, and its shards move to the
// other two with greater fencing tokens.
func Example() {
	srv := memstore.NewServer()
	ctx := context.Background()
	const path, k = "/jobs/tenants", 16

	start := func(id string) *replica {
		st := srv.Open()
		m, err := partition.Join(ctx, st, path, k, id)
		if err != nil {
			panic(err)
		}
		r := &replica{st: st, m: m, work: map[int]int64{}, tick: make(chan struct{}, 1)}
		go m.Run(ctx, func(ctx context.Context, s *partition.Shard) error {
			// The shard's work runs until its context ends; it
			// writes to storage with s.Token() as its fencing token.
			r.set(s.ID(), s.Token())
			<-ctx.Done()
			r.set(s.ID(), -1)
			return nil
		})
		return r
	}
	// settle waits until the replicas work on what Assign gives them, and
	// returns what each works on.
	settle := func(rs map[string]*replica) map[string]map[int]int64 {
		ids := slices.Sorted(maps.Keys(rs))
		owners, err := partition.Assign(ids, k)
		if err != nil {
			panic(err)
		}
		all := map[string]map[int]int64{}
		for _, id := range ids {
			r := rs[id]
			for {
				r.mu.Lock()
				now := maps.Clone(r.work)
				r.mu.Unlock()
				ok := len(now) == countOf(owners, id)
				for s := range now {
					ok = ok && owners[s] == id
				}
				if ok {
					all[id] = now
					fmt.Printf("%s works on %d shards\n", id, len(now))
					break
				}
				<-r.tick
			}
		}
		return all
	}

	rs := map[string]*replica{"a": start("a"), "b": start("b"), "c": start("c")}
	before := settle(rs)

	rs["c"].st.Close() // c is killed: its session ends, no Leave
	<-rs["c"].m.Done()
	fmt.Println("c stopped:", rs["c"].m.Err())
	delete(rs, "c")
	after := settle(rs)

	// c's shards moved, each to a new owner with a greater token.
	for s, token := range before["c"] {
		for id := range after {
			if t, ok := after[id][s]; ok && t <= token {
				fmt.Printf("shard %d: token %d at %s, not above %d\n", s, t, id, token)
			}
		}
	}
	fmt.Println("shards moved:", len(after["a"])+len(after["b"])-len(before["a"])-len(before["b"]))
	for _, id := range []string{"a", "b"} {
		rs[id].m.Leave(ctx)
		rs[id].st.Close()
	}
	// Output:
	// a works on 5 shards
	// b works on 5 shards
	// c works on 6 shards
	// c stopped: store: closed
	// a works on 8 shards
	// b works on 8 shards
	// shards moved: 6
}

// replica is one process of Example: its session, its member, and the
// shards it works on now (shard -> token).
type replica struct {
	st   *memstore.Store
	m    *partition.Member
	mu   gosync.Mutex
	work map[int]int64
	tick chan struct{} // cap 1: work changed
}

// set records that the replica works on shard s with token, or no longer
// (a token of -1).
func (r *replica) set(s int, token int64) {
	r.mu.Lock()
	if token < 0 {
		delete(r.work, s)
	} else {
		r.work[s] = token
	}
	r.mu.Unlock()
	select {
	case r.tick <- struct{}{}:
	default:
	}
}

// countOf counts the shards owners gives id.
func countOf(owners []string, id string) int {
	n := 0
	for _, o := range owners {
		if o == id {
			n++
		}
	}
	return n
}
