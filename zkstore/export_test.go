package zkstore

import "time"

// WithoutDeadlineTimer keeps the timer that ends a session at its deadline
// from being armed, so that a test sees what the first read after the
// deadline does on its own.
func WithoutDeadlineTimer() Option {
	return func(o *options) { o.noTimer = true }
}

// SessionDeadline returns the Store's session deadline, or the zero time
// before the first connect response.
func SessionDeadline(s *Store) time.Time {
	d := s.deadline.Load()
	if d == 0 {
		return time.Time{}
	}
	return s.base.Add(time.Duration(d))
}

// Ended returns why the session ended, or nil, without checking the
// deadline first as every method does.
func Ended(s *Store) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// Syncs returns how many syncs the Store's pacer has sent.
func Syncs(s *Store) int64 { return s.syncs.Load() }

// Rounds returns how many round trips the Store has waited for: requests
// written when none other but pings was unanswered.
func Rounds(s *Store) int64 { return s.rounds.Load() }

// Workers returns how many goroutines the Store has started to run
// requests, and how many of them wait for one now.
func Workers(s *Store) (started int64, idle int) {
	return s.workers.started.Load(), int(s.workers.idle.Load())
}

// MaxIdle is how many goroutines a Store keeps waiting for a request.
const MaxIdle = maxIdle

// Directs returns how many direct requests s has sent (see direct.go).
func Directs(s *Store) uint32 { return s.ownXids.Load() }

func DirectUp(s *Store) bool { return s.live.Load() != nil }

// SessionEnd returns when the Store's session ends on the client unless
// its deadline moves: the deadline less the guard, or the zero time before
// the first connect response.
func SessionEnd(s *Store) time.Time {
	e := s.end()
	if e == 0 {
		return time.Time{}
	}
	return s.base.Add(e)
}
