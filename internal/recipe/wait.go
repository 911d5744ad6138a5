package recipe

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/corral-go/corral/internal/holderr"
	"github.com/corral-go/corral/store"
)

// A Watch is a node a contender waits on, known by its identity (Path and
// Seq: a node found at Path with another Seq is another node). It fires
// when that node is gone and, with Touch, also when its data is set again,
// which is how a recipe wakes one waiter on purpose (a semaphore's holder
// hands the watch on down its line, a stripe is handed over to a waiter of
// another line): then the node's version differs from Version, or, with a
// Version under 0, it changed after the watch was set.
type Watch struct {
	Path    string
	Seq     int64
	Touch   bool
	Version int64

	anyNode bool // any node at Path holds the wait (WaitAbsent)
}

// WaitAny blocks until one of ws fires, ctx is done or the session ends,
// and returns the index of the one that fired and whether it fired by a
// touch (its node is still there then). It watches each node with
// store.WatchNode, which sets no watch on a node that is gone, re-checks
// after every event (a data change of a node waited for to go, or a watch
// that can no longer fire, never passes for a deletion), and retries across
// a lost connection while the session lives. A Touch watch's Version is
// updated to the version it last saw (-1 when a touch event did not say),
// so that the caller passes it to its next wait. ws must not be empty.
//
// One node is waited on with a plain select, several with reflect.Select:
// the recipes that wait on several nodes (a semaphore's first waiter, a
// stripe's waiter) pay for it, a mutex's waiter does not.
func WaitAny(ctx context.Context, st store.Store, ws []Watch) (i int, touched bool, err error) {
	for attempt := 0; ; attempt++ {
		wctx, stop := context.WithCancel(ctx)
		i, early, touched, e, err := watchAll(wctx, ctx, st, ws)
		stop() // drops the watches that did not fire
		switch {
		case err != nil:
			if !errors.Is(err, store.ErrDisconnected) || ctx.Err() != nil {
				return -1, false, err
			}
		case early:
			return i, touched, nil
		case e.Err == nil && e.Type == store.EventDeleted:
			return i, false, nil
		case e.Err == nil && e.Type == store.EventDataChanged && ws[i].Touch:
			ws[i].Version = -1
			return i, true, nil
		case !errors.Is(e.Err, store.ErrDisconnected):
			continue // not what we wait for, or the end of the watch: watch again
		}
		if err := Pause(ctx, st, attempt); err != nil {
			return -1, false, err
		}
	}
}

// watchAll sets a watch on each node of ws on wctx and returns the index of
// the first that fires: before its watch was set (early, and touched says
// how), or by the event e it delivered. It returns ctx's error when ctx
// ends first.
func watchAll(wctx, ctx context.Context, st store.Store, ws []Watch) (i int, early, touched bool, e store.Event, err error) {
	if len(ws) == 1 {
		early, touched, ev, err := watch(wctx, st, &ws[0])
		if err != nil || early {
			return 0, early, touched, store.Event{}, err
		}
		select {
		case e := <-ev:
			return 0, false, false, e, nil
		case <-ctx.Done():
			return 0, false, false, store.Event{}, ctx.Err()
		}
	}
	evs := make([]<-chan store.Event, 0, len(ws))
	for i := range ws {
		early, touched, ev, err := watch(wctx, st, &ws[i])
		if err != nil || early {
			return i, early, touched, store.Event{}, err
		}
		evs = append(evs, ev)
	}
	j, e, err := FirstEvent(ctx, evs, nil)
	return j, false, false, e, err
}

// FirstEvent waits for the first event of evs, for timeout (which may be
// nil) or for ctx to end, and returns the index of the channel that
// delivered and its event; -1 when timeout fired first; ctx's error when
// it ended first. It selects over any number of channels, by reflection.
func FirstEvent(ctx context.Context, evs []<-chan store.Event, timeout <-chan time.Time) (int, store.Event, error) {
	cases := make([]reflect.SelectCase, 0, len(evs)+2)
	for _, ev := range evs {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ev)})
	}
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timeout)})
	i, v, ok := reflect.Select(cases)
	switch {
	case i == len(evs):
		return i, store.Event{}, ctx.Err()
	case i > len(evs):
		return -1, store.Event{}, nil
	case !ok:
		return i, store.Event{}, nil // closed without an event
	}
	e, _ := v.Interface().(store.Event)
	return i, e, nil
}

// watch sets a watch on the node of w, unless it has fired already: the
// node is gone, or w.Touch and its version is not the one seen.
func watch(ctx context.Context, st store.Store, w *Watch) (early, touched bool, ev <-chan store.Event, err error) {
	stat, ev, err := store.WatchNode(ctx, st, w.Path)
	switch {
	case errors.Is(err, store.ErrNoNode):
		return true, false, nil, nil
	case err != nil:
		return false, false, nil, err
	case !w.anyNode && stat.Seq != w.Seq:
		// Another node at the name: the watch on it ends when that
		// node changes or goes.
		return true, false, nil, nil
	case w.Touch && w.Version >= 0 && stat.Version != w.Version:
		w.Version = stat.Version
		return true, true, nil, nil // touched before the watch
	}
	if w.Touch {
		w.Version = stat.Version
	}
	return false, false, ev, nil
}

