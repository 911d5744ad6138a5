package partition

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/corral-go/corral/store"
)

// Assign returns the owner that the assignment gives each of shards shards
// when the members with the given ids are live: owners[i] is the id of
// shard i's owner ("" for every shard when ids is empty). Repeated ids count
// once; the order of ids does not matter. Every member of the group computes
// the same assignment from the same member list, with no store round trip.
//
// The scheme is rendezvous (highest-random-weight) hashing with bounded
// loads: every (shard, member) pair gets a score, a 64-bit FNV-1a hash of
// the two; the pairs are taken from the highest score down, and a pair
// assigns its shard to its member when the shard has no owner yet and the
// member has room. Room is ⌊K/M⌋ shards for every member and ⌈K/M⌉ for the
// first K mod M members to reach ⌊K/M⌋ (K shards, M members), so that
// every member ends with ⌊K/M⌋ or ⌈K/M⌉ shards, and every shard has an
// owner. Scores do not depend on who else is a member, so a member that
// joins or leaves moves mostly the shards whose top choice it is (about K/M
// of them); the bound on loads moves a few more, which the tests measure.
// A member that comes back with the same id gets the same shards back.
//
// Assign fails with an error wrapping store.ErrInvalidArgument, as Join
// does, for shards outside [1, MaxShards] and for an empty id, which no
// member can have ("" stands for no owner).
func Assign(ids []string, shards int) ([]string, error) {
	if err := checkShards(shards); err != nil {
		return nil, fmt.Errorf("partition: assign: %w", err)
	}
	if slices.Contains(ids, "") {
		return nil, fmt.Errorf("partition: assign: %w: empty member id", store.ErrInvalidArgument)
	}
	owners := make([]string, shards)
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	m := len(ids)
	if m == 0 {
		return owners, nil
	}
	type pair struct {
		score  uint64
		shard  int
		member int
	}
	pairs := make([]pair, 0, shards*m)
	for s := range shards {
		for i, id := range ids {
			pairs = append(pairs, pair{score(s, id), s, i})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.shard, b.shard), cmp.Compare(a.member, b.member))
	})
	lo, extra := shards/m, shards%m
	load := make([]int, m)
	left := shards
	for _, p := range pairs {
		if left == 0 {
			break
		}
		if owners[p.shard] != "" {
			continue
		}
		switch c := load[p.member]; {
		case c < lo:
		case c == lo && extra > 0:
			extra--
		default:
			continue
		}
		load[p.member]++
		owners[p.shard] = ids[p.member]
		left--
	}
	return owners, nil
}

// score is the weight of member id for shard s.
func score(s int, id string) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(uint64(s) >> (8 * i))
	}
	h.Write(b[:])
	h.Write([]byte(id))
	// FNV's last bytes mix poorly into the high bits; a finaliser
	// (splitmix64's) spreads them so that scores compare fairly.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
