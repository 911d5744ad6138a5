package queue

import (
	"context"
	"errors"
	gosync "sync"
	"time"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/store"
)

// A view is what one session knows of one queue, kept up to date for the
// least store work the store allows, and shared by every Queue of that
// session on that path (a Queue holds no resource of its own). It is safe
// for concurrent use.
//
//   - followView, on a store.ChildrenFollower (etcd, memstore): the items
//     and claims directories are listed once and then followed; every
//     change arrives as it happens, so a take reads nothing but the item.
//     Before a take the view syncs with the store (a small read), so it
//     knows every item put before the take began.
//   - listView, elsewhere (ZooKeeper): the directories are listed and the
//     listing worked through. With a store.ChildCounter, a take asks the
//     counts of the directories (one or two small requests, beside its
//     first read of the item) and lists again only when items were put or
//     claims released since; without one, it lists every time.
type view interface {
	// refresh brings the view up to date with the store as of now, but
	// for what check tells.
	refresh(ctx context.Context) error
	// check completes a refresh: it reports whether the queue changed
	// since the view's listing in a way that may put a new item at its
	// head, and if so lists it again. A take runs it beside its first
	// read of the item it picked, and picks again when it reports true.
	check(ctx context.Context) (bool, error)
	// head returns up to n available items at the head of the queue.
	head(n int) []names.Entry
	// gone records that the item e is no longer in the queue.
	gone(e names.Entry)
	// claimed records that the item id is claimed (by someone else).
	claimed(id string)
	// wait blocks until the view may have changed.
	wait(ctx context.Context) error
	// size returns the number of items, claimed or not, as of a moment
	// during the call.
	size(ctx context.Context) (int, error)
	// stop ends what the view runs.
	stop()
	// exact reports whether the view learns of every deletion as it
	// happens (and so of every Ack): else a take reads an item before it
	// claims it (see Queue.claim).
	exact() bool
}

// viewKey names a queue's view among the values of a session's
// recipe.Engine: there is one per session and queue, shared by every Queue
// of that session on that path, until the session ends.
type viewKey struct {
	path   string
	claims bool
}

// view returns the view of q's session on q's queue, making it on first
// use.
func (q *Queue) view(claims bool) view {
	v := recipe.Of(q.st).Value(viewKey{q.path, claims}, func() (any, func()) {
		var v view
		if fl, ok := store.Find[store.ChildrenFollower](q.st); ok {
			v = &followView{q: q, fl: fl, claims: claims}
		} else {
			cc, _ := store.Find[store.ChildCounter](q.st)
			v = &listView{q: q, cc: cc, claims: claims}
		}
		return v, v.stop
	})
	return v.(view)
}

// followView keeps an index by following the queue's directories.
type followView struct {
	q      *Queue
	fl     store.ChildrenFollower
	claims bool

	mu        gosync.Mutex
	idx       *index
	itemsF    store.ChildrenFollow
	claimsF   store.ChildrenFollow
	itemsRdy  <-chan struct{}
	claimsRdy <-chan struct{}
	stopped   bool
	used      time.Time   // the last refresh
	waiting   int         // takes waiting for a change
	idle      *time.Timer // drops the follows once unused for followIdle
}

// followIdle is how long a view keeps following a queue nobody takes from
// in its session: its follows hold a watch each and gather every change to
// the queue meanwhile. The next use follows anew, from a new listing.
const followIdle = time.Minute

// start follows the directories, from new listings.
func (v *followView) start(ctx context.Context) error {
	itemsF, items, err := v.fl.FollowChildren(ctx, v.q.items)
	if err != nil {
		return err
	}
	var claimsF store.ChildrenFollow
	var claims []store.Child
	if v.claims {
		if claimsF, claims, err = v.fl.FollowChildren(ctx, v.q.claims); err != nil {
			itemsF.Stop()
			return err
		}
	}
	v.idx = build(items, claims)
	v.itemsF, v.claimsF = itemsF, claimsF
	if v.idle == nil {
		v.idle = time.AfterFunc(followIdle, v.dropIdle)
	} else {
		v.idle.Reset(followIdle)
	}
	return nil
}

// dropIdle drops the follows if the view was not used for followIdle.
func (v *followView) dropIdle() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.itemsF == nil {
		return
	}
	if left := followIdle - time.Since(v.used); left > 0 || v.waiting > 0 {
		v.idle.Reset(max(left, followIdle/2))
		return
	}
	v.drop()
}

// apply takes the changes the follows delivered into the index, claims
// first: Ack deletes the item before its claim, so every item whose claim
// deletion is applied has had its own deletion delivered by the time the
// items are read (when synced), instead of looking free. A follow that
// ended is stopped, and the next refresh follows anew.
func (v *followView) apply() error {
	err := v.applyClaims()
	if err == nil {
		err = v.applyItems()
	}
	if err != nil {
		v.drop()
	}
	return err
}

