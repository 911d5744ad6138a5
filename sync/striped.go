package sync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// stripesDir is the directory, under a StripedMutex's path, of every
// stripe's contenders: one directory, so that one listing shows all lines.
const stripesDir = "stripes"

// handOverTries bounds the waiters a releaser tries to hand an idle stripe
// to: each costs a read and a write, and a contender that looks like a
// waiter may be one that lost a race for a free stripe and is about to go.
const handOverTries = 1

// freeTries bounds the creates of a Lock that races others for free
// stripes: after that many lost races it stays in the line of the last.
// Every lost race costs a create and a delete, and on a busy store the
// listing that showed the stripes free is stale by the time the create
// lands, so more tries mostly lose more.
const freeTries = 2

// A stripe's contenders are named "s<i>-lock-n<k>-" when their Lock takes
// any stripe, and "s<i>-only-lock-n<k>-" when it is limited to some (it is
// never handed another stripe), where k is the number of stripes (see
// limitSetting). Both hold Curator's "lock-".
const onlyMarker = "only-"

// stripePrefix is the name prefix of a contender for stripe i, with the
// setting k of the stripes' number.
func stripePrefix(i int, all bool, k *recipe.Setting) string {
	p := "s" + strconv.Itoa(i) + "-"
	if !all {
		p += onlyMarker
	}
	return p + k.Prefix()
}

// stripeOf returns the stripe of the contender named name and whether its
// Lock takes any stripe; ok is false for a contender of another recipe or
// client.
func stripeOf(name string) (i int, all, ok bool) {
	n := names.Strip(name)
	if len(n) < 2 || n[0] != 's' {
		return 0, false, false
	}
	end := strings.IndexByte(n, '-')
	if end < 2 {
		return 0, false, false
	}
	i, err := strconv.Atoi(n[1:end])
	if err != nil || i < 0 {
		return 0, false, false
	}
	switch rest := n[end+1:]; {
	case strings.HasPrefix(rest, names.Lock):
		return i, true, true
	case strings.HasPrefix(rest, onlyMarker+names.Lock):
		return i, false, true
	}
	return 0, false, false
}

// stripeBlocker is the recipe.Blocker of a stripe's contender: the last
// earlier contender of the same stripe, or of no stripe (a foreign lock in
// the directory, such as a Mutex on it, blocks every stripe).
func stripeBlocker(cs []recipe.Contender, own int) int {
	mine, _, _ := stripeOf(cs[own].Name)
	for i := own - 1; i >= 0; i-- {
		if s, _, ok := stripeOf(cs[i].Name); !ok || s == mine {
			return i
		}
	}
	return -1
}

