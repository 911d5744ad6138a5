package shared

import (
	"bytes"
	"context"
	"fmt"

	"github.com/corral-go/corral/internal/telemetry"
	"github.com/corral-go/corral/store"
)

// Snapshot is a value as read or written: its data and its version (see
// Versions in the package doc).
type Snapshot struct {
	Data    []byte
	Version int64
}

// Value is a shared value: the data of the node at its path, read with its
// version, set, and compared-and-set on the version, as Curator's
// SharedValue and etcd's STM keep one. A Value is a handle: any number of
// them, in any processes, may share one path.
//
// A Value is safe for concurrent use. The zero Value and a nil *Value are
// not usable: their methods fail with an error wrapping
// store.ErrInvalidArgument.
type Value struct {
	n *node
}

// NewValue returns the Value at path on st's session. It does no I/O; a
// nil store, an invalid path (or the root) or a nil option make every
// method fail with an error wrapping store.ErrInvalidArgument or
// store.ErrInvalidPath.
func NewValue(st store.Store, path string, opts ...Option) *Value {
	return &Value{n: newNode(st, path, "value", telemetry.KindValue, opts)}
}

func (v *Value) node() *node {
	if v == nil {
		return nil
	}
	return v.n
}

// Path returns the value's path ("" for a nil or zero Value).
func (v *Value) Path() string {
	if v.node() == nil {
		return ""
	}
	return v.n.path
}

// Get returns the value now: its data and version, or a nil Data and
// NoVersion when it was never set. It blocks for one read (two on a
// handle's first call, which checks that the path holds no other
// recipe: ErrKindMismatch), riding out a lost connection while ctx and
// the session live; it fails with ctx's error, or the session's end
// (store.ErrSessionExpired, store.ErrClosed).
func (v *Value) Get(ctx context.Context) (Snapshot, error) {
	n := v.node()
	if err := n.usable("get"); err != nil {
		return Snapshot{}, err
	}
	nd, ok, err := n.read(ctx)
	if err != nil {
		return Snapshot{}, n.errf("get", err)
	}
	if !ok {
		return Snapshot{Version: NoVersion}, nil
	}
	return Snapshot{Data: nd.Data, Version: nd.Version}, nil
}

// Set sets the value to data, whatever its version, making its node (and
// missing parents) when it was never set, and returns it as written. Data
// over store.MaxDataSize fails with store.ErrTooLarge before any I/O. Set
// blocks for a write or two; a lost connection fails it with
// store.ErrDisconnected, after which the data may or may not have been
// set. It fails with ctx's error or the session's end as Get does.
func (v *Value) Set(ctx context.Context, data []byte) (Snapshot, error) {
	return v.write(ctx, "set", false, nil, data, NoVersion, true)
}

// CompareAndSet sets the value to data only if its version is version
// (NoVersion: only if it was never set), and returns it as written. When
// the version has moved, it fails with ErrVersionMoved (wrapping
// store.ErrBadVersion) and writes nothing: read it again and decide
// again. A version below NoVersion fails with store.ErrInvalidArgument,
// and data over store.MaxDataSize with store.ErrTooLarge, before any I/O.
// Otherwise it fails as Set does.
func (v *Value) CompareAndSet(ctx context.Context, data []byte, version int64) (Snapshot, error) {
	return v.write(ctx, "compare-and-set", false, nil, data, version, false)
}

// SetWhile is Set applied only while h is held, decided by the server in
// the same atomic step (see the package doc): when h's node is gone, it
// fails with an error wrapping ErrLost and writes nothing; when h holds
// nothing, it fails with ErrNotHeld before any I/O. h may be held by any
// session, this Value's or another. A missing directory of the value is
// made first, apart from the guarded write, as an explicit node.
func (v *Value) SetWhile(ctx context.Context, h Holder, data []byte) (Snapshot, error) {
	return v.write(ctx, "set", true, h, data, NoVersion, true)
}

// CompareAndSetWhile is CompareAndSet applied only while h is held, as
// SetWhile is.
func (v *Value) CompareAndSetWhile(ctx context.Context, h Holder, data []byte, version int64) (Snapshot, error) {
	return v.write(ctx, "compare-and-set", true, h, data, version, false)
}

// write is every write of a Value: under h's guard when guarded.
func (v *Value) write(ctx context.Context, op string, guarded bool, h Holder, data []byte, version int64, any bool) (Snapshot, error) {
	n := v.node()
	if err := n.usable(op); err != nil {
		return Snapshot{}, err
	}
	if version < NoVersion {
		return Snapshot{}, n.errf(op, fmt.Errorf("%w: version %d", store.ErrInvalidArgument, version))
	}
	if err := store.ValidateData(data); err != nil {
		return Snapshot{}, n.errf(op, err)
	}
	var g store.Guard
	if guarded {
		var err error
		if g, err = guardOf(h); err != nil {
			return Snapshot{}, n.errf(op, err)
		}
	}
	if !n.checked.Load() {
		if _, _, err := n.read(ctx); err != nil {
			return Snapshot{}, n.errf(op, err)
		}
	}
	nd, err := n.put(ctx, bytes.Clone(data), version, any, g)
	if err != nil {
		return Snapshot{}, n.errf(op, err)
	}
	return Snapshot{Data: nd.Data, Version: nd.Version}, nil
}
