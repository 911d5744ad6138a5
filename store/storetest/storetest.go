// Package storetest is the conformance suite of the store contract. Every
// adapter runs it against a real backend, the way fstest.TestFS checks a file
// system:
//
//	func TestConformance(t *testing.T) { storetest.Run(t, backend) }
//
// where backend is the adapter's [Backend] (the package example writes one,
// and compiles this call). Each behaviour is a subtest working in a fresh namespace, so the suite can
// share one server with other tests.
package storetest

import (
	"testing"
	"time"

	"github.com/corral-go/corral/store"
)

// Backend opens sessions on one shared store and injects faults into them.
type Backend interface {
	// Open opens a new session. The suite closes it; Open may register a
	// cleanup of its own with t.Cleanup.
	Open(t testing.TB) store.Store
	// Expire makes the server expire the session of s, as a long network
	// partition would, and returns once the server has done so (the
	// session's ephemeral nodes are gone for other sessions). s itself
	// learns it the way the backend's client would.
	Expire(t testing.TB, s store.Store)
}

// ReplyLoser is implemented by backends that can lose a reply: the next
// create made through s is applied by the server but its reply never reaches
// the client, which sees a broken connection.
type ReplyLoser interface {
	LoseNextCreateReply(t testing.TB, s store.Store)
}

// Disconnector is implemented by backends that can cut the connection of a
// session without expiring it, and restore it.
type Disconnector interface {
	Disconnect(t testing.TB, s store.Store)
	Reconnect(t testing.TB, s store.Store)
}

// Freezer is implemented by backends that can stop all traffic of a session
// without closing its connection (no bytes either way, no FIN: a partition,
// or a paused process as the server sees it), until Reconnect.
type Freezer interface {
	Disconnector
	Freeze(t testing.TB, s store.Store)
}

// Reaper is implemented by backends whose store removes a directory that
// Create made once a session's end took its last node, without another
// call: memstore at once, ZooKeeper when its server next reaps containers.
// ReapWithin bounds how long that may take. (etcd's clients do not see a
// lease's keys expire; the next one out of such a directory removes it.)
type Reaper interface {
	ReapWithin() time.Duration
}

// Reclaimer is implemented by backends whose store removes a directory
// Create made some time after the delete of its last node rather than
// with it (zkstore's WithReclaimDelay); ReclaimWithin bounds that time. The
// store of a backend that does not implement it must remove the directory
// with the delete.
type Reclaimer interface {
	ReclaimWithin() time.Duration
}