// StripedMutex is a lock of k stripes, each a lock of its own, for a hot
// resource split into k segments: Lock grants any one free stripe, so k
// callers hold the resource at once, each on its own segment. A flash sale
// whose stock is split into k segments sells k units at a time instead of
// one (see the example).
//
// The stripes' contenders are ephemeral sequential nodes in one directory,
// path + "/stripes", named "s<i>-lock-n<k>-" for stripe i (or
// "s<i>-only-lock-n<k>-")
// and ordered by Seq as a Mutex's are; a contender waits only for the last
// earlier contender of its own stripe. Each grant has the stripe's own hold
// context and fencing token (the node's store.Node.Fence, which grows with
// every grant in the directory, so with every grant of the stripe). Since every line is in
// one directory, one listing shows them all, whatever k. A contender of any
// other kind there (a Mutex on that directory, say) blocks every stripe
// behind it and waits for every stripe before it: it holds the whole
// resource, for a stock-taking or a restocking.
//
// The number of stripes k is recorded in every contender's name, and Lock
// and TryLock with a k that differs from that of a contender there fail
// with ErrMismatch; a k under 1 fails with ErrInvalidLimit. It lives as long
// as the contenders do: once the last stripe is unlocked, the stripes'
// directory and the node at the path go with it.
//
// # Waiting without a herd
//
// Lock lists the lines (one round trip) and tries the free stripes first,
// starting at an offset that differs from caller to caller (derived from the
// session and moved on by every call), so that callers arriving together
// spread over the stripes instead of racing for the first. Trying a stripe
// creates the contender node; when someone else got there first, the node
// stays in that line if no other stripe is free by then (so it costs no
// more than joining a line), and is removed to try the next free one
// otherwise. When none is free, Lock waits in the shortest line (fewest
// contenders, ties broken by the offset). In its line it waits as a Mutex
// waiter does, watching only the contender of its stripe just before it, so
// a release wakes exactly the next waiter of that stripe.
//
// A line can empty while others are long. So a waiter that takes any stripe
// also watches its own node, and an Unlock that leaves its stripe with nobody
// in line hands the stripe over: it touches the node of the newest such
// waiter (sets its data again, unchanged), which wakes that waiter alone; the
// waiter takes the free stripe and leaves the line it was in (being the
// newest, it was that line's last, so nobody behind it wakes). So every
// release wakes at most one waiter: the next in its stripe's line, or the
// one it hands the idle stripe to; and a waiter is served by whichever
// stripe comes free first for it. A hand-over is best effort: when the
// holder's session ends instead of an Unlock, or a newcomer takes the stripe
// first, nobody moves and the waiters stay in their lines. The releaser's
// next Lock tries the stripe it handed over last, so that a caller who
// releases and locks again in a loop does not take it back from the waiter.
// A Lock limited to some stripes is never handed one: it waits in its line.
//
// Fairness: each line is first come, first served, so a waiter waits at most
// for the contenders that were in its line when it joined. Across lines the
// order is not global: a later caller can be served first by a stripe that
// came free, and a newcomer that finds a stripe free takes it although
// others wait in other lines. The alternative, one global line whose first
// waiter watches all k stripes (the Semaphore's scheme), is strictly first
// come, first served, but every grant then passes through that one waiter (a
// wake, an acquire and a hand-down, one after another), which caps the grants
// per second of all k stripes together at what one line does: the very limit
// striping is meant to lift.
//
// # Use
//
// A StripedMutex is safe for concurrent use: each Lock grants a *Stripe of
// its own, and goroutines of one StripedMutex can hold different stripes at
// once (or wait for the same). It must not be copied after first use; the
// zero value is not usable (its methods fail with store.ErrInvalidArgument),
// make one with NewStripedMutex. The LockOptions are those of Mutex: the
// disconnection policy of the stripes' holds, the data of their nodes, and
// the metrics and logs (kind striped_mutex, the StripedMutex's path).
// When the session ends, a waiting Lock returns the session's cause and every
// stripe held through it is lost (see Stripe).
type StripedMutex struct {
	st    store.Store
	path  string
	k     int
	opts  lockOptions
	rec   *telemetry.Recorder
	calls atomic.Uint64 // moves the offset on with each call
	// handed is 1 + the stripe this value last handed over, or 0: its next
	// Lock tries that stripe last.
	handed atomic.Int64

	stripes *recipe.Setting // k, as the contenders record it
}

// NewStripedMutex returns a StripedMutex of k stripes whose node is at path
// in st. It does no I/O: an invalid path, a k under 1 or one that differs
// from the stored one are reported by the first Lock or TryLock.
func NewStripedMutex(st store.Store, path string, k int, opts ...LockOption) *StripedMutex {
	o := newLockOptions(opts)
	return &StripedMutex{st: st, path: path, k: k, opts: o, rec: o.recorder(telemetry.KindStriped, path, ErrNodeDeleted),
		stripes: limitSetting(names.Lock, k)}
}

// Path returns the path of the striped lock's node.
func (s *StripedMutex) Path() string {
	if s == nil {
		return ""
	}
	return s.path
}

