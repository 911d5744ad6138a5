package etcdstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	gosync "sync"
	"time"

	"github.com/corral-go/corral/store"
)

// tlsProbe makes one TLS connection of its own to each endpoint of a Dial,
// beside the client's, to learn at once whether a certificate is refused.
// gRPC keeps a failed handshake to itself: a request waits for a usable
// connection until its deadline (clientv3.New's authentication until
// DialTimeout), and under TLS 1.3 a server refuses the client's
// certificate after the client's side of the handshake is done, with an
// alert that gRPC often never reads (its first write meets the closed
// connection, and all it reports is a broken pipe). A probe completes the
// handshake and then reads without writing anything, which yields the
// server's alert; a server that took the certificate says nothing (or
// hangs up on a client that sends nothing), and the probe waits until it
// is stopped.
type tlsProbe struct {
	cancel context.CancelFunc
	wg     gosync.WaitGroup

	mu       gosync.Mutex
	left     int     // probes still running
	refusals []error // each wraps store.ErrAuth
	accepted bool    // an endpoint took the certificate
	stopped  bool    // stop was called: what ends now proves nothing
	fired    bool    // refused was called
}

// startProbe starts a probe of each endpoint with cfg, bounded by ctx.
// When every probe has ended, at least one endpoint refused a certificate
// and none accepted it, none can be used: it calls refused once, from a
// probe's goroutine, with the refusals. An endpoint that cannot be reached
// is no refusal, and one that takes the certificate rules refused out.
// A nil cfg starts nothing and returns nil, a probe that never refuses.
func startProbe(ctx context.Context, cfg *tls.Config, endpoints []string, refused func(error)) *tlsProbe {
	if cfg == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &tlsProbe{cancel: cancel, left: len(endpoints)}
	for _, ep := range endpoints {
		p.wg.Go(func() {
			if refusal := p.ended(handshake(ctx, cfg, ep)); refusal != nil {
				refused(refusal)
			}
		})
	}
	return p
}

// ended records one probe's result. It returns the refusals when this was
// the last probe, there are some and no endpoint accepted, else nil.
func (p *tlsProbe) ended(refusal error, accepted bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if refusal != nil {
		p.refusals = append(p.refusals, refusal)
	}
	p.accepted = p.accepted || accepted
	p.left--
	if p.left > 0 || len(p.refusals) == 0 || p.accepted || p.stopped {
		return nil
	}
	p.fired = true
	return errors.Join(p.refusals...)
}

// stop ends the probes and waits for them. It returns the refusals seen
// (nil if none) and whether refused was called. A nil p returns nil, false.
func (p *tlsProbe) stop() (refusals error, fired bool) {
	if p == nil {
		return nil, false
	}
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return errors.Join(p.refusals...), p.fired
}

// handshake makes one TLS connection to endpoint ep with cfg and reads
// from it until the server says something, closes it, or ctx ends. It
// returns an error wrapping store.ErrAuth that names the endpoint when
// either side refused a certificate, and whether the handshake was done
// and no refusal followed it (the server took the certificate).
func handshake(ctx context.Context, cfg *tls.Config, ep string) (refusal error, accepted bool) {
	host := ep
	if u, err := url.Parse(ep); err == nil && u.Host != "" {
		host = u.Host
	}
	c := cfg.Clone()
	if h, _, err := net.SplitHostPort(host); err == nil && c.ServerName == "" {
		c.ServerName = h
	}
	// Under TLS 1.2 a server that requires a client certificate and gets
	// none says only "handshake failure", as it does of other mismatches:
	// noting what it asked for and what was sent tells them apart.
	var asked, sentNone bool
	choose := clientCertificate(cfg)
	c.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
		cert, err := choose(cri)
		asked, sentNone = true, err == nil && len(cert.Certificate) == 0
		return cert, err
	}
	conn, err := (&tls.Dialer{Config: c}).DialContext(ctx, "tcp", host)
	if err == nil {
		stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Now()) })
		_, err = conn.Read(make([]byte, 1))
		stop()
		conn.Close()
		if err == nil || !isCertRefusal(err) {
			// The server took the certificate: it spoke, or
			// hung up without an alert.
			return nil, true
		}
	}
	switch {
	case isCertRefusal(err):
		return fmt.Errorf("%w: the TLS handshake with %s failed on a certificate: %w", store.ErrAuth, host, err), false
	case asked && sentNone && strings.Contains(err.Error(), "tls: handshake failure"):
		return fmt.Errorf("%w: the TLS handshake with %s failed: it asked for a client certificate and the client had none its CAs signed: %w", store.ErrAuth, host, err), false
	}
	return nil, false
}

// clientCertificate returns how crypto/tls chooses cfg's client
// certificate: cfg's own GetClientCertificate, else the first of
// cfg.Certificates the server accepts, else none.
func clientCertificate(cfg *tls.Config) func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	if cfg.GetClientCertificate != nil {
		return cfg.GetClientCertificate
	}
	return func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
		for i := range cfg.Certificates {
			if cri.SupportsCertificate(&cfg.Certificates[i]) == nil {
				return &cfg.Certificates[i], nil
			}
		}
		return new(tls.Certificate), nil
	}
}
