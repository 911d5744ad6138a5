// Package shared is state kept in the coordination store itself and
// changed safely by many processes: a [Value] (data with a version, set
// and compared-and-set, watched as a channel), a [Counter] (a 64-bit
// integer that concurrent adders keep exact), and writes applied only
// while a hold is held ([Write], [Value.SetWhile]), decided by the server
// in the same atomic step as the write.
//
// A lock's holder almost always goes on to write something, and the write
// is where the lock's guarantee is lost: a holder paused past its session
// (a stopped VM, a long GC, a partition) wakes believing it holds the
// lock, while the server has granted it to another. A fencing token
// protects storage that checks it; for state in the store itself, a
// guarded write asks the server to apply the write only while the hold's
// node exists (a [Holder]'s [store.Guard]): ZooKeeper checks it in a multi,
// etcd compares its CreateRevision in a transaction. A write the server
// refuses because the hold is gone fails with an error wrapping [ErrLost]
// (the value of sync.ErrLockLost and every family's lost error) and
// changes nothing.
//
// # Versions
//
// A value's version counts its sets: 0 once it was first set, one more at
// every set since. A value never set (no node at its path) has version
// [NoVersion]. Compare-and-set applies only at the version given and
// otherwise fails with [ErrVersionMoved], which wraps store.ErrBadVersion.
//
// # Layout and interop
//
// A Value or a Counter is one persistent node at its path, made on the
// first write with its missing parents (see Parents in store's doc). A
// Counter writes Curator's DistributedAtomicLong encoding (8 bytes,
// big-endian two's complement) where it makes the node, so that a Java
// process's DistributedAtomicLong and a Go process's Counter share one
// counter on ZooKeeper; it reads kazoo's Counter (the value as decimal
// text, in a node kazoo makes empty) and Curator's SharedCount (4 bytes,
// as kazoo's Counter with support_curator writes it) as well, and keeps
// the encoding it finds, so that it shares a counter with whichever client
// made it. On etcd and memstore the encoding is the same.
//
// A path that holds another recipe's nodes (a lock's contenders, a queue)
// is refused with [ErrKindMismatch] on the first call of a handle.
//
// Every handle is safe for concurrent use; its methods take a ctx and
// return within it. Telemetry goes to the logger and meter provider of
// [WithLogger] and [WithMeterProvider], and nowhere by default.
package shared