// Stripes returns k, the number of stripes.
func (s *StripedMutex) Stripes() int {
	if s == nil {
		return 0
	}
	return s.k
}

// dir returns the directory of the stripes' contenders.
func (s *StripedMutex) dir() string { return store.Join(s.path, stripesDir) }

// Lock acquires one stripe, blocking until one is granted, ctx is done or the
// session ends, and returns it; the caller must Unlock it. With stripes, only
// those are candidates (an index out of [0, k) fails with
// store.ErrInvalidArgument); without, all k are. Free stripes are tried
// first; then Lock waits, without a herd, as the type's doc describes. On
// failure it returns an error (ctx.Err() wrapped, with its cause, when ctx
// ended first) and has removed its node, so the line behind it moves up as
// if it had never asked.
func (s *StripedMutex) Lock(ctx context.Context, stripes ...int) (*Stripe, error) {
	set, err := s.prepare(ctx, "lock", stripes)
	if err != nil {
		return nil, err
	}
	a := s.rec.Begin(ctx)
	st, err := s.acquire(ctx, a, s.order(set), len(set) == s.k, true)
	if err != nil {
		a.Failed(ctx, err)
		return nil, s.opErr(ctx, "lock", err)
	}
	return st, nil
}

// TryLock acquires one of the stripes (all k without stripes) if one is free
// now, without waiting. It returns the stripe and true, a nil *Stripe and
// false when all are held, and an error when the store failed. Check ok
// before deferring the Unlock: a nil *Stripe holds nothing, and its Unlock
// fails with store.ErrInvalidArgument.
func (s *StripedMutex) TryLock(ctx context.Context, stripes ...int) (*Stripe, bool, error) {
	set, err := s.prepare(ctx, "trylock", stripes)
	if err != nil {
		return nil, false, err
	}
	a := s.rec.Try()
	st, err := s.acquire(ctx, a, s.order(set), len(set) == s.k, false)
	switch {
	case err != nil:
		a.Failed(ctx, err)
		return nil, false, s.opErr(ctx, "trylock", err)
	case st == nil:
		a.Busy(ctx)
	}
	return st, st != nil, nil
}

// prepare checks the StripedMutex, the stored k (the first time) and the
// candidate stripes, and returns them sorted, without repetition.
func (s *StripedMutex) prepare(ctx context.Context, op string, stripes []int) ([]int, error) {
	if s == nil || s.st == nil {
		return nil, s.opErr(ctx, op, fmt.Errorf("%w: striped lock not made by NewStripedMutex with a store", store.ErrInvalidArgument))
	}
	if s.opts.bad != nil {
		return nil, s.opErr(ctx, op, s.opts.bad)
	}
	if s.k < 1 {
		return nil, s.opErr(ctx, op, fmt.Errorf("%w: %d stripes", ErrInvalidLimit, s.k))
	}
	set := stripes
	if len(set) == 0 {
		set = make([]int, s.k)
		for i := range set {
			set[i] = i
		}
	} else {
		set = slices.Clone(set)
		slices.Sort(set)
		set = slices.Compact(set)
		if set[0] < 0 || set[len(set)-1] >= s.k {
			return nil, s.opErr(ctx, op, fmt.Errorf("%w: stripes %v out of [0, %d)", store.ErrInvalidArgument, stripes, s.k))
		}
	}
	if ctx.Err() != nil {
		return nil, s.opErr(ctx, op, nil)
	}
	return set, nil
}

// order returns the stripes of set in the order this call tries them: from
// an offset that depends on the session and moves on with every call, with
// the stripe this value last handed over at the end.
func (s *StripedMutex) order(set []int) []int {
	// A multiplicative hash spreads consecutive session IDs.
	seed := uint64(s.st.SessionID()) * 0x9e3779b97f4a7c15 >> 32
	off := int((seed + s.calls.Add(1)) % uint64(s.k))
	last := int(s.handed.Swap(0)) - 1
	rank := func(i int) int {
		if i == last {
			return s.k
		}
		return (i - off + s.k) % s.k
	}
	ord := slices.Clone(set)
	slices.SortFunc(ord, func(a, b int) int { return rank(a) - rank(b) })
	return ord
}

