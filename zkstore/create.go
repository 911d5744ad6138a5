package zkstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/corral-go/corral/store"
	"github.com/go-zookeeper/zk"
)

// Creates, protected as Curator protects them: an ephemeral sequential
// node carries a fresh GUID in its name, so that a create whose reply was
// lost is found again instead of made twice, and a create its caller
// abandoned is found and deleted.

// protectedPrefix starts the names of ephemeral sequential nodes, as in
// Curator: "_c_<uuid>-<name>".
const protectedPrefix = "_c_"

// Create creates the node at path; see [store.Store]. Missing parents are
// created as persistent, empty nodes. An ephemeral sequential node is named
// "_c_<uuid>-<name><10 digits>" and is created exactly once even if a reply
// is lost: Create then waits for the reconnection (bounded by ctx and the
// session) and finds the node again.
//
// If ctx ends first, Create returns ctx.Err() at most UndoWait later, and
// the node, if the server makes it, is deleted as soon as the connection
// allows while the session lives (see the package doc for the exceptions).
func (s *Store) Create(ctx context.Context, path string, data []byte, mode store.Mode) (store.Node, error) {
	if err := store.ValidateCreate(path, data, mode); err != nil {
		return store.Node{}, err
	}
	return s.create1(ctx, path, data, mode, "")
}

// create1 is Create of a valid request; guid, when not empty, is the uuid
// of an ephemeral sequential node's protected name.
func (s *Store) create1(ctx context.Context, path string, data []byte, mode store.Mode, guid string) (store.Node, error) {
	c := s.creating(path, data, mode, guid)
	created, err := call(s, ctx, c.do, c.undo)
	return c.made(created, err)
}

// A creation is the request of a create, as call runs it, and what makes
// of its outcome the node Create returns.
type creation struct {
	s      *Store
	path   string
	target string // the path asked of the server: a protected name's, or path
	data   []byte
	mode   store.Mode
	flags  int32
	do     func(left *caller) (string, error)
	undo   func(created string, err error)
}

// creating returns the creation of create1's request.
func (s *Store) creating(path string, data []byte, mode store.Mode, guid string) creation {
	var flags int32
	if mode&store.Ephemeral != 0 {
		flags |= zk.FlagEphemeral
	}
	if mode&store.Sequential != 0 {
		flags |= zk.FlagSequence
	}
	target := path
	if mode == store.EphemeralSequential {
		if guid == "" {
			guid = newUUID()
		}
		target = store.Join(store.Parent(path), protectedPrefix+guid+"-"+store.Base(path))
	} else {
		guid = ""
	}
	data = slices.Clone(data)
	return creation{s: s, path: path, target: target, data: data, mode: mode, flags: flags,
		do:   func(left *caller) (string, error) { return s.create(left, target, data, flags, guid) },
		undo: func(created string, err error) { s.undoCreate(target, mode, created, err) },
	}
}

// made returns the node c made, as Create does, given the outcome of its
// call.
func (c creation) made(created string, err error) (store.Node, error) {
	if err != nil {
		return store.Node{}, c.s.fail("create", c.path, err)
	}
	n := node(created, c.data, &zk.Stat{})
	if c.mode&store.Ephemeral != 0 {
		n.Owner = c.s.SessionID()
	}
	return n, nil
}

// errAbandoned is the result of a create given up because its caller left
// before anything was made.
var errAbandoned = errors.New("zkstore: create abandoned before it was made")

// create makes path, and its parents if they are missing. With a guid (a
// protected create) it survives a lost reply: it looks for the node by its
// guid once reconnected, and creates it again only if it is not there and
// the caller has not left. A create that fails after it made parents hands
// them to the reclaimer (leftEmpty): a connection lost between two of them
// would otherwise leave a directory that never had a child.
func (s *Store) create(left *caller, path string, data []byte, flags int32, guid string) (_ string, err error) {
	parent := store.Parent(path)
	s.later.Keep(parent)
	madeDir := false // parent may have been made by this create
	defer func() {
		if err != nil {
			s.leftEmpty(parent, madeDir)
		}
	}()
	for attempt := 0; ; attempt++ {
		var made func()
		if attempt == 0 && s.dirs.get(parent) == dirRemoved {
			made, madeDir = s.makeAhead(parent), true
		}
		created, err := s.conn.Create(path, data, flags, s.acl)
		if made != nil {
			made()
		}
		switch {
		case err == nil:
			return created, nil
		case errors.Is(err, zk.ErrNoNode) && attempt < 100:
			err, madeDir = s.makeParents(parent), true
			if err == nil {
				continue
			}
			if guid == "" || !isConnErr(err) || errors.Is(err, zk.ErrClosing) {
				return "", err
			}
			if left.gone() {
				return "", errAbandoned
			}
			if err := s.waitConnected(); err != nil {
				return "", err
			}
		case guid != "" && isConnErr(err) && !errors.Is(err, zk.ErrClosing):
			found, err := s.findProtected(parent, guid)
			if err != nil || found != "" {
				return found, err
			}
			if left.gone() {
				return "", errAbandoned
			}
		default:
			return "", err
		}
	}
}

