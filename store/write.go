package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// OpType is the kind of one write of a guarded write (see GuardedWriter).
type OpType uint8

const (
	// OpCheck requires the node to exist, with a given Version unless
	// AnyVersion, and writes nothing.
	OpCheck OpType = iota + 1
	// OpCreate creates a persistent node, as Create does with mode
	// Persistent, except that its parent must exist (ErrNoNode): a
	// guarded write makes no parents.
	OpCreate
	// OpSet replaces a node's data, as Set does.
	OpSet
	// OpDelete deletes a node with no children, if its Version is the one
	// given unless AnyVersion.
	OpDelete
)

func (t OpType) String() string {
	switch t {
	case OpCheck:
		return "check"
	case OpCreate:
		return "create"
	case OpSet:
		return "set"
	case OpDelete:
		return "delete"
	}
	return fmt.Sprintf("OpType(%d)", int(t))
}

// Op is one write of a guarded write (see GuardedWriter). Make one with
// CheckOp, CreateOp, SetOp or DeleteOp: the zero Version of a hand-made
// Op requires version 0, not any version.
type Op struct {
	Type OpType
	Path string
	// Data is the data of OpCreate and OpSet; nil for the others.
	Data []byte
	// Version is the Version OpSet, OpDelete and OpCheck require, or
	// AnyVersion; 0 for OpCreate.
	Version int64
}

// CheckOp requires the node at path to exist, with Version version unless
// version is AnyVersion.
func CheckOp(path string, version int64) Op {
	return Op{Type: OpCheck, Path: path, Version: version}
}

// CreateOp creates the persistent node at path with data; its parent must
// exist.
func CreateOp(path string, data []byte) Op {
	return Op{Type: OpCreate, Path: path, Data: data}
}

// SetOp replaces the data of the node at path if its Version is version,
// or whatever it is when version is AnyVersion.
func SetOp(path string, data []byte, version int64) Op {
	return Op{Type: OpSet, Path: path, Data: data, Version: version}
}

// DeleteOp deletes the node at path, which must have no children, if its
// Version is version, or whatever it is when version is AnyVersion.
func DeleteOp(path string, version int64) Op {
	return Op{Type: OpDelete, Path: path, Version: version}
}

// ErrGuardFailed: a guard of a guarded write names a node that does not
// exist, or exists with another Seq (another node at the same path): the
// write was refused and nothing was written.
var ErrGuardFailed = errors.New("store: guard node does not exist")

// WriteError is the error of a guarded write that a guard or an op
// refused: nothing was written. Err wraps ErrGuardFailed when a guard
// refused, and the sentinel of the op's failure otherwise.
type WriteError struct {
	// Guard is the index in guards of the guard that refused, or -1.
	Guard int
	// Op is the index in ops of the op that refused, or -1.
	Op  int
	Err error
}

func (e *WriteError) Error() string {
	if e.Guard >= 0 {
		return fmt.Sprintf("guard %d: %v", e.Guard, e.Err)
	}
	return fmt.Sprintf("op %d: %v", e.Op, e.Err)
}

// Unwrap returns Err.
func (e *WriteError) Unwrap() error { return e.Err }

// GuardRefused returns the *WriteError of guards[i], which refused.
func GuardRefused(guards []Guard, i int) *WriteError {
	return &WriteError{Guard: i, Op: -1, Err: fmt.Errorf("%w: %q with Seq %d", ErrGuardFailed, ShortPath(guards[i].Path), guards[i].Seq)}
}

// OpRefused returns the *WriteError of ops[i], which refused with the
// sentinel err.
func OpRefused(ops []Op, i int, err error) *WriteError {
	return &WriteError{Guard: -1, Op: i, Err: fmt.Errorf("%v %q: %w", ops[i].Type, ShortPath(ops[i].Path), err)}
}

// The limits of one guarded write: they keep it within the smallest
// request and transaction any store accepts (ZooKeeper's 1 MiB
// jute.maxbuffer, with MaxDataSize of data; etcd's 128 compares or
// operations per branch of a transaction, at most three per guard or op).
const (
	// MaxWriteOps is the most guards and ops together of one WriteIf.
	MaxWriteOps = 32
	// MaxWriteSize is the most bytes of one WriteIf: every path, the
	// guards' and the ops', and every op's data.
	MaxWriteSize = MaxDataSize + 16<<10
)

