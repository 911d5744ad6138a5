package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/connectivity"

	"github.com/corral-go/corral/internal/clockguard"
	"github.com/corral-go/corral/internal/reclaim"
	"github.com/corral-go/corral/store"
)

// The session's lease is renewed with one KeepAliveOnce when a third of the
// time from the sending of the last acknowledged renewal to the session's
// end (the TTL less the guard, see below) has passed, by the keepalive
// loop, and on demand by a call made while the client is disconnected (see
// begin).
//
// The expiry rule: a renewal sent at time t and acknowledged makes the
// server's lease last until at least t+TTL, because the server renewed it
// after t. The server can only expire the lease, and so hand the session's
// locks to someone else, after that. So the session's deadline is (send
// time of the latest acknowledged renewal) + TTL, on the client's monotonic
// clock, and the session ends with ErrSessionExpired at its end, a guard
// before the deadline (see package clockguard: an eighth of the TTL, at
// most a second, plus twice the process's recent timer lateness, at most a
// quarter of the TTL), unless a newer renewal is acknowledged first,
// whether or not the server has expired the lease yet. The guard is what
// is left, on a loaded machine, between the holder seeing its hold end and
// the server handing it on. clientv3's own KeepAlive counts the TTL from
// the arrival of the reply instead, which can be later than the server's
// expiry by the reply's latency; hence this loop. A leader change or a
// server restart only extends leases, never shortens them, so the rule
// holds through them. A renewal answered with "lease not found" (revoked,
// or expired on the server) ends the session at once.
//
// The end is enforced where session state is read, not only by the loop's
// timer, which may run late on a loaded machine: at the start of every
// call (begin), in Context and Disconnected, and when a reply arrives (do,
// renew, serve). A reply that arrives after the end proves nothing about
// the moment the server handled it: the server may have expired the lease
// and handed the session's locks on before, so it ends the session instead
// of counting as a success. As the deadline only moves at acknowledgements
// that arrive before the end, the session is alive at a moment exactly
// when the end known at that moment lies ahead. The guard is read afresh
// at every check: one that grew since the last renewal moves the end
// earlier at once, and one that shrank as the load passed moves an end not
// yet reached later, never past the deadline. The loop's timer first wakes
// at the earliest end the guard allows (the deadline less a quarter of the
// TTL), and then at the end the guard sets then.
//
// A renewal that fails while the end is ahead (no connection, no leader,
// timeout) reports a disconnection, and renewals are then retried 250 ms
// after the failed one began (at once after one that timed out); the first
// one that succeeds reports the reconnection.

// expiredCause is the cause of a session whose end passed.
func (s *Store) expiredCause() error {
	return fmt.Errorf("%w: lease %x not renewed within its TTL (%v) less the guard for this process's delays (%v)",
		store.ErrSessionExpired, int64(s.lease), s.ttl, clockguard.Guard(s.ttl).Round(time.Millisecond))
}

// expireLocked ends the session if its end (the deadline less the guard)
// has passed, and reports whether it did. s.mu is held.
func (s *Store) expireLocked() bool {
	if s.ctx.Err() == nil && !time.Now().Before(s.endsLocked()) {
		return s.endLocked(s.expiredCause())
	}
	return false
}

// endsLocked returns when the session ends on the client unless a renewal
// is acknowledged first: the deadline less the guard. s.mu is held.
func (s *Store) endsLocked() time.Time {
	return s.deadline.Add(-clockguard.Guard(s.ttl))
}

// ends is endsLocked without s.mu held.
func (s *Store) ends() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endsLocked()
}

// untilCheck returns how long the keepalive loop's timer waits before it
// looks at the session's end again: until the earliest end the guard
// allows, and once that has passed, until the end the guard sets now; 0
// when the end has passed.
func (s *Store) untilCheck() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if early := time.Until(s.deadline.Add(-clockguard.Limit(s.ttl))); early > 0 {
		return early
	}
	return max(time.Until(s.endsLocked()), 0)
}

