// Package inspect reads, and never changes, what corral's recipes keep in a
// store: who holds a lock and who waits for it, in order, with the identity
// of each and how long it has held or waited; the readers and writers of an
// RWMutex; the leases of a semaphore; the leader of an election and its
// candidates; the members of a double barrier; the depth of a queue by
// priority and its claimed items. It shows the contenders of the clients
// corral interoperates with too (Curator, go-zookeeper, kazoo, etcd's
// concurrency package), with what can be known of them.
//
// [Read] reports on one recipe directory, [Walk] on every recipe directory
// at or below a path, and [Watch] follows a path as it changes. They make
// only reads (listings, gets and watches) and work on every store.Store.
//
// # Identity
//
// Unless the caller gave data of its own (sync.WithData), every contender
// node corral creates for a lock, a semaphore lease or a double barrier
// member holds an identity record: a small JSON object with the host name,
// the process ID, the time the hold attempt began and an optional label,
// for example
//
//	{"host":"web-1","pid":4242,"start":"2026-08-03T10:15:30.123Z","label":"deploy"}
//
// (see [Identity] and [ParseIdentity]). The record adds 53 bytes plus the
// host name, the digits of the process ID and, when set, 11 bytes plus the
// label to each node.
//
// An election candidate's node holds the value it proclaims, as Curator's and
// etcd's clients expect, so its identity is that value: inspect reports it
// as Data, and as an Identity too when the value is itself an identity
// record ([IdentityRecord] makes one, and "corral elect" proclaims one by
// default). Other clients' nodes hold what they hold: Curator's the host
// address, etcd's nothing; inspect reports their data as it is.
//
// # Time
//
// Since is when a contender began its attempt: the record's start when the
// node holds one, else the node's creation where the store keeps it
// (ZooKeeper; etcd does not), else unknown (the zero Time). For a holder it
// therefore counts its wait too; how long it has held is known only to a
// [Watch] that saw it granted (Contender.Granted), or from the record of a
// holder that records its grant (a partition's shard owner). The record's
// times are on the contender's clock and a creation time on the server's,
// so clock skew shows in the durations.
//
// # JSON
//
// A Report encodes as JSON with its Go field names in lower case
// ("path", "kind", "limit", "holders", "waiters", "queue", "time"; a
// contender's "name", "seq", "mode", "session", "identity", "since"),
// with two exceptions made for readers whose numbers are float64
// (JavaScript, jq): a session id or lease id ("session") is a string,
// hexadecimal as [SessionString] writes it, since it does not fit in 53
// bits; and data ("data") is a string when it is UTF-8 text, else base64
// under "data_base64" instead. "corral locks --json" prints this, and
// "corral queue --format json" frames items the same way.
//
// # Snapshots
//
// A report is built from one listing of the directory and one read per
// contender. A contender that leaves between the two is left out, and one
// that arrives is seen by the next report; the holders of a report are
// those of its listing.
package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corral-go/corral/internal/identity"
	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/internal/recipe"
	"github.com/corral-go/corral/store"
)

// Kind is the kind of recipe a directory holds, as the names of its
// children tell.
type Kind uint8

const (
	// None: no recipe's nodes (an empty directory, or one that only
	// contains other directories).
	None Kind = iota
	// Lock: a Mutex or an RWMutex, or the locks of Curator, go-zookeeper
	// or kazoo.
	Lock
	// Election: candidates of an election (corral's, or Curator's
	// LeaderLatch).
	Election
	// Semaphore: the leases of a semaphore.
	Semaphore
	// DoubleBarrier: the members of a double barrier.
	DoubleBarrier
	// Queue: a queue's items and claims.
	Queue
	// Foreign: contenders of another client that carry no recipe marker
	// (etcd's concurrency.Mutex and Election, bare sequential nodes): a
	// lock or an election, ordered like one.
	Foreign
	// Group: the members of a group (package group) or of a partition
	// (package partition), every one a holder, in the order they joined.
	Group
)