// ValidateWrite checks the arguments of a WriteIf before any I/O: at
// least one guard or op (ErrInvalidArgument) and at most MaxWriteOps
// (ErrTooLarge); each guard names a node (not the zero Guard or the root:
// ErrInvalidArgument, ErrInvalidPath); each op is of a known type, on a
// valid path other than the root, with data only where it writes data
// (over MaxDataSize: ErrTooLarge) and a version of AnyVersion or more, 0
// for a create (ErrInvalidArgument); no op's path is another's or below
// it (ErrInvalidArgument); and all of it within MaxWriteSize
// (ErrTooLarge).
func ValidateWrite(guards []Guard, ops []Op) error {
	n := len(guards) + len(ops)
	if n == 0 {
		return fmt.Errorf("%w: a guarded write of no guard and no op", ErrInvalidArgument)
	}
	if n > MaxWriteOps {
		return fmt.Errorf("%w: %d guards and ops, at most %d", ErrTooLarge, n, MaxWriteOps)
	}
	size := 0
	for i, g := range guards {
		if err := validateGuard(g); err != nil {
			return fmt.Errorf("guard %d: %w", i, err)
		}
		size += len(g.Path)
	}
	for i, op := range ops {
		if err := validateOp(op); err != nil {
			return fmt.Errorf("op %d: %w", i, err)
		}
		size += len(op.Path) + len(op.Data)
	}
	if size > MaxWriteSize {
		return fmt.Errorf("%w: a guarded write of %d bytes, at most %d", ErrTooLarge, size, MaxWriteSize)
	}
	for i, a := range ops {
		for j, b := range ops[:i] {
			if related(a.Path, b.Path) {
				return fmt.Errorf("%w: ops %d and %d touch %q and %q: a guarded write's ops touch distinct nodes, none below another", ErrInvalidArgument, j, i, ShortPath(b.Path), ShortPath(a.Path))
			}
		}
	}
	return nil
}

func validateGuard(g Guard) error {
	if g.IsZero() {
		return fmt.Errorf("%w: the zero Guard names no node", ErrInvalidArgument)
	}
	if err := ValidatePath(g.Path); err != nil {
		return err
	}
	if g.Path == "/" {
		return pathErr(g.Path, "the root is no hold's node")
	}
	if g.Seq < 0 {
		return fmt.Errorf("%w: guard Seq %d", ErrInvalidArgument, g.Seq)
	}
	return nil
}

func validateOp(op Op) error {
	if op.Type < OpCheck || op.Type > OpDelete {
		return fmt.Errorf("%w: unknown op type %v", ErrInvalidArgument, op.Type)
	}
	if err := ValidatePath(op.Path); err != nil {
		return err
	}
	if op.Path == "/" {
		return pathErr(op.Path, "the root cannot be written")
	}
	switch op.Type {
	case OpCreate, OpSet:
		if err := ValidateData(op.Data); err != nil {
			return err
		}
	default:
		if op.Data != nil {
			return fmt.Errorf("%w: %v %q with data", ErrInvalidArgument, op.Type, ShortPath(op.Path))
		}
	}
	if op.Version < AnyVersion || op.Type == OpCreate && op.Version != 0 {
		return fmt.Errorf("%w: %v %q with version %d", ErrInvalidArgument, op.Type, ShortPath(op.Path), op.Version)
	}
	return nil
}

// related reports whether a and b are the same path or one is below the
// other.
func related(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return a == b || strings.HasPrefix(b, a) && b[len(a)] == '/'
}

// Write applies ops under guards with st's GuardedWriter (see WriteIf).
// A store without the capability has no atomic way to do it: Write fails
// with an error wrapping errors.ErrUnsupported, after checking the
// arguments (ValidateWrite). A nil st fails with ErrInvalidArgument.
func Write(ctx context.Context, st Store, guards []Guard, ops []Op) ([]Node, error) {
	if st == nil {
		return nil, fmt.Errorf("store: guarded write: %w: nil store", ErrInvalidArgument)
	}
	if err := ValidateWrite(guards, ops); err != nil {
		return nil, err
	}
	w, ok := Find[GuardedWriter](st)
	if !ok {
		return nil, fmt.Errorf("store: guarded write: %w: the store has no GuardedWriter", errors.ErrUnsupported)
	}
	return w.WriteIf(ctx, guards, ops)
}
