package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/corral-go/corral/store"
)

// Timeout bounds every wait of the suite.
const Timeout = 20 * time.Second

// Run runs the whole conformance suite against b, one subtest per rule.
// The optional interfaces ReplyLoser and Disconnector, and the optional
// store.NodeWatcher, store.CreateLister, store.WindowLister,
// store.SeqDeleter, store.FrontDeleter, store.GetDeleter, store.ChildrenFollower,
// store.ChildCounter, store.Leaser, store.GuardedCreator, store.BatchCreator and store.GuardedWriter of the opened
// sessions, are tested when present.
func Run(t *testing.T, b Backend) {
	s := &suite{b: b}
	tests := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"InvalidPath", s.invalidPath},
		{"InvalidArgument", s.invalidArgument},
		{"CreateGet", s.createGet},
		{"Parents", s.parents},
		{"ExplicitParents", s.explicitParents},
		{"ReclaimedOnSessionEnd", s.reclaimedOnSessionEnd},
		{"ReclaimRace", s.reclaimRace},
		{"ReclaimWatch", s.reclaimWatch},
		{"ReclaimSiblings", s.reclaimSiblings},
		{"ReclaimReuse", s.reclaimReuse},
		{"Root", s.root},
		{"EphemeralParent", s.ephemeralParent},
		{"SetVersion", s.setVersion},
		{"Delete", s.delete},
		{"TooLarge", s.tooLarge},
		{"Sequential", s.sequential},
		{"ConcurrentSequential", s.concurrentSequential},
		{"Owner", s.owner},
		{"EphemeralGoneOnClose", s.ephemeralGoneOnClose},
		{"EphemeralGoneOnExpire", s.ephemeralGoneOnExpire},
		{"ExistsWatch", s.existsWatch},
		{"ExistsWatchOnce", s.existsWatchOnce},
		{"ExistsWatchStat", s.existsWatchStat},
		{"ExistsWatchNoGap", s.existsWatchNoGap},
		{"WatchCancelled", s.watchCancelled},
		{"WatchClosed", s.watchClosed},
		{"WatchExpired", s.watchExpired},
		{"ChildrenWatch", s.childrenWatch},
		{"NodeWatch", s.nodeWatch},
		{"CancelledContext", s.cancelledContext},
		{"AfterClose", s.afterClose},
		{"AfterExpire", s.afterExpire},
		{"LostCreateReply", s.lostCreateReply},
		{"Disconnect", s.disconnect},
		{"CreateAndList", s.createAndList},
		{"Window", s.window},
		{"DeleteSeq", s.deleteSeq},
		{"DeleteFront", s.deleteFront},
		{"NameReuse", s.nameReuse},
		{"GetDelete", s.getDelete},
		{"FollowChildren", s.followChildren},
		{"FollowEnds", s.followEnds},
		{"ChildCounter", s.childCounter},
		{"Leased", s.leased},
		{"GuardedCreate", s.guardedCreate},
		{"BatchCreate", s.batchCreate},
		{"GuardedWrite", s.guardedWrite},
		{"GuardedWriteInvalid", s.guardedWriteInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.fn)
	}
}

type suite struct {
	b Backend
}

// open opens a session that is closed when the test ends.
func (s *suite) open(t *testing.T) store.Store {
	t.Helper()
	st := s.b.Open(t)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// ns returns a fresh namespace path for one test.
func ns(t *testing.T) string {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/storetest/%s-%08x", name, rand.Uint32())
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// must fails the test on an error and otherwise returns the value; its
// methods take a call's results whole: req(t).node(st.Get(ctx, p)).
type must struct{ t *testing.T }

func req(t *testing.T) must { return must{t} }

func (m must) ok(err error) {
	m.t.Helper()
	if err != nil {
		m.t.Fatal(err)
	}
}

func (m must) node(n store.Node, err error) store.Node {
	m.t.Helper()
	m.ok(err)
	return n
}

func (m must) kids(kids []store.Child, err error) []store.Child {
	m.t.Helper()
	m.ok(err)
	return kids
}

func (m must) watch(exists bool, _ store.Stat, ch <-chan store.Event, err error) (bool, <-chan store.Event) {
	m.t.Helper()
	m.ok(err)
	return exists, ch
}

func (m must) kidsW(kids []store.Child, ch <-chan store.Event, err error) ([]store.Child, <-chan store.Event) {
	m.t.Helper()
	m.ok(err)
	return kids, ch
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s = %v; want %v", what, err, want)
	}
}

// event waits for the one event of ch, then checks that ch is closed.
func event(t *testing.T, what string, ch <-chan store.Event) store.Event {
	t.Helper()
	var ev store.Event
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatalf("%s: channel closed without an event", what)
		}
		ev = e
	case <-time.After(Timeout):
		t.Fatalf("%s: no event in %v", what, Timeout)
	}
	select {
	case e, ok := <-ch:
		if ok {
			t.Fatalf("%s: second event %+v after %+v", what, e, ev)
		}
	case <-time.After(Timeout):
		t.Fatalf("%s: channel not closed after its event", what)
	}
	return ev
}

func wantEvent(t *testing.T, what string, ch <-chan store.Event, typ store.EventType) {
	t.Helper()
	ev := event(t, what, ch)
	if ev.Err != nil || ev.Type != typ {
		t.Errorf("%s: event %v (err %v); want %v", what, ev.Type, ev.Err, typ)
	}
}

func wantErrEvent(t *testing.T, what string, ch <-chan store.Event, want error) {
	t.Helper()
	ev := event(t, what, ch)
	if !errors.Is(ev.Err, want) || ev.Type != store.EventNone {
		t.Errorf("%s: event %v (err %v); want error %v", what, ev.Type, ev.Err, want)
	}
}