var kindNames = [...]string{None: "none", Lock: "lock", Election: "election", Semaphore: "semaphore",
	DoubleBarrier: "double-barrier", Queue: "queue", Foreign: "foreign", Group: "group"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// MarshalText returns the name of k, as String does.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText sets k from its name, as MarshalText writes it. Any other
// text, and a nil k, fail with an error wrapping store.ErrInvalidArgument.
func (k *Kind) UnmarshalText(b []byte) error {
	if k == nil {
		return fmt.Errorf("inspect: kind: %w: nil *Kind", store.ErrInvalidArgument)
	}
	for i, n := range kindNames {
		if n == string(b) {
			*k = Kind(i)
			return nil
		}
	}
	return fmt.Errorf("inspect: %w: unknown kind %q", store.ErrInvalidArgument, b)
}

// Mode is what a contender asks for.
type Mode string

// The modes of contenders.
const (
	Exclusive Mode = "exclusive" // a Mutex, or another client's lock or election
	Reader    Mode = "read"      // an RWMutex reader
	Writer    Mode = "write"     // an RWMutex writer
	Lease     Mode = "lease"     // a semaphore lease
	Candidate Mode = "candidate" // an election candidate
	Member    Mode = "member"    // a double barrier member
	Joined    Mode = "joined"    // a group member
)

// Identity is a decoded identity record: who created a contender node.
type Identity struct {
	Host  string    `json:"host"`
	PID   int       `json:"pid"`
	Start time.Time `json:"start"` // when the attempt began
	Label string    `json:"label,omitempty"`
}

func (id Identity) String() string {
	s := fmt.Sprintf("%s pid %d", id.Host, id.PID)
	if id.Label != "" {
		s += fmt.Sprintf(" %q", id.Label)
	}
	return s
}

// ParseIdentity decodes data as an identity record. It reports false for
// anything else: no data, another client's data (Curator's host address,
// say), another JSON object, arbitrary bytes.
func ParseIdentity(data []byte) (Identity, bool) {
	r, ok := identity.Parse(data)
	if !ok {
		return Identity{}, false
	}
	return Identity{Host: r.Host, PID: r.PID, Start: r.Start, Label: r.Label}, true
}

// IdentityRecord returns the identity record of this process with label,
// starting now, as the recipes write it: for an election candidate that
// wants to proclaim who it is, or a payload that wants to carry it.
func IdentityRecord(label string) []byte {
	return identity.NewEncoder(label).Encode(time.Now())
}

// Contender is one node that holds or waits.
type Contender struct {
	// Name is the node's name in its directory.
	Name string `json:"name"`
	// Seq orders the contenders; for a holder it is the fencing token of
	// its grant.
	Seq  int64 `json:"seq"`
	Mode Mode  `json:"mode"`
	// Session is the session the node belongs to (its owner), 0 for a
	// persistent node: a ZooKeeper session id, an etcd lease id. JSON
	// carries it as a string (see JSON in the package doc).
	Session int64 `json:"session,omitempty"`
	// Identity is the node's identity record, nil when its data is not one.
	Identity *Identity `json:"identity,omitempty"`
	// Data is the node's data when it is not an identity record: an
	// election candidate's value, another client's data. JSON carries it
	// as text, or base64 (see JSON in the package doc).
	Data []byte `json:"data,omitempty"`
	// Since is when the contender began its attempt, the zero Time when
	// unknown (see Time in the package doc).
	Since time.Time `json:"since,omitzero"`
	// Granted is when a holder became one, the zero Time when unknown:
	// no store records when a hold began, only when its attempt did. A
	// holder that records its grant in its identity record (a partition's
	// shard owner) has it from there, on its own clock; for the others,
	// only a Watcher that saw the grant (the contender waiting, or absent,
	// in its previous snapshot) fills it in, at most one snapshot late
	// (see Watch), and Read and Walk leave it zero.
	Granted time.Time `json:"granted,omitzero"`
}

// Age returns how long the contender has been at it (held or waited, since
// its attempt began) at now, 0 when Since is unknown.
func (c Contender) Age(now time.Time) time.Duration {
	if c.Since.IsZero() {
		return 0
	}
	return max(now.Sub(c.Since), 0)
}

// Report is what one recipe directory holds.
type Report struct {
	// Path is the directory.
	Path string `json:"path"`
	Kind Kind   `json:"kind"`
	// Limit is the limit of a semaphore or double barrier, as its nodes
	// record it (0 when none does), and 0 for the other kinds.
	Limit int `json:"limit,omitempty"`
	// Holders hold the recipe, in order: the holder of a lock (or its
	// readers), the leader of an election, the semaphore's leases within
	// its limit (every lease when none records a limit, as with Curator's
	// semaphore), the members of a double barrier's released round.
	Holders []Contender `json:"holders"`
	// Waiters wait behind them, in order: the election's other
	// candidates, the members of a round still filling, and so on.
	Waiters []Contender `json:"waiters"`
	// Queue is the state of a queue; nil for the other kinds.
	Queue *QueueState `json:"queue,omitempty"`
	// Time is when the directory was read, on this process's clock.
	Time time.Time `json:"time"`
}

// QueueState is the state of a queue, from the names of its items and
// claims (see the queue package's layout).
type QueueState struct {
	// Items counts the items, claimed ones included.
	Items int `json:"items"`
	// Claimed counts the items with a claim.
	Claimed int `json:"claimed"`
	// Levels count the items of each priority, highest first.
	Levels []Level `json:"levels"`
	// Claims are the claims, oldest first.
	Claims []Claim `json:"claims"`
}

// Level counts the items of one priority.
type Level struct {
	Priority int64 `json:"priority"`
	Items    int   `json:"items"`
	Claimed  int   `json:"claimed"`
}

// Claim is an item claimed by a consumer in at-least-once mode.
type Claim struct {
	// Item is the name of the item claimed.
	Item     string `json:"item"`
	Priority int64  `json:"priority"`
	// Session is the consumer's session.
	Session  int64     `json:"session,omitempty"`
	Identity *Identity `json:"identity,omitempty"`
	Data     []byte    `json:"data,omitempty"`
	// Since is when the item was claimed, when known.
	Since time.Time `json:"since,omitzero"`
}

// Read reports what the directory at path holds. It lists path once and
// reads each contender node once; see Snapshots in the package doc. A
// directory that holds no recipe's nodes gives a Report of Kind None. It
// fails with an error wrapping store.ErrInvalidArgument for a nil st,
// store.ErrInvalidPath for an invalid path, store.ErrNoNode when path does
// not exist, and the store's error (ctx's when it ends first) otherwise.
func Read(ctx context.Context, st store.Store, path string) (Report, error) {
	if err := check(st, path); err != nil {
		return Report{}, err
	}
	r := &reader{st: st}
	kids, err := r.children(ctx, path)
	if err != nil {
		return Report{}, fmt.Errorf("inspect: read %q: %w", store.ShortPath(path), err)
	}
	rep, err := r.report(ctx, path, kids)
	if err != nil {
		return Report{}, fmt.Errorf("inspect: read %q: %w", store.ShortPath(path), err)
	}
	return rep, nil
}

// Walk calls fn with the Report of every recipe directory at or below root
// (Kind other than None), depth first, children in name order. It does not
// descend into a recipe's nodes (a queue's items, say). A directory deleted
// while Walk runs is skipped; a missing root fails with an error wrapping
// store.ErrNoNode. An error from fn stops the walk and is returned. A nil
// st or fn fails with an error wrapping store.ErrInvalidArgument, an
// invalid root with store.ErrInvalidPath.
func Walk(ctx context.Context, st store.Store, root string, fn func(Report) error) error {
	if err := check(st, root); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("inspect: walk %q: %w: nil func", store.ShortPath(root), store.ErrInvalidArgument)
	}
	return (&reader{st: st}).walk(ctx, root, fn)
}