func (v *followView) applyItems() error {
	cs, rdy, err := v.itemsF.Changes()
	for _, c := range cs {
		if c.Type == store.EventCreated {
			v.idx.add(c.Name, c.Seq)
		} else {
			v.idx.remove(c.Name)
		}
	}
	v.itemsRdy = rdy
	return err
}

func (v *followView) applyClaims() error {
	if v.claimsF == nil {
		return nil
	}
	cs, rdy, err := v.claimsF.Changes()
	for _, c := range cs {
		if c.Type == store.EventCreated {
			v.idx.claim(c.Name)
		} else {
			v.idx.unclaim(c.Name)
		}
	}
	v.claimsRdy = rdy
	return err
}

// drop stops the follows; the next refresh starts anew.
func (v *followView) drop() {
	if v.itemsF != nil {
		v.itemsF.Stop()
	}
	if v.claimsF != nil {
		v.claimsF.Stop()
	}
	v.itemsF, v.claimsF, v.idx = nil, nil, nil
}

func (v *followView) refresh(ctx context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.stopped {
		return context.Cause(v.q.st.Context())
	}
	v.used = time.Now()
	for attempt := 0; ; attempt++ {
		if v.itemsF == nil {
			if err := v.start(ctx); err != nil {
				return err
			}
		}
		if err := v.sync(ctx); err != nil {
			if v.itemsF == nil && attempt == 0 && ctx.Err() == nil {
				continue // the follow had ended: follow anew, once
			}
			return err
		}
		return nil
	}
}

// sync applies every change made before now, claims first (see apply).
// v.mu is held.
func (v *followView) sync(ctx context.Context) error {
	if v.claimsF != nil {
		if err := v.claimsF.Sync(ctx); err != nil {
			return v.failed(err)
		}
		if err := v.applyClaims(); err != nil {
			v.drop()
			return err
		}
	}
	if err := v.itemsF.Sync(ctx); err != nil {
		return v.failed(err)
	}
	if err := v.applyItems(); err != nil {
		v.drop()
		return err
	}
	return nil
}

// failed returns err, the error of a sync, after taking in what the
// follows delivered so far (apply drops them if they ended).
func (v *followView) failed(err error) error {
	_ = v.apply()
	return err
}

func (v *followView) head(n int) []names.Entry {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.idx == nil {
		return nil
	}
	return v.idx.head(n)
}

func (v *followView) gone(e names.Entry) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.idx != nil {
		v.idx.remove(e.Name)
	}
}

func (v *followView) claimed(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.idx != nil {
		v.idx.claim(id)
	}
}