// WaitGone blocks until the node at path with Seq seq does not exist, ctx
// is done or the session ends: WaitAny on that one node. A node found at
// path with another Seq is another node (the name was used again, as etcd's
// own clients do for every acquisition of a session), so it counts as
// gone: waiting for it could close a cycle with a contender that waits for
// us.
func WaitGone(ctx context.Context, st store.Store, path string, seq int64) error {
	ws := [1]Watch{{Path: path, Seq: seq}}
	_, _, err := WaitAny(ctx, st, ws[:])
	return err
}

// WaitAbsent blocks until no node exists at path, whichever node it is (a
// barrier's node removed and set again holds the caller back again), ctx is
// done or the session ends; otherwise it is WaitGone.
func WaitAbsent(ctx context.Context, st store.Store, path string) error {
	ws := [1]Watch{{Path: path, anyNode: true}}
	_, _, err := WaitAny(ctx, st, ws[:])
	return err
}

// Confirm is the rule every grant follows: a contender whose node n was
// found granted, on a view read after n was made while the session lived,
// is reported granted only while the session still lives and the store
// reports no lost connection. While the connection is lost, ownership is
// unknown: Confirm waits until the store is back (paced by Pause) and then
// checks that n is still there and this session's before it returns nil.
// Otherwise it returns ctx's error, an error wrapping the session's cause,
// or one wrapping store.ErrNoNode when n is gone (see OwnGone).
func Confirm(ctx context.Context, st store.Store, n store.Node) error {
	checked := true // the view that granted n showed it
	for attempt := 0; ; attempt++ {
		if st.Context().Err() != nil {
			return fmt.Errorf("contender %q: %w", store.ShortPath(n.Path), context.Cause(st.Context()))
		}
		if !disconnected(st) {
			if checked {
				return nil
			}
			err := owned(ctx, st, n)
			if err == nil {
				checked = true
				continue // still connected, still alive?
			}
			if !errors.Is(err, store.ErrDisconnected) || ctx.Err() != nil {
				return err
			}
		}
		checked = false
		if err := Pause(ctx, st, attempt); err != nil {
			return err
		}
	}
}

// owned returns nil when the node n is still there and this session's.
func owned(ctx context.Context, st store.Store, n store.Node) error {
	got, err := st.Get(ctx, n.Path)
	switch {
	case errors.Is(err, store.ErrNoNode):
		return OwnGone(st, n.Path)
	case err != nil:
		return err
	case got.Seq != n.Seq || got.Owner != st.SessionID():
		return fmt.Errorf("contender %q: the node there belongs to session %#x, not %#x: %w (%w)",
			store.ShortPath(n.Path), got.Owner, st.SessionID(), holderr.ErrNodeDeleted, store.ErrNoNode)
	}
	return nil
}

// disconnected reports whether st reports a lost connection now.
func disconnected(st store.Store) bool {
	select {
	case <-st.Disconnected():
		return true
	default:
		return false
	}
}

// OwnGone is the error of a contender whose node vanished while it waited:
// the session's end if it ended, else holderr.ErrNodeDeleted (which every
// primitive exports as its ErrNodeDeleted) with store.ErrNoNode.
func OwnGone(st store.Store, path string) error {
	SyncSession(st)
	if cause := context.Cause(st.Context()); cause != nil {
		return fmt.Errorf("contender %q: %w", store.ShortPath(path), cause)
	}
	return fmt.Errorf("contender %q: %w (%w)", store.ShortPath(path), holderr.ErrNodeDeleted, store.ErrNoNode)
}

// SyncSession waits until st has finished reporting a session end it is in
// the middle of, so that a caller who then reads st.Context() sees the end
// whose effects it met (a node gone, a call failed). The adapters publish a
// session's end (ephemerals deleted, Disconnected closed, Context
// cancelled) under their own lock, which Disconnected takes too.
func SyncSession(st store.Store) { st.Disconnected() }

// WatchChildren lists the children of dir with a watch (store.ChildrenW)
// that fires on their next change. While dir does not exist it returns no
// children and a watch that fires when dir is made (or the watch can no
// longer fire); a dir made between the two reads is listed again. It is
// how a watcher of a directory (an election's observer, a group's watcher,
// a queue's consumer) waits for a directory that comes and goes.
func WatchChildren(ctx context.Context, st store.Store, dir string) ([]store.Child, <-chan store.Event, error) {
	for {
		kids, ev, err := st.ChildrenW(ctx, dir)
		if !errors.Is(err, store.ErrNoNode) {
			return kids, ev, err
		}
		exists, _, ev, err := st.ExistsW(ctx, dir)
		if err != nil {
			return nil, nil, err
		}
		if !exists {
			return nil, ev, nil
		}
	}
}