// check reports what no call of this package can read: a nil store (as
// the recipes' packages refuse it), an invalid path.
func check(st store.Store, path string) error {
	if st == nil {
		return fmt.Errorf("inspect: %q: %w: nil store", store.ShortPath(path), store.ErrInvalidArgument)
	}
	if err := store.ValidatePath(path); err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	return nil
}

// reader reads one snapshot; with watch set it also sets a watch with
// every listing, and collects the watches in evs.
type reader struct {
	st    store.Store
	watch bool
	evs   []<-chan store.Event
	// implicit holds, by parent, the names of the directories that are
	// no node and so are missing from their parent's listing (on etcd,
	// those of etcd's own recipes' contenders).
	implicit map[string][]string
}

func (r *reader) children(ctx context.Context, p string) ([]store.Child, error) {
	if !r.watch {
		return r.st.Children(ctx, p)
	}
	kids, ev, err := r.st.ChildrenW(ctx, p)
	if err == nil {
		r.evs = append(r.evs, ev)
	}
	return kids, err
}

// get reads the node at p; when watching, a change of its data fires too.
func (r *reader) get(ctx context.Context, p string, watch bool) (store.Node, error) {
	if r.watch && watch {
		// No watch on a node that is gone: the listing's watch
		// reports what comes at its name.
		_, ev, err := store.WatchNode(ctx, r.st, p)
		if err != nil {
			return store.Node{}, err
		}
		r.evs = append(r.evs, ev)
	}
	return r.st.Get(ctx, p)
}