// quiet checks that ch has delivered nothing so far.
func quiet(t *testing.T, what string, ch <-chan store.Event) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Errorf("%s: unexpected event %+v", what, ev)
	default:
	}
}

// calls makes every call of the contract on path p and returns the errors.
func calls(ctx context.Context, st store.Store, p string) map[string]error {
	errs := map[string]error{}
	_, errs["Create"] = st.Create(ctx, p, nil, store.Persistent)
	_, errs["Get"] = st.Get(ctx, p)
	_, errs["Set"] = st.Set(ctx, p, nil, store.AnyVersion)
	_, errs["Children"] = st.Children(ctx, p)
	_, _, ch, err := st.ExistsW(ctx, p)
	errs["ExistsW"] = err
	if err == nil || ch != nil {
		errs["ExistsW"] = fmt.Errorf("ExistsW returned channel %v with error %v", ch, err)
	}
	errs["Delete"] = st.Delete(ctx, p)
	_, kch, err := st.ChildrenW(ctx, p)
	errs["ChildrenW"] = err
	if err == nil || kch != nil {
		errs["ChildrenW"] = fmt.Errorf("ChildrenW returned channel %v with error %v", kch, err)
	}
	if cl, ok := st.(store.CreateLister); ok {
		_, _, errs["CreateAndList"] = cl.CreateAndList(ctx, p, nil, store.Persistent)
	}
	return errs
}

func (s *suite) invalidPath(t *testing.T) {
	st := s.open(t)
	bad := []string{"", "a", "a/b", "//", "/a/", "/a//b", "/a/./b", "/a/..", "/.", "/a\x00b", "/a\nb", "/a\x7fb", "/a\u0085b"}
	for _, p := range bad {
		// A cancelled ctx shows that the path is checked before any I/O.
		for call, err := range calls(cancelled(), st, p) {
			wantErr(t, fmt.Sprintf("%s(%q)", call, p), err, store.ErrInvalidPath)
		}
	}
	ctx := ctxFor(t)
	_, err := st.Create(ctx, "/", nil, store.Persistent)
	wantErr(t, `Create("/")`, err, store.ErrInvalidPath)
	wantErr(t, `Delete("/")`, st.Delete(ctx, "/"), store.ErrInvalidPath)
	for _, v := range []int64{store.AnyVersion, 0} {
		_, err := st.Set(ctx, "/", nil, v)
		wantErr(t, fmt.Sprintf(`Set("/", version %d)`, v), err, store.ErrInvalidPath)
	}
}

func (s *suite) invalidArgument(t *testing.T) {
	st := s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	_, err := st.Create(ctx, dir+"/x", nil, store.Mode(4))
	wantErr(t, "Create(mode 4)", err, store.ErrInvalidArgument)
	req(t).node(st.Create(ctx, dir+"/x", nil, store.Persistent))
	_, err = st.Set(ctx, dir+"/x", nil, -2)
	wantErr(t, "Set(version -2)", err, store.ErrInvalidArgument)
}

func (s *suite) createGet(t *testing.T) {
	st := s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	data := []byte("hello")
	n := req(t).node(st.Create(ctx, dir+"/a", data, store.Persistent))
	data[0] = 'J' // the store must have copied it
	if n.Path != dir+"/a" || n.Name() != "a" {
		t.Errorf("Create path = %q (name %q); want %q", n.Path, n.Name(), dir+"/a")
	}
	got := req(t).node(st.Get(ctx, dir+"/a"))
	if string(got.Data) != "hello" || got.Version != 0 || got.Owner != 0 || got.Path != dir+"/a" {
		t.Errorf("Get = %+v; want data hello, version 0, owner 0", got)
	}
	// Created is optional, but a store that sets it sets the creation
	// time: on the server's clock, so only roughly now.
	if c := got.Created; !c.IsZero() && (time.Since(c) > time.Minute || time.Until(c) > time.Minute) {
		t.Errorf("Get(%q).Created = %v; want about %v or the zero Time", got.Path, c, time.Now())
	}
	_, err := st.Create(ctx, dir+"/a", nil, store.Persistent)
	wantErr(t, "Create(existing)", err, store.ErrNodeExists)
	_, err = st.Create(ctx, dir+"/a", nil, store.Ephemeral)
	wantErr(t, "Create(existing, ephemeral)", err, store.ErrNodeExists)
	_, err = st.Get(ctx, dir+"/missing")
	wantErr(t, "Get(missing)", err, store.ErrNoNode)
	_, err = st.Children(ctx, dir+"/missing")
	wantErr(t, "Children(missing)", err, store.ErrNoNode)
	empty := req(t).node(st.Create(ctx, dir+"/empty", nil, store.Persistent))
	if got := req(t).node(st.Get(ctx, empty.Path)); len(got.Data) != 0 {
		t.Errorf("Get(empty).Data = %q; want empty", got.Data)
	}
}

func (s *suite) parents(t *testing.T) {
	st := s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	req(t).node(st.Create(ctx, dir+"/a/b/c", []byte("c"), store.Ephemeral))
	for _, p := range []string{dir, dir + "/a", dir + "/a/b"} {
		n := req(t).node(st.Get(ctx, p))
		if len(n.Data) != 0 || n.Owner != 0 {
			t.Errorf("Get(%q) = %+v; want a persistent node without data", p, n)
		}
	}
	kids := req(t).kids(st.Children(ctx, dir+"/a"))
	if len(kids) != 1 || kids[0].Name != "b" {
		t.Errorf("Children(%q) = %v; want [b]", dir+"/a", kids)
	}
	wantErr(t, "Delete(parent)", st.Delete(ctx, dir+"/a/b"), store.ErrNotEmpty)
	req(t).ok(st.Delete(ctx, dir+"/a/b/c"))
	s.gone(ctx, t, st, dir+"/a/b", dir+"/a", dir)
}