// abandoned is the outcome of a create given up because its caller left
// before the node was made in dir, which the create made if made says so
// (see leftEmpty).
func (s *Store) abandoned(dir string, made bool) (string, error) {
	s.leftEmpty(dir, made)
	return "", errAbandoned
}

// leftEmpty is told that a create that made no node in dir ends; made
// says that it may have made dir (makeParents or makeAhead ran). Such a
// dir would stay, empty, with no delete in it to take it back (and
// ZooKeeper's reaper never takes a container that never had a child,
// unless the server is set to): it goes to the reclaimer, as after the
// last node in it (Emptied; at once with no reclaim delay), which removes
// it if it is empty and Create made it.
func (s *Store) leftEmpty(dir string, made bool) {
	if made && dir != "/" {
		s.later.Emptied(dir)
	}
}

// findProtected returns the child of parent with guid in its name if it
// belongs to this session, or "" if there is none. It retries, pausing
// between attempts, until it knows or the session ends.
func (s *Store) findProtected(parent, guid string) (string, error) {
	prefix := protectedPrefix + guid + "-"
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := s.pause(attempt - 1); err != nil {
				return "", err
			}
		}
		if err := s.waitConnected(); err != nil {
			return "", err
		}
		names, _, err := s.conn.Children(parent)
		if errors.Is(err, zk.ErrNoNode) {
			return "", nil
		}
		if isConnErr(err) && !errors.Is(err, zk.ErrClosing) {
			continue
		}
		if err != nil {
			return "", err
		}
		i := slices.IndexFunc(names, func(n string) bool { return strings.HasPrefix(n, prefix) })
		if i < 0 {
			return "", nil
		}
		found := store.Join(parent, names[i])
		ok, st, err := s.conn.Exists(found)
		if isConnErr(err) && !errors.Is(err, zk.ErrClosing) {
			continue
		}
		if err != nil {
			return "", err
		}
		if !ok {
			return "", nil // deleted since: create again
		}
		if st.EphemeralOwner != s.SessionID() {
			return "", fmt.Errorf("%w: %s belongs to session %#x, not %#x",
				store.ErrNodeExists, found, st.EphemeralOwner, s.SessionID())
		}
		return found, nil
	}
}

// makeParents creates p and its missing ancestors as container nodes
// holding dirMark: the directories Create makes implicitly, which the
// server reaps once emptied and the Store removes itself when it empties
// one (see reclaim).
//
// A directory above p may be removed again between its creation and p's
// (the last one out of it, see reclaim); p is then made again after it, a
// bounded number of times, as create does for the node itself.
func (s *Store) makeParents(p string) error {
	if p == "/" {
		return nil
	}
	err := s.makeDir(p)
	for attempt := 0; errors.Is(err, zk.ErrNoNode) && attempt < 100; attempt++ {
		if err := s.makeParents(store.Parent(p)); err != nil {
			return err
		}
		err = s.makeDir(p)
	}
	if err == nil || errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return err
}

// undoCreate deletes the node of a create whose caller left before it
// completed; target is the path asked of the server, created and err the
// create's outcome. It retries across lost connections, pausing between
// attempts, until the node is gone or the session ends. Only a node still
// as the create made it (version 0) is deleted. A plain ephemeral create
// whose reply was lost made the node at target if this session owns it;
// the outcome of any other create whose reply was lost is unknown, and it
// is left alone.
func (s *Store) undoCreate(target string, mode store.Mode, created string, err error) {
	if err != nil {
		if mode != store.Ephemeral || !isConnErr(err) || errors.Is(err, zk.ErrClosing) {
			return
		}
		created = ""
	}
	for attempt := 0; ; attempt++ {
		if attempt > 0 && s.pause(attempt-1) != nil {
			return
		}
		if s.waitConnected() != nil {
			return
		}
		path := created
		if path == "" {
			ok, st, err := s.conn.Exists(target)
			if isConnErr(err) && !errors.Is(err, zk.ErrClosing) {
				continue
			}
			if err != nil || !ok || st.EphemeralOwner != s.SessionID() {
				return
			}
			path = target
		}
		err := s.conn.Delete(path, 0)
		if err == nil {
			s.later.Emptied(store.Parent(path))
		}
		if !isConnErr(err) || errors.Is(err, zk.ErrClosing) {
			return // deleted, gone already (a retry may find its own work done), changed, or closing
		}
	}
}

// newUUID returns a random (version 4) UUID in its usual text form.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}