func (r *reader) walk(ctx context.Context, root string, fn func(Report) error) error {
	kids, err := r.children(ctx, root)
	if err != nil {
		return fmt.Errorf("inspect: walk %q: %w", store.ShortPath(root), err)
	}
	if r.implicit, err = ImplicitDirs(ctx, r.st, root); err != nil {
		return fmt.Errorf("inspect: walk %q: %w", store.ShortPath(root), err)
	}
	return r.visit(ctx, root, kids, fn)
}

// ImplicitDirs returns, by parent, the names of the directories below root
// that a walk by Children would miss: on a store.ImplicitDirLister (etcd),
// the directories that are no node, such as the prefixes of etcd's own
// concurrency.Mutex and "etcdctl lock"; nil on other stores. A nil st
// fails with an error wrapping store.ErrInvalidArgument, an invalid root
// with store.ErrInvalidPath.
func ImplicitDirs(ctx context.Context, st store.Store, root string) (map[string][]string, error) {
	if err := check(st, root); err != nil {
		return nil, err
	}
	dirs, err := store.ImplicitDirs(ctx, st, root)
	if err != nil {
		return nil, err
	}
	byParent := make(map[string][]string)
	for _, d := range dirs {
		byParent[store.Parent(d)] = append(byParent[store.Parent(d)], store.Base(d))
	}
	return byParent, nil
}

func (r *reader) visit(ctx context.Context, p string, kids []store.Child, fn func(Report) error) error {
	rep, err := r.report(ctx, p, kids)
	if err != nil {
		return fmt.Errorf("inspect: walk %q: %w", store.ShortPath(p), err)
	}
	if rep.Kind != None {
		if err := fn(rep); err != nil {
			return err
		}
	}
	dirs := make([]string, 0, len(kids))
	for _, k := range kids {
		// A name that looks like another client's contender (a few
		// hexadecimal digits, like etcd's lease keys) may as well be a
		// directory.
		if f := names.FamilyOf(k.Name); f == names.NoFamily || f == names.Foreign || f == names.PartitionDirs {
			dirs = append(dirs, k.Name)
		}
	}
	dirs = append(dirs, r.implicit[p]...)
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	for _, name := range dirs {
		c := store.Join(p, name)
		ckids, err := r.children(ctx, c)
		if errors.Is(err, store.ErrNoNode) {
			continue // deleted since the listing
		}
		if err != nil {
			return fmt.Errorf("inspect: walk %q: %w", store.ShortPath(c), err)
		}
		if err := r.visit(ctx, c, ckids, fn); err != nil {
			return err
		}
	}
	return nil
}