// lineCounts returns how many contenders of cs wait in the line of each
// stripe of ord, leaving out the node named skip. A contender of no stripe
// counts in every line.
func lineCounts(cs []recipe.Contender, ord []int, skip string) []int {
	per := map[int]int{}
	foreign := 0
	for _, c := range cs {
		if c.Name == skip {
			continue
		}
		if i, _, ok := stripeOf(c.Name); ok {
			per[i]++
		} else {
			foreign++
		}
	}
	counts := make([]int, len(ord))
	for j, i := range ord {
		counts[j] = per[i] + foreign
	}
	return counts
}

// peek lists the stripes' directory and returns how many wait in the line of
// each stripe of ord.
func (s *StripedMutex) peek(ctx context.Context, ord []int) ([]int, error) {
	kids, err := s.st.Children(ctx, s.dir())
	if err != nil && !errors.Is(err, store.ErrNoNode) {
		return nil, err
	}
	return lineCounts(recipe.Contenders(kids), ord, ""), nil
}

// acquire tries the free stripes of ord in order and, when none is granted
// and wait is set, waits in a line; without wait it returns nil when none is
// granted. all says whether ord is every stripe; a is the attempt a grant
// reports to.
func (s *StripedMutex) acquire(ctx context.Context, a telemetry.Attempt, ord []int, all, wait bool) (*Stripe, error) {
	counts, err := s.peek(ctx, ord)
	if err != nil {
		return nil, err
	}
	tried := make([]bool, len(ord))
	creates := 0
	for {
		j := firstFree(counts, tried)
		if j < 0 {
			if !wait {
				return nil, nil
			}
			j = shortest(counts)
		}
		tried[j] = true
		i := ord[j]
		// Enter lists the directory right after the create: in one round
		// trip on a store with CreateLister.
		l, err := recipe.Enter(ctx, s.st, s.spec(i, all), a)
		if err != nil {
			return nil, fmt.Errorf("stripe %d: %w", i, err)
		}
		blocked, err := l.Blocked(ctx)
		if err != nil {
			return nil, errors.Join(err, l.Leave(ctx))
		}
		if !blocked {
			return s.grant(ctx, l, i)
		}
		// Someone got there first. Give the place up only to try a
		// stripe that is free now, and only freeTries times.
		counts = lineCounts(l.Contenders(), ord, l.Node().Name())
		next := firstFree(counts, tried)
		if creates++; creates == freeTries && wait {
			next = -1
		}
		if next < 0 && wait {
			return s.waitLine(ctx, a, i, l, ord, all)
		}
		if err := l.Leave(ctx); err != nil {
			return nil, err
		}
		if next < 0 {
			return nil, nil
		}
	}
}

// spec returns the spec of a contender for stripe i, of a Lock that takes
// any stripe (all) or not.
func (s *StripedMutex) spec(i int, all bool) *recipe.Spec {
	sp := s.opts.spec(s.dir(), stripePrefix(i, all, s.stripes), recipe.Order{Block: func(dir string, cs []recipe.Contender, own int) []recipe.Watch {
		b := stripeBlocker(cs, own)
		if b < 0 {
			return nil
		}
		ws := []recipe.Watch{cs[b].Watch(dir)}
		if all && s.k > 1 {
			// Its own node too, for a hand-over (see handOver).
			w := cs[own].Watch(dir)
			w.Touch = true
			ws = append(ws, w)
		}
		return ws
	}}, s.rec)
	sp.Setting = s.stripes
	return sp
}

// firstFree returns the first index with an empty line not tried yet, or
// -1.
func firstFree(counts []int, tried []bool) int {
	for j, n := range counts {
		if n == 0 && !tried[j] {
			return j
		}
	}
	return -1
}