func (s *suite) root(t *testing.T) {
	st := s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	req(t).node(st.Get(ctx, "/"))
	req(t).node(st.Create(ctx, dir, nil, store.Persistent))
	found := false
	for _, c := range req(t).kids(st.Children(ctx, "/")) {
		found = found || c.Name == "storetest"
	}
	if !found {
		t.Errorf(`Children("/") lacks "storetest"`)
	}
}

func (s *suite) ephemeralParent(t *testing.T) {
	st := s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	req(t).node(st.Create(ctx, dir+"/e", nil, store.Ephemeral))
	_, err := st.Create(ctx, dir+"/e/child", nil, store.Persistent)
	wantErr(t, "Create(child of ephemeral)", err, store.ErrEphemeralParent)
	_, err = st.Create(ctx, dir+"/e/child-", nil, store.EphemeralSequential)
	wantErr(t, "Create(sequential child of ephemeral)", err, store.ErrEphemeralParent)
	// Below a missing parent too, and the parent is not made.
	_, err = st.Create(ctx, dir+"/e/d/child-", nil, store.EphemeralSequential)
	wantErr(t, "Create(grandchild of ephemeral)", err, store.ErrEphemeralParent)
	_, err = st.Get(ctx, dir+"/e/d")
	wantErr(t, "Get(parent below ephemeral)", err, store.ErrNoNode)
}

func (s *suite) setVersion(t *testing.T) {
	st := s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	p := dir + "/v"
	req(t).node(st.Create(ctx, p, []byte("0"), store.Persistent))
	n := req(t).node(st.Set(ctx, p, []byte("1"), 0))
	if n.Version != 1 || string(n.Data) != "1" {
		t.Errorf("Set(version 0) = %+v; want version 1, data 1", n)
	}
	_, err := st.Set(ctx, p, []byte("x"), 0)
	wantErr(t, "Set(stale version)", err, store.ErrBadVersion)
	n = req(t).node(st.Set(ctx, p, []byte("2"), store.AnyVersion))
	if n.Version != 2 {
		t.Errorf("Set(AnyVersion).Version = %d; want 2", n.Version)
	}
	if got := req(t).node(st.Get(ctx, p)); string(got.Data) != "2" || got.Version != 2 {
		t.Errorf("Get after Set = %+v; want data 2, version 2", got)
	}
	_, err = st.Set(ctx, dir+"/missing", nil, store.AnyVersion)
	wantErr(t, "Set(missing)", err, store.ErrNoNode)
}

func (s *suite) delete(t *testing.T) {
	st := s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	wantErr(t, "Delete(missing)", st.Delete(ctx, dir+"/missing"), store.ErrNoNode)
	req(t).node(st.Create(ctx, dir+"/d/kid", nil, store.Persistent))
	wantErr(t, "Delete(non-empty)", st.Delete(ctx, dir+"/d"), store.ErrNotEmpty)
	req(t).ok(st.Delete(ctx, dir+"/d/kid"))
	_, err := st.Get(ctx, dir+"/d/kid")
	wantErr(t, "Get(deleted)", err, store.ErrNoNode)
	wantErr(t, "Delete(deleted)", st.Delete(ctx, dir+"/d/kid"), store.ErrNoNode)
}

func (s *suite) tooLarge(t *testing.T) {
	st := s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	big := bytes.Repeat([]byte("x"), store.MaxDataSize+1)
	_, err := st.Create(ctx, dir+"/big", big, store.Persistent)
	wantErr(t, "Create(MaxDataSize+1)", err, store.ErrTooLarge)
	if _, err := st.Get(ctx, dir+"/big"); !errors.Is(err, store.ErrNoNode) {
		t.Errorf("Get after a rejected create = %v; want ErrNoNode", err)
	}
	n := req(t).node(st.Create(ctx, dir+"/max", big[:store.MaxDataSize], store.Persistent))
	_, err = st.Set(ctx, n.Path, big, store.AnyVersion)
	wantErr(t, "Set(MaxDataSize+1)", err, store.ErrTooLarge)
	if got := req(t).node(st.Get(ctx, n.Path)); len(got.Data) != store.MaxDataSize {
		t.Errorf("Get(max).Data has %d bytes; want %d", len(got.Data), store.MaxDataSize)
	}

	// The largest create there is: the longest, deepest path (every
	// parent missing) and the most data, for every mode.
	depth := store.MaxPathDepth - strings.Count(dir, "/")
	seg := strings.Repeat("s", (store.MaxPathSize-len(dir)-20)/depth-1)
	deep := dir + strings.Repeat("/"+seg, depth-1)
	for i, mode := range []store.Mode{store.Persistent, store.Ephemeral, store.EphemeralSequential} {
		p := deep + fmt.Sprintf("/%d", i)
		if err := store.ValidatePath(p); err != nil {
			t.Fatalf("the test's deepest path is not valid: %v", err)
		}
		got := req(t).node(st.Create(ctx, p, big[:store.MaxDataSize], mode))
		if len(got.Path) > store.MaxPathSize+20 {
			t.Errorf("Create(%d bytes deep) made %d bytes of path", len(p), len(got.Path))
		}
	}
	tooDeep := dir + strings.Repeat("/d", store.MaxPathDepth)
	_, err = st.Create(ctx, tooDeep, nil, store.Persistent)
	wantErr(t, "Create(deeper than MaxPathDepth)", err, store.ErrInvalidPath)
	_, err = st.Create(ctx, "/"+strings.Repeat("l", store.MaxPathSize), nil, store.Persistent)
	wantErr(t, "Create(longer than MaxPathSize)", err, store.ErrInvalidPath)
}

