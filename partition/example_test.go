package partition_test

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/corral-go/corral/memstore"
	"github.com/corral-go/corral/partition"
)

// Three replicas share 16 shards; one is killed, and its shards move to the
// other two with greater fencing tokens.
func Example() {
	srv := memstore.NewServer()
	ctx := context.Background()
	const path, k = "/jobs/tenants", 16

	// tokens is what each replica works on now: shard -> token.
	type replica struct {
		st     *memstore.Store
		m      *partition.Member
		tokens chan map[int]int64
	}
	start := func(id string) *replica {
		st := srv.Open()
		m, err := partition.Join(ctx, st, path, k, id)
		if err != nil {
			panic(err)
		}
		r := &replica{st: st, m: m, tokens: make(chan map[int]int64, 1)}
		go func() {
			for set := range m.Shards() {
				now := map[int]int64{}
				for _, s := range set {
					now[s.ID()] = s.Token()
					// The shard's work runs until its context
					// ends; then it says it has stopped.
					go func() {
						<-s.Done()
						s.Release(context.Background())
					}()
				}
				select {
				case <-r.tokens:
				default:
				}
				r.tokens <- now
			}
		}()
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
				now := <-r.tokens
				var got, want []int
				for s := range now {
					got = append(got, s)
				}
				for s, o := range owners {
					if o == id {
						want = append(want, s)
					}
				}
				slices.Sort(got)
				if slices.Equal(got, want) {
					all[id] = now
					fmt.Printf("%s works on %d shards\n", id, len(now))
					// Put it back for the next settle, unless the
					// replica has sent a newer set meanwhile.
					select {
					case r.tokens <- now:
					default:
					}
					break
				}
			}
		}
		return all
	}

	rs := map[string]*replica{"a": start("a"), "b": start("b"), "c": start("c")}
	before := settle(map[string]*replica{"a": rs["a"], "b": rs["b"], "c": rs["c"]})

	rs["c"].st.Close() // c is killed: its session ends, no Leave
	<-rs["c"].m.Done()
	fmt.Println("c stopped:", rs["c"].m.Err())
	after := settle(map[string]*replica{"a": rs["a"], "b": rs["b"]})

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
	// b works on 6 shards
	// c works on 5 shards
	// c stopped: store: closed
	// a works on 8 shards
	// b works on 8 shards
	// shards moved: 5
}