// kindOf tells which recipe the children of a directory belong to: the
// family of the first of them that has one, else Foreign when there are
// foreign contenders.
func kindOf(kids []store.Child) Kind {
	foreign := false
	for _, k := range kids {
		switch names.FamilyOf(k.Name) {
		case names.Locks:
			return Lock
		case names.Latches:
			return Election
		case names.Leases:
			return Semaphore
		case names.Members:
			return DoubleBarrier
		case names.Queues:
			return Queue
		case names.Groups, names.Partitions:
			return Group
		case names.Foreign:
			foreign = true
		}
	}
	if foreign {
		return Foreign
	}
	return None
}

func (r *reader) report(ctx context.Context, p string, kids []store.Child) (Report, error) {
	rep := Report{Path: p, Kind: kindOf(kids), Holders: []Contender{}, Waiters: []Contender{}}
	var err error
	switch rep.Kind {
	case Lock, Election, Foreign:
		err = r.ordered(ctx, &rep, kids)
		if rep.Kind == Foreign && len(rep.Holders)+len(rep.Waiters) == 0 {
			rep.Kind = None // only directories that look like contenders
		}
	case Semaphore:
		err = r.semaphore(ctx, &rep, kids)
	case DoubleBarrier:
		err = r.doubleBarrier(ctx, &rep, kids)
	case Group:
		err = r.group(ctx, &rep, kids)
	case Queue:
		var is bool
		if is, err = r.isQueue(ctx, p, kids); is {
			err = r.queue(ctx, &rep)
		} else {
			rep.Kind = None
		}
	}
	rep.Time = time.Now()
	return rep, err
}

// ordered fills in a lock, an election or foreign contenders: the order of
// the recipe decides who holds.
func (r *reader) ordered(ctx context.Context, rep *Report, kids []store.Child) error {
	var (
		cs    []recipe.Contender
		nodes []store.Node
	)
	for _, c := range recipe.Contenders(kids) {
		f := names.FamilyOf(c.Name)
		if !(f == names.Foreign || f == names.Locks && rep.Kind != Election || f == names.Latches && rep.Kind == Election) {
			continue
		}
		n, ok, err := r.node(ctx, store.Join(rep.Path, c.Name), c.Seq)
		if err != nil {
			return err
		}
		// Other clients' contenders are ephemeral: a persistent node
		// with a name that looks like one (a few hexadecimal digits, as
		// etcd's lease keys) is a directory.
		if !ok || f == names.Foreign && n.Owner == 0 {
			continue
		}
		cs, nodes = append(cs, c), append(nodes, n)
	}
	for i, c := range cs {
		mode, order := Exclusive, recipe.Predecessor
		switch {
		case rep.Kind == Election:
			mode = Candidate // the first leads, whatever the kinds
		case c.Kind == recipe.Reader:
			mode, order = Reader, recipe.LastWriter
		case c.Kind == recipe.Writer:
			mode = Writer
		}
		rep.add(contender(nodes[i], mode), order.Grants(cs, i))
	}
	return nil
}

// node reads the contender at p listed with seq; ok is false when it left
// since the listing (or was made again under its name).
func (r *reader) node(ctx context.Context, p string, seq int64) (n store.Node, ok bool, err error) {
	n, err = r.st.Get(ctx, p)
	if errors.Is(err, store.ErrNoNode) || err == nil && n.Seq != seq {
		return store.Node{}, false, nil
	}
	return n, err == nil, err
}