func (s *suite) sequential(t *testing.T) {
	st := s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	var made []store.Node
	for i, mode := range []store.Mode{store.Sequential, store.EphemeralSequential, store.Sequential, store.EphemeralSequential} {
		n := req(t).node(st.Create(ctx, dir+"/q/item-", []byte{byte(i)}, mode))
		if !strings.Contains(n.Name(), "item-") || n.Name() == "item-" || store.Parent(n.Path) != dir+"/q" {
			t.Errorf("Create(sequential) path = %q; want %s/q/...item-<suffix>", n.Path, dir)
		}
		if got := req(t).node(st.Get(ctx, n.Path)); got.Seq != n.Seq || got.Data[0] != byte(i) {
			t.Errorf("Get(%q) = %+v; want Seq %d as returned by Create", n.Path, got, n.Seq)
		}
		if len(made) > 0 && n.Seq <= made[len(made)-1].Seq {
			t.Errorf("Seq %d after %d; want strictly increasing", n.Seq, made[len(made)-1].Seq)
		}
		made = append(made, n)
	}
	kids := req(t).kids(st.Children(ctx, dir+"/q"))
	if len(kids) != len(made) {
		t.Fatalf("Children = %v; want %d nodes", kids, len(made))
	}
	for i, k := range kids {
		if k.Name != made[i].Name() || k.Seq != made[i].Seq {
			t.Errorf("Children[%d] = %+v; want %s (Seq %d)", i, k, made[i].Name(), made[i].Seq)
		}
	}
	// A deleted node's Seq is not handed out again.
	req(t).ok(st.Delete(ctx, made[3].Path))
	if n := req(t).node(st.Create(ctx, dir+"/q/item-", nil, store.Sequential)); n.Seq <= made[3].Seq {
		t.Errorf("Seq after delete = %d; want > %d", n.Seq, made[3].Seq)
	}
}

