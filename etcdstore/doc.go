// Package etcdstore is the etcd adapter of the store contract: a [Store] is
// one session on an etcd cluster, reached through go.etcd.io/etcd/client/v3.
//
// etcd has a flat keyspace with leases where ZooKeeper has a tree with
// sessions. The adapter maps one onto the other:
//
//   - A node at path "/a/b" is the key "/a/b"; its data is the value.
//   - The session is a lease, kept alive by the Store in the background
//     (default TTL [DefaultTTL], see [WithTTL]). Ephemeral nodes are keys
//     attached to it; SessionID and Node.Owner are the lease ID (0: no
//     lease).
//   - The children of "/a" are the keys "/a/<name>" where name has no '/'.
//     Create makes missing parents as persistent empty keys in the same
//     transaction as the node (but for the deepest paths); a key attached
//     to a lease cannot be a parent. Once a create has read its parent's
//     CreateRevision, the next ones check the parent by it (one compare
//     for "exists, with no lease"): a key's lease changes only when the
//     key is made again, through a Store; a lease attached to an existing
//     key by a put of another client is not seen.
//   - Node.Seq is the key's CreateRevision, for every node. So a contender
//     written under the same prefix by etcd's own concurrency.Mutex or
//     concurrency.Election, or by etcdctl lock, sorts correctly beside
//     corral's. A sequential node's name is the requested name followed by
//     16 hexadecimal digits: random, or those of an ephemeral sequential
//     node of the same session and requested name that was deleted with
//     DeleteSeq (see Names).
//   - Node.Version is the key's Version minus one (0 after Create).
//
// The root "/" is not a key: it always exists, has no data, never changes
// and cannot be written or deleted. Keys that do not start with '/' are
// invisible to the adapter; it uses some of its own there: one it watches
// and never writes (see the Store type), the session's create fence,
// attached to the lease (see Abandoned creates), the front records of
// lock directories (see below), and a marker beside each directory Create
// made, which goes with it: the Store that deletes the last key below such
// a directory removes it, [DefaultReclaimDelay] later unless it created in
// it again meanwhile ([WithReclaimDelay]; Close removes those still due).
// With [WithChroot] every
// key, the adapter's own included, is below the chroot instead.
//
// A Children call reads every key under the node, not only its direct
// children, so it costs in proportion to the node's whole subtree; the
// recipes keep their directories flat. [Store.ChildrenUpTo] and
// [Store.CreateAndWindow] ([store.WindowLister]) read only the few children
// up to a given Seq: what the server sends then does not grow with the
// number of children, though the server still reads them all to sort them
// by CreateRevision. So that a lock handoff needs no such read,
// [Store.DeleteFront] ([store.FrontDeleter]) records, in the transaction
// that deletes an exclusive holder's node, its Seq in a key of the
// adapter's own for the directory, attached to the deleting session's
// lease, and [Store.FollowsFront] lets the waiter behind it read that
// record and its own key: two point reads.
//
// # Names
//
// etcd keeps every key ever written in its index, deleted ones too, until
// the cluster is compacted, and every range read walks them. So a session
// uses the names of its ephemeral sequential nodes again, as etcd's own
// concurrency.Mutex uses one key per session: a name whose node the session
// deleted with [Store.DeleteSeq] ([store.SeqDeleter]), which deletes a node
// only if it has the Seq it names, is the name of its next ephemeral
// sequential node under the same requested path. A directory then holds as
// many names as the sessions that use it hold nodes at once, whatever its
// history, and a lock costs the same after a million acquisitions as after
// one. A name deleted with Delete, or whose create failed, is never used
// again, since a late delete by path could remove the new node. Identity is
// path and Seq together (see the store package), so a waiter never mistakes
// the new node for the old one.
//
// # Sessions
//
// The session's deadline is the sending of the last renewal the server
// acknowledged plus the TTL: the server renews a lease when it receives the
// renewal, so it cannot expire the lease, and hand the session's locks to
// another session, before then. The session ends, and Context is
// cancelled with [store.ErrSessionExpired], at the first of: a renewal
// answered "lease not found" (revoked, or expired on the server), or the
// session's end, a guard before the deadline. The guard is for this
// process's own delays, which a loaded machine stretches (see Sessions in
// package store): an eighth of the TTL, at most a second, plus twice the
// 99th percentile of how late a timer has fired in this process over the
// last 10 s, at most a quarter of the TTL. At a 2 s TTL the holder of a
// lock sees it lost 250 ms before the server can expire the lease, as long
// as the process's delays stay within what was measured; at the default
// 10 s TTL, a second before.
//
// The Store renews the lease when a third of the time from the sending of
// the last acknowledged renewal to the session's end has passed (about a
// third of the TTL less the guard), so that two more attempts fit before
// the end.
//
// The end is checked synchronously wherever the session's state is read,
// not only by a timer: at the start of every call, in Context and
// Disconnected, and when a reply arrives. A call never succeeds once the
// end has passed, and a reply that arrives after it ends the session and
// fails the call with ErrSessionExpired, since the server may have
// expired the lease before it answered. (A write failed that way may have
// been applied, as with [store.ErrDisconnected]; an ephemeral node it made
// goes with the lease.)
//
// Open anchors the deadline on the sending of the Grant. When the Grant's
// reply took more than a third of the TTL (a restarting server, a leader
// election), Open renews the lease at once and anchors on that renewal, so
// it never returns a session that is past, or close to, its end.
//
// A failed renewal closes the Disconnected channel and renewals are then
// retried 250 ms after the failed one began (at once after one that timed
// out); meanwhile every call first renews the lease (one attempt, see
// Bounds), so a call that succeeds after a disconnection has seen its
// session alive.
//
// # Bounds
//
// Every call returns when its ctx ends, give or take the bounds below,
// whatever the state of the connection or the cluster:
//
//   - Attempt timeout ([WithAttemptTimeout], default
//     [DefaultAttemptTimeout]): every request the Store sends (a read, a
//     transaction, a lease grant or renewal made for a call, the setup of
//     a watch) is one attempt, given up after this long by the client
//     (the request carries the call's deadline only, for the server
//     would arm a timer for it and still finish a write it has
//     proposed). A server can stall
//     a request: a member that forwards a write to a leader that just died
//     holds it for its request timeout (7 s by default), though a new
//     leader is elected within about two election timeouts. A call whose
//     attempt is given up fails with [store.ErrDisconnected] (for a write,
//     the outcome is unknown) and the caller retries, as corral's recipes
//     do, instead of waiting for the stalled request; a sequential Create
//     retries by itself. A request that needs longer than the attempt
//     timeout never succeeds (a Children of a huge directory on a slow
//     link): raise the bound.
//   - Each renewal of the keepalive loop is bounded by
//     min(attempt timeout, max(500 ms, min(TTL/5, 2 s))) and by the
//     session's end; after a failed one, the next follows 250 ms after the
//     failed one began.
//   - A Create whose ctx ends while one of its requests may be applied
//     waits for its undo (see Abandoned creates) at most one attempt
//     timeout more, then returns ctx's error.
//   - Close waits at most min(TTL, 5 s) for the revocation of the lease.
//   - Open and Dial block until a lease is granted or their ctx ends; a
//     given-up Grant attempt is retried.
//
// # Abandoned creates
//
// A create whose ctx ends while one of its transactions may have reached
// the server (sent and not answered, or answered with an unknown outcome) is
// undone by the Store. One transaction deletes the node if it is there as it
// would have been made (with this session's lease, or none for a persistent
// node, the data written, no children) and, in the same transaction, writes
// the session's create fence, the key "\x00corral/etcdstore/fence/<lease>"
// attached to the lease. Every create transaction of the session requires
// the fence to be as it last saw it, so a create that reaches the server
// after its undo (held in a frozen link, say) fails instead of making a
// node: once the undo is applied, the node is gone for good. A create of the
// session that was running when the fence moved is sent again, which the
// caller does not see. The undo is retried (10 ms apart, doubling up to
// 1 s) until it is applied or the session ends (the lease's end removes
// ephemeral nodes anyway); Close stops it. A persistent node with a fixed
// name whose create had an unknown outcome is not deleted, since it may
// have been made by someone else; the fence still moves, so the create
// cannot be applied later. A directory the create made in a transaction of
// its own (its parent was gone since the Store last created there) is
// removed with the node, or, when no node was made, as the last one out of
// it would remove it: empty, and made implicitly, at once or after the
// reclaim delay.
//
// # Watches
//
// ExistsW and ChildrenW open an etcd watch at the current revision, with
// require-leader, and read the watched keys beside it; changes the read
// already saw are skipped, so there is no gap and no stale event. Such a
// watch is served from etcd's synced watcher group and fires as soon as
// the change commits (a watch from an older revision waits up to 100 ms
// for the unsynced group's catch-up). A watch served by a member that lost
// its leader fails with [store.ErrDisconnected]; one resumed after a broken
// stream from a compacted revision re-reads and reports what changed. The
// setup of a watch is one attempt, bounded by the call's ctx; once set up,
// the watch lives until its event, its ctx's end or the session's end.
//
// # Credentials, TLS and roles
//
// A Store talks to etcd with whatever its client was configured with:
// clientv3.Config's TLS (the CA in RootCAs, a client certificate in
// Certificates, for a cluster run with --client-cert-auth) and Username and
// Password (for a cluster with authentication enabled). See the package
// example and docs/security.md.
//
// Open makes one read in the Store's root before it grants its lease, so
// that what would fail every call fails Open instead, with a sentinel:
// [store.ErrAuth] for no credentials where the cluster requires them
// (Dial fails with it too for a wrong password or an unknown user,
// which clientv3.New reports, and at once, from a TLS handshake of its
// own with each endpoint, when a certificate is refused; Open on a client
// made elsewhere sees the refusal only when its first attempt is given
// up), and
// [store.ErrPermission] when the user's roles do not let it read there.
// Later calls that a role does not allow fail with [store.ErrPermission]
// and change nothing.
//
// A role scoped to a key prefix needs [WithChroot]: it keeps every key
// the Store reads or writes, its own included, below the chroot.
//
// # Following, taking, leasing
//
// Beside the contract the Store implements the optional capabilities a
// queue needs to take an item for a constant cost (see the store package):
// [Store.GetDelete] deletes a node and returns it in one transaction (a
// delete with its previous value); [Store.FollowChildren] reads a
// directory once and then serves its changes from one watch, and its Sync
// waits for the watch to reach the current revision (one small read that
// walks no range, then progress requests while the range is quiet); and
// [Store.CreateLeased] attaches a node to a lease of its own (a grant, then
// the create), renewed and revoked through the Lease it returns, timed on
// the server's clock whatever becomes of the session. A range read walks
// every key etcd still indexes in the range, deleted ones too until the
// next compaction; after its first listing a follow reads no range again.
//
// [Store.FollowTree] ([store.TreeFollower]) follows a subtree, data
// included, with one prefix watch: read in pages at one revision, resumed
// from its revision when the server cancels it (a member that lost its
// leader), so a lost connection costs no read of the subtree; only a
// compaction of the revisions it would resume from ends it, with
// store.ErrDisconnected, and its caller reads anew.
//
// # Logging
//
// The Store logs nothing unless given a logger with [WithLogger], and then
// only at debug level (disconnections, reconnections, given-up attempts,
// undone creates, the session's end). [Dial] gives the client it makes the
// same logger, or a silent one, unless its Config has its own.
package etcdstore