// add reads the contender at p and adds it to the holders or the waiters;
// one that left since the listing is left out.
func (r *reader) add(ctx context.Context, rep *Report, p string, seq int64, mode Mode, holds bool) error {
	n, ok, err := r.node(ctx, p, seq)
	if ok {
		rep.add(contender(n, mode), holds)
	}
	return err
}

func (rep *Report) add(c Contender, holds bool) {
	if holds {
		rep.Holders = append(rep.Holders, c)
	} else {
		rep.Waiters = append(rep.Waiters, c)
	}
}

func contender(n store.Node, mode Mode) Contender {
	c := Contender{Name: n.Name(), Seq: n.Fence(), Mode: mode, Session: n.Owner, Since: n.Created}
	var granted time.Time
	c.Identity, granted, c.Data = identify(n.Data)
	if c.Identity != nil {
		c.Since, c.Granted = c.Identity.Start, granted
	}
	return c
}

// identify splits data into an identity record, with the grant it records
// (the zero Time for none), or the data as it is.
func identify(data []byte) (*Identity, time.Time, []byte) {
	if r, ok := identity.Parse(data); ok {
		return &Identity{Host: r.Host, PID: r.PID, Start: r.Start, Label: r.Label}, r.Granted, nil
	}
	if len(data) == 0 {
		return nil, time.Time{}, nil
	}
	return nil, time.Time{}, data
}

// limit returns the limit the nodes of kids with marker record in their
// names (names.WithSetting), 0 when none does: the first one's, which the
// others agree with (they are refused otherwise).
func limit(kids []store.Child, marker string) int {
	for _, k := range kids {
		if l, ok := names.SettingOf(k.Name, marker, 'n'); ok {
			return l
		}
	}
	return 0
}

func (r *reader) semaphore(ctx context.Context, rep *Report, kids []store.Child) error {
	l := limit(kids, names.Lease)
	rep.Limit = l
	i := 0
	for _, k := range kids {
		if !strings.Contains(k.Name, names.Lease) {
			continue
		}
		if err := r.add(ctx, rep, store.Join(rep.Path, k.Name), k.Seq, Lease, l == 0 || i < l); err != nil {
			return err
		}
		i++
	}
	return nil
}

// group fills in a group: its members, corral's and other clients' (any
// session's node of no other recipe, as group.Watch lists them: a
// persistent one is a directory), all holders.
func (r *reader) group(ctx context.Context, rep *Report, kids []store.Child) error {
	for _, k := range kids {
		if f := names.FamilyOf(k.Name); f != names.Groups && f != names.Partitions && f != names.Foreign && f != names.NoFamily {
			continue
		}
		n, ok, err := r.node(ctx, store.Join(rep.Path, k.Name), k.Seq)
		if err != nil {
			return err
		}
		if ok && n.Owner != 0 {
			rep.add(contender(n, Joined), true)
		}
	}
	return nil
}

func (r *reader) doubleBarrier(ctx context.Context, rep *Report, kids []store.Child) error {
	rep.Limit = limit(kids, names.Member)
	// The ready node holds the first and the last Seq of the released
	// round; it changes without a change of children, so it is watched.
	var lo, hi int64 = 0, -1
	ready, err := r.get(ctx, store.Join(rep.Path, names.Ready), true)
	switch {
	case err == nil:
		if _, err := fmt.Sscanf(string(ready.Data), "%d %d", &lo, &hi); err != nil {
			lo, hi = 0, -1
		}
	case !errors.Is(err, store.ErrNoNode):
		return err
	}
	for _, k := range kids {
		if !strings.Contains(k.Name, names.Member) {
			continue
		}
		in := lo <= k.Seq && k.Seq <= hi
		if err := r.add(ctx, rep, store.Join(rep.Path, k.Name), k.Seq, Member, in); err != nil {
			return err
		}
	}
	return nil
}