func (s *suite) concurrentSequential(t *testing.T) {
	const sessions, each = 6, 15
	ctx, dir := ctxFor(t), ns(t)
	var wg gosync.WaitGroup
	got := make([][]store.Node, sessions)
	errs := make(chan error, sessions)
	for i := range sessions {
		st := s.open(t)
		wg.Go(func() {
			for range each {
				n, err := st.Create(ctx, dir+"/seq/n-", nil, store.EphemeralSequential)
				if err != nil {
					errs <- err
					return
				}
				got[i] = append(got[i], n)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seqs, names := map[int64]bool{}, map[string]bool{}
	for i, nodes := range got {
		for j, n := range nodes {
			if j > 0 && n.Seq <= nodes[j-1].Seq {
				t.Errorf("session %d: Seq %d after %d; want increasing", i, n.Seq, nodes[j-1].Seq)
			}
			if seqs[n.Seq] || names[n.Name()] {
				t.Errorf("duplicate Seq %d or name %q", n.Seq, n.Name())
			}
			seqs[n.Seq], names[n.Name()] = true, true
		}
	}
	reader := s.open(t)
	kids := req(t).kids(reader.Children(ctx, dir+"/seq"))
	if len(kids) != sessions*each {
		t.Fatalf("Children has %d nodes; want %d", len(kids), sessions*each)
	}
	for i, k := range kids {
		if !seqs[k.Seq] || !names[k.Name] {
			t.Errorf("Children[%d] = %+v: not a created node", i, k)
		}
		if i > 0 && k.Seq <= kids[i-1].Seq {
			t.Errorf("Children not sorted by Seq: %d after %d", k.Seq, kids[i-1].Seq)
		}
	}
}

func (s *suite) owner(t *testing.T) {
	a, b := s.open(t), s.open(t)
	if a.SessionID() == b.SessionID() || a.SessionID() == 0 {
		t.Errorf("SessionIDs %d and %d; want distinct and non-zero", a.SessionID(), b.SessionID())
	}
	ctx, dir := ctxFor(t), ns(t)
	e := req(t).node(a.Create(ctx, dir+"/e", nil, store.Ephemeral))
	es := req(t).node(a.Create(ctx, dir+"/es-", nil, store.EphemeralSequential))
	p := req(t).node(a.Create(ctx, dir+"/p", nil, store.Persistent))
	for _, n := range []store.Node{e, es} {
		if got := req(t).node(b.Get(ctx, n.Path)); got.Owner != a.SessionID() {
			t.Errorf("Get(%q).Owner = %d; want %d", n.Path, got.Owner, a.SessionID())
		}
	}
	if got := req(t).node(b.Get(ctx, p.Path)); got.Owner != 0 {
		t.Errorf("Get(persistent).Owner = %d; want 0", got.Owner)
	}
	// Another session may delete an ephemeral node.
	req(t).ok(b.Delete(ctx, e.Path))
}

// ephemeralGone checks that a's ephemeral nodes vanish for b when end ends
// a's session, and that its persistent nodes stay.
func (s *suite) ephemeralGone(t *testing.T, end func(store.Store)) {
	a, b := s.open(t), s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	e := req(t).node(a.Create(ctx, dir+"/e", nil, store.Ephemeral))
	es := req(t).node(a.Create(ctx, dir+"/es-", nil, store.EphemeralSequential))
	p := req(t).node(a.Create(ctx, dir+"/p", nil, store.Persistent))
	var watches []<-chan store.Event
	for _, n := range []store.Node{e, es} {
		ok, ch := req(t).watch(b.ExistsW(ctx, n.Path))
		if !ok {
			t.Fatalf("ExistsW(%q) = false; want true", n.Path)
		}
		watches = append(watches, ch)
	}
	end(a)
	for i, ch := range watches {
		wantEvent(t, fmt.Sprintf("watch %d on ephemeral", i), ch, store.EventDeleted)
	}
	for _, n := range []store.Node{e, es} {
		_, err := b.Get(ctx, n.Path)
		wantErr(t, fmt.Sprintf("Get(%q)", n.Path), err, store.ErrNoNode)
	}
	req(t).node(b.Get(ctx, p.Path))
	kids := req(t).kids(b.Children(ctx, dir))
	if len(kids) != 1 || kids[0].Name != "p" {
		t.Errorf("Children = %v; want only the persistent node", kids)
	}
}

func (s *suite) ephemeralGoneOnClose(t *testing.T) {
	s.ephemeralGone(t, func(a store.Store) {
		if err := a.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
}

func (s *suite) ephemeralGoneOnExpire(t *testing.T) {
	s.ephemeralGone(t, func(a store.Store) { s.b.Expire(t, a) })
}

func (s *suite) existsWatch(t *testing.T) {
	a, b := s.open(t), s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	p := dir + "/w"
	ok, ch := req(t).watch(a.ExistsW(ctx, p))
	if ok {
		t.Fatalf("ExistsW(missing) = true")
	}
	req(t).node(b.Create(ctx, p, nil, store.Persistent))
	wantEvent(t, "create", ch, store.EventCreated)

	ok, ch = req(t).watch(a.ExistsW(ctx, p))
	if !ok {
		t.Fatalf("ExistsW(existing) = false")
	}
	req(t).node(b.Set(ctx, p, []byte("x"), store.AnyVersion))
	wantEvent(t, "set", ch, store.EventDataChanged)

	_, ch = req(t).watch(a.ExistsW(ctx, p))
	req(t).node(b.Create(ctx, p+"/kid", nil, store.Persistent))
	quiet(t, "exists watch after a child was created", ch)
	req(t).ok(b.Delete(ctx, p+"/kid"))
	req(t).ok(b.Delete(ctx, p))
	wantEvent(t, "delete", ch, store.EventDeleted)
}

// existsWatchStat checks that ExistsW reports the Stat of the node it found,
// which tells a sequential node from one made later under the same name.
func (s *suite) existsWatchStat(t *testing.T) {
	a, b := s.open(t), s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	n := req(t).node(a.Create(ctx, dir+"/c-", nil, store.EphemeralSequential))
	ok, stat, _, err := b.ExistsW(ctx, n.Path)
	req(t).ok(err)
	if want := (store.Stat{Seq: n.Seq, Owner: a.SessionID()}); !ok || stat != want {
		t.Fatalf("ExistsW(%q) = %v, %+v; want true, %+v", n.Path, ok, stat, want)
	}
	req(t).node(a.Set(ctx, n.Path, []byte("x"), store.AnyVersion))
	ok, stat, _, err = b.ExistsW(ctx, n.Path)
	req(t).ok(err)
	if want := (store.Stat{Seq: n.Seq, Version: 1, Owner: a.SessionID()}); !ok || stat != want {
		t.Fatalf("ExistsW(%q) after Set = %v, %+v; want true, %+v", n.Path, ok, stat, want)
	}
	req(t).ok(a.Delete(ctx, n.Path))
	ok, stat, _, err = b.ExistsW(ctx, n.Path)
	req(t).ok(err)
	if ok || stat != (store.Stat{}) {
		t.Fatalf("ExistsW(deleted) = %v, %+v; want false and a zero Stat", ok, stat)
	}
}

func (s *suite) existsWatchOnce(t *testing.T) {
	a, b := s.open(t), s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	p := dir + "/w"
	_, ch := req(t).watch(a.ExistsW(ctx, p))
	req(t).node(b.Create(ctx, p, nil, store.Persistent))
	req(t).node(b.Set(ctx, p, nil, store.AnyVersion))
	req(t).ok(b.Delete(ctx, p))
	// event checks that exactly one event arrives and the channel closes.
	wantEvent(t, "three changes", ch, store.EventCreated)
}

// existsWatchNoGap races a create against ExistsW many times: whenever the
// check saw no node, the create came after it and must be reported.
func (s *suite) existsWatchNoGap(t *testing.T) {
	a, b := s.open(t), s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	req(t).node(a.Create(ctx, dir, nil, store.Persistent))
	missed := 0
	for i := range 40 {
		p := fmt.Sprintf("%s/n%d", dir, i)
		created := make(chan error, 1)
		go func() {
			_, err := b.Create(ctx, p, nil, store.Persistent)
			created <- err
		}()
		ok, _, ch, err := a.ExistsW(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if err := <-created; err != nil {
			t.Fatal(err)
		}
		if ok {
			continue // the create came first; nothing to report
		}
		select {
		case ev := <-ch:
			if ev.Type != store.EventCreated {
				t.Errorf("round %d: event %+v; want created", i, ev)
			}
		case <-time.After(Timeout):
			missed++
		}
	}
	if missed > 0 {
		t.Errorf("%d creates after an ExistsW that saw no node were never reported", missed)
	}
}

func (s *suite) watchCancelled(t *testing.T) {
	st := s.open(t)
	dir := ns(t)
	wctx, cancel := context.WithCancel(ctxFor(t))
	_, ch := req(t).watch(st.ExistsW(wctx, dir+"/w"))
	cancel()
	wantErrEvent(t, "ExistsW after cancel", ch, context.Canceled)
	req(t).node(st.Create(ctxFor(t), dir, nil, store.Persistent))
	wctx, cancel = context.WithCancel(ctxFor(t))
	_, ch = req(t).kidsW(st.ChildrenW(wctx, dir))
	cancel()
	wantErrEvent(t, "ChildrenW after cancel", ch, context.Canceled)
	// The session is unaffected.
	req(t).node(st.Get(ctxFor(t), "/"))
}

// watchEnded checks that pending watches report err when end ends st.
func (s *suite) watchEnded(t *testing.T, end func(store.Store), want error) {
	st := s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	req(t).node(st.Create(ctx, dir+"/p", nil, store.Persistent))
	_, missing := req(t).watch(st.ExistsW(ctx, dir+"/missing"))
	_, present := req(t).watch(st.ExistsW(ctx, dir+"/p"))
	chans := []<-chan store.Event{missing, present}
	_, kids := req(t).kidsW(st.ChildrenW(ctx, dir))
	chans = append(chans, kids)
	end(st)
	for i, ch := range chans {
		wantErrEvent(t, fmt.Sprintf("watch %d", i), ch, want)
	}
}

func (s *suite) watchClosed(t *testing.T) {
	s.watchEnded(t, func(st store.Store) { _ = st.Close() }, store.ErrClosed)
}

func (s *suite) watchExpired(t *testing.T) {
	s.watchEnded(t, func(st store.Store) { s.b.Expire(t, st) }, store.ErrSessionExpired)
}

func (s *suite) childrenWatch(t *testing.T) {
	a, b := s.open(t), s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	p := dir + "/q"
	_, _, err := a.ChildrenW(ctx, p)
	wantErr(t, "ChildrenW(missing)", err, store.ErrNoNode)
	req(t).node(b.Create(ctx, p, nil, store.Persistent))

	kids, ch := req(t).kidsW(a.ChildrenW(ctx, p))
	if len(kids) != 0 {
		t.Errorf("ChildrenW = %v; want none", kids)
	}
	req(t).node(b.Set(ctx, p, []byte("x"), store.AnyVersion))
	quiet(t, "children watch after a data change", ch)
	req(t).node(b.Create(ctx, p+"/1", nil, store.Persistent))
	req(t).node(b.Create(ctx, p+"/2", nil, store.Persistent))
	wantEvent(t, "child created", ch, store.EventChildrenChanged)

	kids, ch = req(t).kidsW(a.ChildrenW(ctx, p))
	if len(kids) != 2 {
		t.Errorf("ChildrenW = %v; want 2 children", kids)
	}
	req(t).ok(b.Delete(ctx, p+"/1"))
	wantEvent(t, "child deleted", ch, store.EventChildrenChanged)

	_, ch = req(t).kidsW(a.ChildrenW(ctx, p))
	req(t).ok(b.Delete(ctx, p+"/2"))
	wantEvent(t, "last child deleted", ch, store.EventChildrenChanged)
	_, ch = req(t).kidsW(a.ChildrenW(ctx, p))
	req(t).ok(b.Delete(ctx, p))
	wantEvent(t, "parent deleted", ch, store.EventDeleted)
}

func (s *suite) cancelledContext(t *testing.T) {
	st := s.open(t)
	for call, err := range calls(cancelled(), st, ns(t)+"/x") {
		wantErr(t, call+"(cancelled ctx)", err, context.Canceled)
	}
}

// afterEnd checks the state of a session that end has ended.
func (s *suite) afterEnd(t *testing.T, end func(store.Store), want error) {
	st := s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	req(t).node(st.Create(ctx, dir+"/p", nil, store.Persistent))
	disc := st.Disconnected()
	end(st)
	select {
	case <-st.Context().Done():
	case <-time.After(Timeout):
		t.Fatalf("Context not done after the session ended")
	}
	if cause := context.Cause(st.Context()); !errors.Is(cause, want) {
		t.Errorf("context.Cause(Context()) = %v; want %v", cause, want)
	}
	for _, ch := range []<-chan struct{}{disc, st.Disconnected()} {
		select {
		case <-ch:
		case <-time.After(Timeout):
			t.Errorf("Disconnected() not closed after the session ended")
		}
	}
	for call, err := range calls(ctx, st, dir+"/p") {
		wantErr(t, call+" after the end", err, want)
	}
	// The session's end wins over a ctx that is done too: it is for good.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	for call, err := range calls(cctx, st, dir+"/p") {
		wantErr(t, call+" after the end, ctx cancelled", err, want)
	}
	if err := st.Close(); err != nil {
		t.Errorf("Close after the end = %v; want nil", err)
	}
}

func (s *suite) afterClose(t *testing.T) {
	s.afterEnd(t, func(st store.Store) {
		if err := st.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	}, store.ErrClosed)
}

func (s *suite) afterExpire(t *testing.T) {
	s.afterEnd(t, func(st store.Store) { s.b.Expire(t, st) }, store.ErrSessionExpired)
}

func (s *suite) lostCreateReply(t *testing.T) {
	rl, ok := s.b.(ReplyLoser)
	if !ok {
		t.Skip("backend cannot lose replies")
	}
	st, other := s.open(t), s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	req(t).node(st.Create(ctx, dir, nil, store.Persistent))
	for i := range 3 {
		rl.LoseNextCreateReply(t, st)
		n, err := st.Create(ctx, dir+"/lock-", nil, store.EphemeralSequential)
		if err != nil {
			t.Fatalf("Create after a lost reply = %v; want the one node", err)
		}
		kids := req(t).kids(other.Children(ctx, dir))
		if len(kids) != i+1 || kids[i].Name != n.Name() {
			t.Fatalf("Children after lost reply %d = %v; want %d nodes, the last %q", i, kids, i+1, n.Name())
		}
		if got := req(t).node(other.Get(ctx, n.Path)); got.Owner != st.SessionID() {
			t.Errorf("lost-reply node Owner = %d; want %d", got.Owner, st.SessionID())
		}
	}
}

func (s *suite) disconnect(t *testing.T) {
	d, ok := s.b.(Disconnector)
	if !ok {
		t.Skip("backend cannot disconnect a session")
	}
	st := s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	e := req(t).node(st.Create(ctx, dir+"/e", nil, store.Ephemeral))
	id, disc := st.SessionID(), st.Disconnected()
	select {
	case <-disc:
		t.Fatalf("Disconnected() closed on a connected session")
	default:
	}
	d.Disconnect(t, st)
	select {
	case <-disc:
	case <-time.After(Timeout):
		t.Fatalf("Disconnected() not closed after Disconnect")
	}
	d.Reconnect(t, st)
	// Calls work again once the client is back, with the same session.
	deadline := time.Now().Add(Timeout)
	for {
		n, err := st.Get(ctx, e.Path)
		if err == nil {
			if n.Owner != id {
				t.Errorf("ephemeral Owner after reconnect = %d; want %d", n.Owner, id)
			}
			break
		}
		if !errors.Is(err, store.ErrDisconnected) || time.Now().After(deadline) {
			t.Fatalf("Get after Reconnect = %v", err)
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	if st.SessionID() != id || st.Context().Err() != nil {
		t.Errorf("session changed or ended across a disconnection")
	}
	select {
	case <-st.Disconnected():
		t.Errorf("Disconnected() closed after reconnecting")
	default:
	}
}

func (s *suite) createAndList(t *testing.T) {
	st := s.open(t)
	cl, ok := st.(store.CreateLister)
	if !ok {
		t.Skip("no store.CreateLister")
	}
	ctx, dir := ctxFor(t), ns(t)
	first := req(t).node(st.Create(ctx, dir+"/l/x-", nil, store.EphemeralSequential))
	n, kids, err := cl.CreateAndList(ctx, dir+"/l/x-", []byte("d"), store.EphemeralSequential)
	if err != nil {
		t.Fatal(err)
	}
	want := req(t).kids(st.Children(ctx, dir+"/l"))
	if fmt.Sprint(kids) != fmt.Sprint(want) || len(kids) != 2 || kids[0].Name != first.Name() || kids[1].Name != n.Name() || kids[1].Seq != n.Seq {
		t.Errorf("CreateAndList = %+v, %v; want the node last in %v", n, kids, want)
	}
	_, _, err = cl.CreateAndList(ctx, first.Path, nil, store.Persistent)
	wantErr(t, "CreateAndList(existing)", err, store.ErrNodeExists)
}

// window: ChildrenUpTo and CreateAndWindow return the last children up to
// a Seq, as Children would, and say whether they reach the first child; a
// grandchild in between (etcd reads a prefix) never passes for the end.
func (s *suite) window(t *testing.T) {
	st := s.open(t)
	wl, ok := st.(store.WindowLister)
	if !ok {
		t.Skip("no store.WindowLister")
	}
	ctx, dir := ctxFor(t), ns(t)
	d := dir + "/w"
	var made []store.Node
	for i := range 3 {
		made = append(made, req(t).node(st.Create(ctx, d+"/c-", []byte{byte(i)}, store.EphemeralSequential)))
	}
	// A grandchild and a child made after the third node.
	req(t).node(st.Create(ctx, d+"/sub/deep", nil, store.Persistent))
	all := req(t).kids(st.Children(ctx, d))
	for _, tt := range []struct {
		seq          int64
		n            int
		wantFrom     int // index in all of the window's first child
		wantTo       int // index in all after the window's last child
		wantComplete bool
	}{
		{made[2].Seq, 1, 2, 3, false},
		{made[2].Seq, 3, 0, 3, true},
		{made[2].Seq, 10, 0, 3, true},
		{made[1].Seq, 1, 1, 2, false},
		{made[0].Seq, 1, 0, 1, true},
		{made[0].Seq - 1, 2, 0, 0, true},
	} {
		kids, complete, err := wl.ChildrenUpTo(ctx, d, tt.seq, tt.n)
		if err != nil {
			t.Fatalf("ChildrenUpTo(%d, %d) = %v", tt.seq, tt.n, err)
		}
		want := all[tt.wantFrom:tt.wantTo]
		if fmt.Sprint(kids) != fmt.Sprint(want) || complete != tt.wantComplete {
			t.Errorf("ChildrenUpTo(%d, %d) = %v, %v; want %v, %v", tt.seq, tt.n, kids, complete, want, tt.wantComplete)
		}
	}
	// "sub" and its child come before the new node: a window of 2 ends
	// with it and "sub" (or, on a store that reads a prefix, with the
	// grandchild in its place), and is not complete.
	n, kids, complete, err := wl.CreateAndWindow(ctx, d+"/c-", []byte("x"), store.EphemeralSequential, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(kids) == 0 || kids[len(kids)-1].Name != n.Name() || kids[len(kids)-1].Seq != n.Seq || complete {
		t.Errorf("CreateAndWindow(2) = %+v, %v, %v; want a window that ends with the node and is not complete", n, kids, complete)
	}
	if len(kids) == 2 && kids[0].Name != "sub" {
		t.Errorf("CreateAndWindow(2) = %v; want sub before the node", kids)
	}
	n2, kids, complete, err := wl.CreateAndWindow(ctx, d+"/c-", nil, store.EphemeralSequential, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := req(t).kids(st.Children(ctx, d))
	if fmt.Sprint(kids) != fmt.Sprint(want) || !complete || kids[len(kids)-1].Seq != n2.Seq {
		t.Errorf("CreateAndWindow(100) = %v, %v; want %v, true", kids, complete, want)
	}
	if kids, complete, err := wl.ChildrenUpTo(ctx, dir+"/missing", 1<<40, 2); err != nil || len(kids) != 0 || !complete {
		t.Errorf("ChildrenUpTo(missing) = %v, %v, %v; want none, complete", kids, complete, err)
	}
	_, _, _, err = wl.CreateAndWindow(ctx, made[0].Path, nil, store.Persistent, 2)
	wantErr(t, "CreateAndWindow(existing)", err, store.ErrNodeExists)
}

// deleteSeq: DeleteSeq deletes the node with the Seq it names, and no
// other node at its path.
func (s *suite) deleteSeq(t *testing.T) {
	st := s.open(t)
	sd, ok := st.(store.SeqDeleter)
	if !ok {
		t.Skip("no store.SeqDeleter")
	}
	ctx, dir := ctxFor(t), ns(t)
	p := dir + "/n"
	old := req(t).node(st.Create(ctx, p, nil, store.Persistent))
	req(t).ok(st.Delete(ctx, p))
	cur := req(t).node(st.Create(ctx, p, nil, store.Persistent))
	wantErr(t, "DeleteSeq(old Seq)", sd.DeleteSeq(ctx, p, old.Seq), store.ErrNoNode)
	if _, err := st.Get(ctx, p); err != nil {
		t.Fatalf("Get after DeleteSeq(old Seq) = %v; want the new node still there", err)
	}
	req(t).node(st.Create(ctx, p+"/kid", nil, store.Persistent))
	wantErr(t, "DeleteSeq(parent)", sd.DeleteSeq(ctx, p, cur.Seq), store.ErrNotEmpty)
	req(t).ok(st.Delete(ctx, p+"/kid"))
	if err := sd.DeleteSeq(ctx, p, cur.Seq); err != nil {
		t.Fatalf("DeleteSeq(current Seq) = %v", err)
	}
	wantErr(t, "DeleteSeq(deleted)", sd.DeleteSeq(ctx, p, cur.Seq), store.ErrNoNode)
	// No node has Seq 0: not even a missing one matches it.
	wantErr(t, "DeleteSeq(missing, Seq 0)", sd.DeleteSeq(ctx, p, 0), store.ErrNoNode)
}

// deleteFront: DeleteFront deletes as DeleteSeq does and records the
// node's Seq in its parent, where every session's FollowsFront finds it,
// together with the asking node; no listing shows the record.
func (s *suite) deleteFront(t *testing.T) {
	st, other := s.open(t), s.open(t)
	fd, ok := st.(store.FrontDeleter)
	if !ok {
		t.Skip("no store.FrontDeleter")
	}
	ofd := other.(store.FrontDeleter)
	ctx, dir := ctxFor(t), ns(t)
	a := req(t).node(st.Create(ctx, dir+"/l/c-", nil, store.EphemeralSequential))
	b := req(t).node(other.Create(ctx, dir+"/l/c-", nil, store.EphemeralSequential))
	follows := func(what string, fd store.FrontDeleter, n store.Node, seq, prev int64, want bool) {
		t.Helper()
		if got, err := fd.FollowsFront(ctx, n.Path, seq, prev); err != nil || got != want {
			t.Errorf("FollowsFront(%s) = %v, %v; want %v", what, got, err, want)
		}
	}
	follows("no record yet", ofd, b, b.Seq, a.Seq, false)
	wantErr(t, "DeleteFront(other Seq)", fd.DeleteFront(ctx, a.Path, a.Seq+1000), store.ErrNoNode)
	follows("after a refused DeleteFront", ofd, b, b.Seq, a.Seq, false)
	req(t).ok(fd.DeleteFront(ctx, a.Path, a.Seq))
	if _, err := st.Get(ctx, a.Path); !errors.Is(err, store.ErrNoNode) {
		t.Errorf("Get after DeleteFront = %v; want ErrNoNode", err)
	}
	follows("the node before it left", ofd, b, b.Seq, a.Seq, true)
	follows("the same, asked by the recorder's session", fd, b, b.Seq, a.Seq, true)
	follows("another Seq left", ofd, b, b.Seq, a.Seq+1000, false)
	follows("asked for another node at its path", ofd, b, b.Seq+1000, a.Seq, false)
	kids := req(t).kids(other.Children(ctx, dir+"/l"))
	if len(kids) != 1 || kids[0].Seq != b.Seq {
		t.Errorf("Children after DeleteFront = %v; want only %q", kids, b.Path)
	}
	if kids := req(t).kids(other.Children(ctx, dir)); len(kids) != 1 || kids[0].Name != "l" {
		t.Errorf("Children(%q) = %v; want only l: the record is no node", dir, kids)
	}
	req(t).ok(ofd.DeleteFront(ctx, b.Path, b.Seq))
	follows("own node gone", ofd, b, b.Seq, a.Seq, false)
	wantErr(t, "DeleteFront(deleted)", ofd.DeleteFront(ctx, b.Path, b.Seq), store.ErrNoNode)
	p := req(t).node(st.Create(ctx, dir+"/p", nil, store.Persistent))
	req(t).node(st.Create(ctx, dir+"/p/kid", nil, store.Persistent))
	wantErr(t, "DeleteFront(parent)", fd.DeleteFront(ctx, p.Path, p.Seq), store.ErrNotEmpty)
}

// nameReuse: whether or not a store uses the names of deleted sequential
// nodes again, every sequential node gets a Seq above those before it, and
// a node alive under a name is never handed out twice.
func (s *suite) nameReuse(t *testing.T) {
	st := s.open(t)
	ctx, dir := ctxFor(t), ns(t)
	del := func(n store.Node) error { return st.Delete(ctx, n.Path) }
	if sd, ok := st.(store.SeqDeleter); ok {
		del = func(n store.Node) error { return sd.DeleteSeq(ctx, n.Path, n.Seq) }
	}
	last := int64(-1)
	live := map[string]bool{}
	var held []store.Node
	for i := range 20 {
		n := req(t).node(st.Create(ctx, dir+"/r/c-", nil, store.EphemeralSequential))
		if n.Seq <= last {
			t.Fatalf("Create #%d: Seq %d after %d; want it to grow", i, n.Seq, last)
		}
		if live[n.Path] {
			t.Fatalf("Create #%d: %q handed out while its node lives", i, n.Path)
		}
		last, live[n.Path] = n.Seq, true
		held = append(held, n)
		if i%3 != 2 {
			continue
		}
		// Delete all but the newest.
		for _, h := range held[:len(held)-1] {
			req(t).ok(del(h))
			delete(live, h.Path)
		}
		held = held[len(held)-1:]
	}
}