func (v *followView) wait(ctx context.Context) error {
	v.mu.Lock()
	if v.idx == nil {
		v.mu.Unlock()
		return nil // refresh follows anew
	}
	if err := v.apply(); err != nil || v.idx.available() {
		v.mu.Unlock()
		return err
	}
	items, claims := v.itemsRdy, v.claimsRdy
	v.waiting++
	v.mu.Unlock()
	defer func() {
		v.mu.Lock()
		v.waiting--
		v.used = time.Now()
		v.mu.Unlock()
	}()
	select {
	case <-items:
	case <-claims:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func (v *followView) size(ctx context.Context) (int, error) {
	if err := v.refresh(ctx); err != nil {
		return 0, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.idx.size(), nil
}

func (v *followView) exact() bool { return true }

// check has nothing to do: refresh synced the view.
func (v *followView) check(context.Context) (bool, error) { return false, nil }

func (v *followView) stop() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.stopped = true
	if v.idle != nil {
		v.idle.Stop()
	}
	v.drop()
}

// listView keeps an index by listing the queue's directories.
type listView struct {
	q      *Queue
	cc     store.ChildCounter // nil: list for every take
	claims bool

	mu          gosync.Mutex
	idx         *index
	stale       bool
	itemsCount  store.ChildCounts
	claimsCount store.ChildCounts
	released    int64 // the highest estimate of claims released; see changed
}

// list lists the directories anew. v.mu is held.
func (v *listView) list(ctx context.Context) error {
	// Claims first: Ack deletes the item before its claim, so an item
	// whose claim is gone from this listing is gone from the next one
	// too, instead of looking free.
	var claims []store.Child
	var cc store.ChildCounts
	if v.claims {
		var err error
		if claims, cc, err = v.listDir(ctx, v.q.claims); err != nil {
			return err
		}
	}
	items, ic, err := v.listDir(ctx, v.q.items)
	if err != nil {
		return err
	}
	v.idx, v.stale = build(items, claims), false
	if ic.Made != v.itemsCount.Made || cc.Made != v.claimsCount.Made {
		// A directory went with its last node and was made again (see
		// Parents in store's doc): its counts start again.
		v.released = 0
	}
	v.itemsCount, v.claimsCount = ic, cc
	if v.claims && cc.Changes >= 0 && ic.Changes >= 0 {
		v.released = max(v.released, released(cc, ic))
	}
	return nil
}

// listDir lists dir, counted when the store can; a missing dir is empty.
func (v *listView) listDir(ctx context.Context, dir string) ([]store.Child, store.ChildCounts, error) {
	var kids []store.Child
	var c store.ChildCounts
	var err error
	if v.cc != nil {
		kids, c, err = v.cc.ChildrenCounted(ctx, dir)
	} else {
		kids, err = v.q.st.Children(ctx, dir)
	}
	if errors.Is(err, store.ErrNoNode) {
		return nil, store.ChildCounts{Changes: -1}, nil
	}
	return kids, c, err
}

// changed reports whether items were put, or claims released, since the
// listing, from the counts of both directories.
//
// An Ack deletes the item, then its claim; a release (Nack, timeout, a
// session's end) deletes only the claim. So claims deleted minus items
// deleted (read in that order: every claim deletion read then has its
// item's deletion read too) is the number of releases, less the Acks under
// way. That estimate never exceeds the releases made, and falls short of
// them only while Acks are under way; a release shows as the estimate
// rising past the highest seen. v.mu is held.
func (v *listView) changed(ctx context.Context) (bool, error) {
	var cc store.ChildCounts
	if v.claims {
		var err error
		if cc, err = v.count(ctx, v.q.claims); err != nil {
			return true, err
		}
	}
	ic, err := v.count(ctx, v.q.items)
	if err != nil {
		return true, err
	}
	if ic.Made != v.itemsCount.Made || ic.Created() != v.itemsCount.Created() || (ic.Changes < 0) != (v.itemsCount.Changes < 0) {
		return true, nil
	}
	if !v.claims {
		return false, nil
	}
	if cc.Made != v.claimsCount.Made || (cc.Changes < 0) != (v.claimsCount.Changes < 0) {
		return true, nil
	}
	if r := released(cc, ic); r > v.released {
		v.released = r
		return true, nil
	}
	return false, nil
}

// released estimates the releases of claims from the counts of the claims
// and items directories; see changed.
func released(claims, items store.ChildCounts) int64 {
	deleted := func(c store.ChildCounts) int64 { return c.Changes - c.Created() }
	return deleted(claims) - deleted(items)
}

func (v *listView) count(ctx context.Context, dir string) (store.ChildCounts, error) {
	c, err := v.cc.CountChildren(ctx, dir)
	if errors.Is(err, store.ErrNoNode) {
		return store.ChildCounts{Changes: -1}, nil
	}
	return c, err
}

// refresh lists the queue when the view has no listing, a wait saw it
// change, or the store has no child counts; check asks the counts.
func (v *listView) refresh(ctx context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.idx == nil || v.stale || v.cc == nil {
		return v.list(ctx)
	}
	return nil
}

func (v *listView) check(ctx context.Context) (bool, error) {
	if v.cc == nil {
		return false, nil // refresh listed
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	changed, err := v.changed(ctx)
	if err != nil || !changed {
		return false, err
	}
	return true, v.list(ctx)
}

func (v *listView) head(n int) []names.Entry {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.idx == nil {
		return nil
	}
	return v.idx.head(n)
}

func (v *listView) gone(e names.Entry) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.idx != nil {
		v.idx.remove(e.Name)
	}
}

func (v *listView) claimed(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.idx != nil {
		v.idx.claim(id)
	}
}

// wait sets children watches on the directories and returns once they
// show an available item, or when one fires.
func (v *listView) wait(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel() // releases the watch that did not fire
	defer func() {
		v.mu.Lock()
		v.stale = true
		v.mu.Unlock()
	}()
	items, itemsEv, err := recipe.WatchChildren(wctx, v.q.st, v.q.items)
	if err != nil {
		return err
	}
	var claims []store.Child
	var claimsEv <-chan store.Event
	if v.claims {
		if claims, claimsEv, err = recipe.WatchChildren(wctx, v.q.st, v.q.claims); err != nil {
			return err
		}
	}
	if build(items, claims).available() {
		return nil
	}
	select {
	case ev := <-itemsEv:
		return ev.Err
	case ev := <-claimsEv:
		return ev.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// size counts the items of a fresh listing.
func (v *listView) size(ctx context.Context) (int, error) {
	kids, err := v.q.st.Children(ctx, v.q.items)
	if errors.Is(err, store.ErrNoNode) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range kids {
		if _, ok := names.ParseItem(k.Name, k.Seq); ok {
			n++
		}
	}
	return n, nil
}

func (v *listView) stop() {}

func (v *listView) exact() bool { return false }