// shortest returns the first index of the shortest line.
func shortest(counts []int) int {
	best := 0
	for j, n := range counts {
		if n < counts[best] {
			best = j
		}
	}
	return best
}

// waitLine blocks until l, a contender of stripe line, is granted, ctx is
// done or the session ends. A waiter that takes any stripe (all) also
// watches its own node for a hand-over (see spec), and then moves to a free
// stripe of ord if it gets one. On error it removes its node.
func (s *StripedMutex) waitLine(ctx context.Context, a telemetry.Attempt, line int, l *recipe.Line, ord []int, all bool) (st *Stripe, err error) {
	defer func() {
		if err != nil {
			err = errors.Join(err, l.Leave(ctx))
		}
	}()
	var others []int
	if all {
		others = slices.DeleteFunc(slices.Clone(ord), func(i int) bool { return i == line })
	}
	for {
		touched, err := l.Wait(ctx)
		if err != nil {
			return nil, err
		}
		if !touched {
			return s.grant(ctx, l, line)
		}
		if got := s.move(ctx, a, others); got != nil {
			// The old place goes to the session's cleaner if it
			// cannot be removed now; the new stripe stands.
			_ = l.Leave(ctx)
			return got, nil
		}
	}
}

// move tries the free stripes of others after a hand-over and returns the
// one it got, or nil (taken first, or the store failed: stay in line).
func (s *StripedMutex) move(ctx context.Context, a telemetry.Attempt, others []int) *Stripe {
	counts, err := s.peek(ctx, others)
	if err != nil {
		return nil
	}
	for j, i := range others {
		if counts[j] > 0 {
			continue
		}
		l, err := recipe.Enter(ctx, s.st, s.spec(i, true), a)
		if err != nil {
			return nil
		}
		if blocked, err := l.Blocked(ctx); err == nil && !blocked {
			if st, err := s.grant(ctx, l, i); err == nil {
				return st
			}
		}
		if l.Leave(ctx) != nil {
			return nil
		}
	}
	return nil
}

// handOver is the last step of an Unlock of stripe i: when nobody is in the
// stripe's line, wake the newest waiter that takes any stripe by touching
// its node, and remember not to take the stripe back first. It is best
// effort: on a failure the waiters stay in their lines.
func (s *StripedMutex) handOver(ctx context.Context, i int) {
	if s.k == 1 || ctx.Err() != nil {
		return
	}
	kids, err := s.st.Children(ctx, s.dir())
	if err != nil {
		return
	}
	cs := recipe.Contenders(kids)
	if lineCounts(cs, []int{i}, "")[0] > 0 {
		return // the next in line was woken by the release
	}
	tries := 0
	for w := len(cs) - 1; w >= 0 && tries < handOverTries; w-- {
		if _, all, ok := stripeOf(cs[w].Name); !ok || !all || stripeBlocker(cs, w) < 0 {
			continue // not a waiter that takes any stripe
		}
		tries++
		p := store.Join(s.dir(), cs[w].Name)
		n, err := s.st.Get(ctx, p)
		if err != nil || n.Seq != cs[w].Seq {
			continue
		}
		// The same data: the touch is what wakes the waiter.
		_, err = s.st.Set(ctx, p, n.Data, n.Version)
		if err == nil {
			s.handed.Store(int64(i) + 1)
			return
		}
		if !errors.Is(err, store.ErrNoNode) && !errors.Is(err, store.ErrBadVersion) {
			return // the store fails: leave it
		}
	}
}

// grant makes the hold of l, stripe i.
func (s *StripedMutex) grant(ctx context.Context, l *recipe.Line, i int) (*Stripe, error) {
	h, err := l.Hold(ctx)
	if err != nil {
		return nil, errors.Join(err, l.Leave(ctx))
	}
	return &Stripe{s: s, i: i, hold: h}, nil
}