// renew renews the lease once, within ctx, and records the outcome: a
// success reports a reconnection, a failure a disconnection (unless a
// renewal sent after it has succeeded). It returns nil, the session's end,
// or the renewal's error.
func (s *Store) renew(ctx context.Context) error {
	sent := time.Now()
	resp, err := s.cli.KeepAliveOnce(ctx, s.lease)
	switch {
	case err == nil:
		s.mu.Lock()
		// An acknowledgement that arrives after the end comes too late:
		// the session ended then.
		if ended := s.expireLocked(); ended || s.ctx.Err() != nil {
			s.mu.Unlock()
			if ended {
				s.logEnded()
			}
			return s.sessionErr()
		}
		if d := sent.Add(time.Duration(resp.TTL) * time.Second); d.After(s.deadline) {
			s.deadline = d
		}
		if sent.After(s.lastRenewal) {
			s.lastRenewal = sent
		}
		reconnected := s.discClosed
		if reconnected {
			s.disc = make(chan struct{})
			s.discClosed = false
		}
		s.mu.Unlock()
		if reconnected {
			s.log.Debug("etcdstore: reconnected", "lease", s.leaseHex())
		}
		return nil
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		s.end(fmt.Errorf("%w: lease %x not found", store.ErrSessionExpired, int64(s.lease)))
		return s.sessionErr()
	case s.ctx.Err() != nil:
		return s.sessionErr()
	}
	// A renewal that fails after a later one succeeded (it was sent into
	// a connection that broke and has since come back) is old news.
	s.mu.Lock()
	report := !s.lastRenewal.After(sent) && !s.discClosed
	if !s.lastRenewal.After(sent) {
		s.setDisconnectedLocked()
	}
	s.mu.Unlock()
	if report {
		s.log.Debug("etcdstore: disconnected: lease renewal failed", "lease", s.leaseHex(), "err", err)
	}
	return err
}

// keepAlive renews the lease until the session ends, and ends it when its
// end passes.
func (s *Store) keepAlive() {
	defer s.wg.Done()
	retry := min(s.ttl/3, 250*time.Millisecond)
	attempt := min(max(min(s.ttl/5, 2*time.Second), 500*time.Millisecond), s.attempt)
	next := time.NewTimer(s.untilRenewal())
	defer next.Stop()
	expiry := time.NewTimer(s.untilCheck())
	defer expiry.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-expiry.C:
			if wait := s.untilCheck(); wait > 0 {
				expiry.Reset(wait) // not yet, or renewed by a call meanwhile
				continue
			}
			if s.expiryHook != nil {
				s.expiryHook()
			}
			s.end(s.expiredCause())
			return
		case <-next.C:
		case <-s.kick:
		}
		began := time.Now()
		ctx, cancel := context.WithTimeout(s.ctx, max(min(attempt, time.Until(s.ends())), time.Millisecond))
		err := s.renew(ctx)
		cancel()
		if s.ctx.Err() != nil {
			return
		}
		// Renewed, or not: either way the guard may have moved.
		expiry.Reset(s.untilCheck())
		if err == nil {
			next.Reset(s.untilRenewal())
		} else {
			// renew reported the disconnection. The retry is counted
			// from the failed attempt's start: one that timed out
			// has waited long enough, and the end is near.
			next.Reset(max(retry-time.Since(began), 0))
		}
	}
}

// untilRenewal returns the time until the next scheduled renewal: when a
// third of the time from the sending of the last acknowledged renewal to
// the session's end (TTL less the guard) has passed, so that two more
// attempts fit before the end.
func (s *Store) untilRenewal() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	window := s.ttl - clockguard.Guard(s.ttl)
	return max(time.Until(s.deadline.Add(-s.ttl+window/3)), 0)
}

func (s *Store) leaseDeadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

// watchConn asks for an early renewal whenever the client's connection
// leaves the ready state, so that a broken connection is reported within
// one renewal attempt rather than at the next scheduled renewal.
func (s *Store) watchConn() {
	defer s.wg.Done()
	conn := s.cli.ActiveConnection()
	if conn == nil {
		return
	}
	for {
		st := conn.GetState()
		if st != connectivity.Ready {
			s.probe()
		}
		if !conn.WaitForStateChange(s.ctx, st) {
			return
		}
	}
}

