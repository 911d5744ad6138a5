package zkstore

import (
	"sync"
	"sync/atomic"
)

// Every blocking client request runs on a goroutine other than its
// caller's, so that the caller can leave when its ctx ends (see call). A
// goroutine starts with a small stack, and the client's request path is
// deep enough to grow it, copying it on the way: measured, 6% of the
// client's CPU per lock acquisition went to that (BenchmarkLockPeers,
// ZooKeeper, N=8). So a Store keeps the goroutines that ran its requests,
// up to maxIdle of them idle, and hands the next request to one of those.

// maxIdle is how many goroutines a Store keeps waiting for a request.
const maxIdle = 8

// A runner is a piece of work for a goroutine of the Store: a call's job,
// or a function (fn).
type runner interface{ run() }

// fn runs a function as a runner.
type fn func()

func (f fn) run() { f() }

// workers runs functions on goroutines a Store keeps.
type workers struct {
	jobs    chan runner // taken by idle goroutines only: a send fails when none is
	idle    atomic.Int32
	started atomic.Int64 // goroutines started, ever
	wg      sync.WaitGroup
}

// goRun runs f on a goroutine of the Store: an idle one, or a new one. f
// must not block past the session's end (the client returns then).
func (s *Store) goRun(f runner) {
	select {
	case s.workers.jobs <- f:
		return
	default:
	}
	s.workers.started.Add(1)
	s.workers.wg.Add(1)
	go s.work(f)
}

// work runs f and then, while the session lives and fewer than maxIdle
// others wait, what goRun hands it.
func (s *Store) work(f runner) {
	w := &s.workers
	defer w.wg.Done()
	var end <-chan struct{}
	if s.ctx != nil { // a Store made by Open has one
		end = s.ctx.Done()
	}
	for {
		f.run()
		if w.idle.Add(1) > maxIdle {
			w.idle.Add(-1)
			return
		}
		select {
		case f = <-w.jobs:
			w.idle.Add(-1)
		case <-end:
			w.idle.Add(-1)
			return
		}
	}
}