// opErr reports a failed call, matching ctx.Err() and its cause when ctx
// ended; nil when err is nil and ctx lives.
func (s *StripedMutex) opErr(ctx context.Context, op string, err error) error {
	if err = recipe.CtxErr(ctx, err); err == nil {
		return nil
	}
	return opErr(op, s.Path(), err)
}

// Stripe is one stripe of a StripedMutex, held from Lock until Unlock. Its
// methods are safe for concurrent use. A nil or zero Stripe (a TryLock that
// got none returns nil) holds nothing: Unlock fails with
// store.ErrInvalidArgument, Index and Token are -1, and Context is cancelled
// with ErrNotLocked.
//
// A stripe is lost, as a Mutex is, when its session ends, when its node is
// deleted by someone else, or (under the default LoseOnDisconnect policy)
// when the connection is lost; Context is then cancelled with the reason,
// and Unlock returns an error wrapping ErrLockLost.
type Stripe struct {
	s    *StripedMutex
	i    int
	hold *recipe.Hold
}

// usable reports a Stripe not granted by a StripedMutex: a nil or zero one.
func (st *Stripe) usable() error {
	if st == nil || st.s == nil || st.hold == nil {
		return opErr("unlock", "", fmt.Errorf("%w: stripe not granted by a StripedMutex", store.ErrInvalidArgument))
	}
	return nil
}

// Index returns the stripe's index, in [0, k); -1 for a nil or zero Stripe.
func (st *Stripe) Index() int {
	if st.usable() != nil {
		return -1
	}
	return st.i
}

// Context returns a context that is cancelled the moment the stripe is no
// longer held, with the reason as its cause: ErrUnlocked, ErrNodeDeleted,
// ErrDisconnected, store.ErrSessionExpired or store.ErrClosed. For a nil or
// zero Stripe it is cancelled already, with ErrNotLocked.
func (st *Stripe) Context() context.Context {
	if st.usable() != nil {
		return notHeld
	}
	return st.hold.Context()
}

// Token returns the stripe's fencing token: its node's (store.Node.Fence),
// which grows with every grant of the same stripe; -1 for a nil or zero Stripe.
func (st *Stripe) Token() int64 {
	if st.usable() != nil {
		return -1
	}
	return st.hold.Token()
}

// Guard returns the guard of the stripe's node, for a write that must be
// applied only while the stripe is held (see store.Guard); the zero Guard
// for a nil or zero Stripe.
func (st *Stripe) Guard() store.Guard {
	if st.usable() != nil {
		return store.Guard{}
	}
	return st.hold.Guard()
}

// Unlock releases the stripe and removes its node, on
// context.WithoutCancel(ctx), bounded, so a cancelled ctx still releases.
// The release wakes the next waiter in the stripe's line or, when there is
// none, Unlock hands the stripe over to a waiter in another line (one round
// trip more to see, two more to hand over). It returns an error wrapping
// ErrLockLost and the cause when the stripe had been lost, and one wrapping
// ErrNotLocked, touching nothing, when it was unlocked already. If the node
// could not be removed (the connection is lost) the error wraps
// store.ErrDisconnected, the session removes the node as soon as it can, and
// a second Unlock waits for that removal as the first did. A nil or zero
// Stripe (the one a TryLock that got none returns) fails with
// store.ErrInvalidArgument.
func (st *Stripe) Unlock(ctx context.Context) error {
	if err := st.usable(); err != nil {
		return err
	}
	lost, err := release(ctx, st.hold, ErrUnlocked, ErrNotLocked)
	if lost != nil {
		return st.opErr(errors.Join(fmt.Errorf("%w: %w", ErrLockLost, lost), err))
	}
	if err != nil {
		return st.opErr(err)
	}
	st.s.handOver(ctx, st.i)
	return nil
}

func (st *Stripe) opErr(err error) error {
	return opErr("unlock", st.s.path, fmt.Errorf("stripe %d: %w", st.i, err))
}
