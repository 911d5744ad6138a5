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

// The session's lease is renewed with one KeepAliveOnce every TTL/3, by the
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
// A renewal that fails while the deadline is ahead (no connection, no
// leader, timeout) reports a disconnection, and renewals are then retried
// every 250 ms; the first one that succeeds reports the reconnection.

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
		if d := sent.Add(time.Duration(resp.TTL) * time.Second); d.After(s.deadline) {
			s.deadline = d
		}
		if sent.After(s.lastRenewal) {
			s.lastRenewal = sent
		}
		if s.discClosed && s.ctx.Err() == nil {
			s.disc = make(chan struct{})
			s.discClosed = false
		}
		s.mu.Unlock()
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
	if !s.lastRenewal.After(sent) {
		s.setDisconnectedLocked()
	}
	s.mu.Unlock()
	return err
}

// keepAlive renews the lease until the session ends, and ends it when the
// deadline passes.
func (s *Store) keepAlive() {
	defer s.wg.Done()
	interval := s.ttl / 3
	retry := min(interval, 250*time.Millisecond)
	attempt := max(min(s.ttl/5, 2*time.Second), 500*time.Millisecond)
	next := time.NewTimer(interval)
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
			s.end(fmt.Errorf("%w: lease %x not renewed within its TTL (%v)", store.ErrSessionExpired, int64(s.lease), s.ttl))
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
			next.Reset(interval)
		default: // renew reported the disconnection
			next.Reset(retry)
		}
	}
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