// Context returns a context that is cancelled when the session ends, with
// cause [store.ErrSessionExpired] (wrapped, saying why) when the lease was
// lost or could not be renewed in time, or [store.ErrClosed] after Close.
// It checks the session's end first (the deadline less the guard; see
// Sessions in the package doc): once the end has passed, the context it
// returns is cancelled, even if no timer has noticed yet.
func (s *Store) Context() context.Context {
	s.mu.Lock()
	ended := s.expireLocked()
	s.mu.Unlock()
	if ended {
		s.logEnded()
	}
	return s.ctx
}

// Disconnected returns a channel that is closed when a lease renewal fails
// (the connection is lost or the cluster has no leader) while the lease may
// still be alive, and when the session ends (checked against its end
// first, as Context does). After a successful renewal a new call returns a
// new, open channel.
func (s *Store) Disconnected() <-chan struct{} {
	s.mu.Lock()
	ended := s.expireLocked()
	disc := s.disc
	s.mu.Unlock()
	if ended {
		s.logEnded()
	}
	return disc
}

// Close ends the session: it stops the keepalive and the undoing of
// abandoned creates, cancels Context with [store.ErrClosed], revokes the
// lease (which deletes the session's ephemeral nodes and its fence) and
// waits for the Store's goroutines, whose pending watches deliver an event
// with Err. It blocks for at most min(TTL, 5 s) when the cluster cannot be
// reached; the lease then expires by itself. A persistent node whose
// abandoned create was still being undone may remain. Close is idempotent:
// later calls return nil, and every other method then fails with
// [store.ErrClosed].
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		reclaim.Flush(s.later.Stop(), s.reclaimAll, min(s.attempt, maxFlush))
		s.mu.Lock()
		s.closed = true
		s.stopLocked(store.ErrClosed)
		s.setDisconnectedLocked()
		s.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), min(s.ttl, 5*time.Second))
		defer cancel()
		if _, rerr := s.cli.Revoke(ctx, s.lease); rerr != nil && !errors.Is(rerr, rpctypes.ErrLeaseNotFound) {
			err = fmt.Errorf("etcdstore: close: revoke lease %x: %w", int64(s.lease), classify(ctx, rerr))
		}
		s.wg.Wait()
		s.unguard()
		if s.ownClient {
			s.cli.Close()
		}
		if s.closeClient != nil {
			s.closeClient()
		}
	})
	return err
}

// sessionErr checks the session's end and returns the error every call fails
// with once the session has ended, or nil.
func (s *Store) sessionErr() error {
	s.mu.Lock()
	ended := s.expireLocked()
	closed := s.closed
	s.mu.Unlock()
	if ended {
		s.logEnded()
	}
	if s.ctx.Err() == nil {
		return nil
	}
	if closed {
		return store.ErrClosed
	}
	return context.Cause(s.ctx)
}

// end ends the session with cause, unless it has ended already.
func (s *Store) end(cause error) {
	s.mu.Lock()
	ended := s.endLocked(cause)
	s.mu.Unlock()
	if ended {
		s.logEnded()
	}
}

// endLocked ends the session with cause, unless it has ended already, and
// reports whether it did. s.mu is held; the caller logs the end once it
// has let go of s.mu (a handler may call the Store).
func (s *Store) endLocked(cause error) bool {
	if s.ctx.Err() != nil {
		return false
	}
	s.stopLocked(cause)
	s.setDisconnectedLocked()
	return true
}

// stopLocked cancels the session's context with cause, and every attempt
// in flight with it (see call.go). s.mu is held.
func (s *Store) stopLocked(cause error) {
	s.cancel(cause)
}

func (s *Store) logEnded() {
	s.log.Debug("etcdstore: session ended", "lease", s.leaseHex(), "cause", context.Cause(s.ctx))
}

func (s *Store) setDisconnectedLocked() {
	if !s.discClosed {
		close(s.disc)
		s.discClosed = true
	}
}

// probe asks the keepalive loop to renew the lease now.
func (s *Store) probe() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}
