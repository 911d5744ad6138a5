package partition

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"

	"github.com/corral-go/corral/store"
)

// Assign returns the owner that the assignment gives each of shards shards
// when the members with the given ids are live: owners[i] is the id of
// shard i's owner ("" for every shard when ids is empty). Repeated ids count
// once; the order of ids does not matter. Every member of the partition
// computes the same assignment from the same member list, with no store
// round trip.
//
// The scheme is rendezvous (highest-random-weight) hashing with bounded
// loads: every (shard, member) pair gets a score, a 64-bit hash of the two;
// the pairs are taken from the highest score down, and a pair assigns its
// shard to its member when the shard has no owner yet and the member has
// room. Room is ⌊K/M⌋ shards for every member and ⌈K/M⌉ for the first K mod
// M members to reach ⌊K/M⌋ (K shards, M members), so that every member ends
// with ⌊K/M⌋ or ⌈K/M⌉ shards, and every shard has an owner. Scores do not
// depend on who else is a member, so a member that joins or leaves moves
// mostly the shards whose top choice it is (about K/M of them); the bound on
// loads moves a few more, which the tests measure. A member that comes back
// with the same id gets the same shards back.
//
// The pairs are never sorted all together: scores are uniform, so the
// highest few per shard (a band of the score range) decide almost every
// shard. Assign takes the bands from the top, each wider than the one
// before, and sorts only the pairs of a band whose shard has no owner yet
// and whose member has room; a band costs one pass over the pairs, and one
// or two bands decide every shard (BenchmarkAssign: K=65,536 and M=64 in
// tens of milliseconds and a few megabytes).
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
	if len(ids) == 0 {
		return owners, nil
	}
	a := newAssignment(ids, shards)
	a.run()
	for s, i := range a.owner {
		owners[s] = ids[i]
	}
	return owners, nil
}

// assignment is the state of one Assign.
type assignment struct {
	member []uint64 // by member: the hash of its id
	owner  []int32  // by shard: its owner's index, or -1
	load   []int32  // by member: its shards
	lo     int32    // ⌊K/M⌋
	extra  int      // members that may still take ⌊K/M⌋+1
	left   int      // shards with no owner
}

// pair is a (shard, member) pair and its score.
type pair struct {
	score  uint64
	shard  int32
	member int32
}

func newAssignment(ids []string, shards int) *assignment {
	a := &assignment{member: make([]uint64, len(ids)), owner: make([]int32, shards), load: make([]int32, len(ids)),
		lo: int32(shards / len(ids)), extra: shards % len(ids), left: shards}
	for i, id := range ids {
		h := fnv.New64a()
		h.Write([]byte(id))
		a.member[i] = mix(h.Sum64())
	}
	for s := range a.owner {
		a.owner[s] = -1
	}
	return a
}

// run assigns every shard, band after band from the top of the score
// range: the first holds about 4 pairs per shard, each next one twice as
// many as the one before, the last reaches 0.
func (a *assignment) run() {
	m := uint64(len(a.member))
	top := uint64(math.MaxUint64)
	// The first band holds about 4 pairs per shard: room for that and a
	// few more, so that it rarely grows.
	pairs := make([]pair, 0, 5*len(a.owner))
	for width := uint64(4); a.left > 0; width *= 2 {
		span := math.MaxUint64 / m
		floor := uint64(0)
		if span <= math.MaxUint64/width && span*width < top {
			floor = top - span*width
		}
		pairs = a.band(pairs[:0], floor, top)
		sortBand(pairs, floor, top)
		for _, p := range pairs {
			if a.left == 0 {
				break
			}
			a.take(p)
		}
		if floor == 0 {
			break
		}
		top = floor - 1
	}
}

// sortBand sorts pairs, whose scores are in [floor, top], by score from the
// highest down, in time linear in their number: scores are uniform, so a
// bucket of the range holds a few pairs (an in-place bucket sort, American
// flag sort's, and then an insertion sort of each bucket). Every member
// lists the pairs of a band in the same order (by shard, then member), and
// the sort does the same to the same input, so that even two equal scores,
// which 64 bits make all but impossible, end alike everywhere.
func sortBand(pairs []pair, floor, top uint64) {
	n := len(pairs)
	if n < 2 {
		return
	}
	nb := n/4 + 1
	width := max((top-floor)/uint64(nb), 1)
	bucket := func(p pair) int { return min(int((top-p.score)/width), nb-1) }
	start := make([]int32, nb+1) // start[b]: where bucket b begins
	for _, p := range pairs {
		start[bucket(p)+1]++
	}
	for b := range nb {
		start[b+1] += start[b]
	}
	next := slices.Clone(start[:nb]) // next[b]: the next slot of bucket b to fill
	for b := range nb {
		for next[b] < start[b+1] {
			p := pairs[next[b]]
			for d := bucket(p); d != b; d = bucket(p) {
				p, pairs[next[d]] = pairs[next[d]], p
				next[d]++
			}
			pairs[next[b]] = p
			next[b]++
		}
	}
	for b := range nb {
		bs := pairs[start[b]:start[b+1]]
		for i := 1; i < len(bs); i++ {
			for j := i; j > 0 && bs[j].score > bs[j-1].score; j-- {
				bs[j], bs[j-1] = bs[j-1], bs[j]
			}
		}
	}
}

// band returns, appended to pairs, the pairs whose score is in [floor,
// top], of the shards with no owner and the members with room.
func (a *assignment) band(pairs []pair, floor, top uint64) []pair {
	for s, o := range a.owner {
		if o >= 0 {
			continue
		}
		hs := shardHash(s)
		for i, hm := range a.member {
			if sc := mix(hs ^ hm); sc >= floor && sc <= top && a.room(i) {
				pairs = append(pairs, pair{sc, int32(s), int32(i)})
			}
		}
	}
	return pairs
}

// room reports whether member i may take a shard more.
func (a *assignment) room(i int) bool {
	c := a.load[i]
	return c < a.lo || c == a.lo && a.extra > 0
}

// take assigns p's shard to p's member, when the shard has no owner and
// the member room.
func (a *assignment) take(p pair) {
	if a.owner[p.shard] >= 0 || !a.room(int(p.member)) {
		return
	}
	if a.load[p.member] == a.lo {
		a.extra--
	}
	a.load[p.member]++
	a.owner[p.shard] = p.member
	a.left--
}

// shardHash is the hash of shard s, which its scores mix with the
// members'.
func shardHash(s int) uint64 { return mix(uint64(s) + 0x9e3779b97f4a7c15) }

// mix is splitmix64's finaliser: it spreads every bit of x over the
// result, so that the scores of one shard (or of one member) with
// different members (or shards) compare fairly.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
