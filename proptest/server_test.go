package proptest

import "github.com/corral-go/corral/memstore"

// newServer returns the tree a state machine runs on. Its expiries end a
// session's context and then free its nodes in two steps, as a real store
// does, with no margin of time between them: a machine expires sessions by
// the thousand and checks what each step leaves, not how long a goroutine
// takes to see its context end (memstore's own tests pin that down).
func newServer() *memstore.Server { return memstore.NewServer(memstore.WithExpiryMargin(0)) }
