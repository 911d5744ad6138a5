package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/connectivity"

	"github.com/corral-go/corral/store"
)

// The session's lease is renewed with one KeepAliveOnce when a third of its
// TTL has passed since the sending of the last acknowledged renewal, by the
// keepalive loop, and on demand by a call made while the client is
// disconnected (see begin).
//
// The expiry rule: a renewal sent at time t and acknowledged makes the
// server's lease last until at least t+TTL, because the server renewed it
// after t. The server can only expire the lease, and so hand the session's
// locks to someone else, after that. So the session's deadline is (send
// time of the latest acknowledged renewal) + TTL, on the client's monotonic
// clock, and the session ends with ErrSessionExpired the moment the deadline
// passes without a newer acknowledgement, whether or not the server has
// expired the lease yet. clientv3's own KeepAlive counts the TTL from the
// arrival of the reply instead, which can be later than the server's expiry
// by the reply's latency; hence this loop. A leader change or a server
// restart only extends leases, never shortens them, so the rule holds
// through them. A renewal answered with "lease not found" (revoked, or
// expired on the server) ends the session at once.
//
// The deadline is enforced where session state is read, not only by the
// loop's timer, which may run late on a loaded machine: at the start of
// every call (begin), in Context and Disconnected, and when a reply
// arrives (do, renew, serve). A reply that arrives after the deadline
// proves nothing about the moment the server handled it: the server may
// have expired the lease and handed the session's locks on before, so it
// ends the session instead of counting as a success. As the deadline only
// moves at acknowledgements that arrive before it, the session is alive
// at a moment exactly when the deadline known at that moment lies ahead.
//
// A renewal that fails while the deadline is ahead (no connection, no
// leader, timeout) reports a disconnection, and renewals are then retried
// every 250 ms; the first one that succeeds reports the reconnection.

// expiredCause is the cause of a session whose deadline passed.
func (s *Store) expiredCause() error {
	return fmt.Errorf("%w: lease %x not renewed within its TTL (%v)", store.ErrSessionExpired, int64(s.lease), s.ttl)
}

// expireLocked ends the session if its deadline has passed, and reports
// whether it did. s.mu is held.
func (s *Store) expireLocked() bool {
	if s.ctx.Err() == nil && !time.Now().Before(s.deadline) {
		return s.endLocked(s.expiredCause())
	}
	return false
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
		// An acknowledgement that arrives after the deadline comes too
		// late: the session ended at the deadline.
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

// keepAlive renews the lease until the session ends, and ends it when the
// deadline passes.
func (s *Store) keepAlive() {
	defer s.wg.Done()
	retry := min(s.ttl/3, 250*time.Millisecond)
	attempt := min(max(min(s.ttl/5, 2*time.Second), 500*time.Millisecond), s.attempt)
	next := time.NewTimer(s.untilRenewal())
	defer next.Stop()
	expiry := time.NewTimer(time.Until(s.leaseDeadline()))
	defer expiry.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-expiry.C:
			if left := time.Until(s.leaseDeadline()); left > 0 {
				expiry.Reset(left) // renewed by a call meanwhile
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
		ctx, cancel := context.WithTimeout(s.ctx, max(min(attempt, time.Until(s.leaseDeadline())), time.Millisecond))
		err := s.renew(ctx)
		cancel()
		switch {
		case s.ctx.Err() != nil:
			return
		case err == nil:
			expiry.Reset(time.Until(s.leaseDeadline()))
			next.Reset(s.untilRenewal())
		default: // renew reported the disconnection
			next.Reset(retry)
		}
	}
}

// untilRenewal returns the time until the next scheduled renewal: when a
// third of the TTL has passed since the last acknowledged renewal was sent,
// so that two more attempts fit before the deadline.
func (s *Store) untilRenewal() time.Duration {
	return max(time.Until(s.leaseDeadline())-(s.ttl-s.ttl/3), 0)
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
