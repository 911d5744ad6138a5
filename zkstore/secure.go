package zkstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/corral-go/corral/store"
)

// credential is one AddAuth of the session.
type credential struct {
	scheme string
	auth   []byte
}

// WithDigestAuth authenticates the session as user with password, in
// ZooKeeper's digest scheme: the session then holds the identity
// digest:user:base64(sha1(user:password)), which ACLs name (see
// zk.DigestACL). user must not be empty or contain ':'. It is WithAuth
// with the scheme "digest" and "user:password"; see WithAuth for when the
// credentials are sent and checked.
func WithDigestAuth(user, password string) Option {
	return func(o *options) {
		if user == "" || strings.Contains(user, ":") {
			o.invalid = append(o.invalid, fmt.Sprintf("digest user %q (empty, or contains ':')", user))
			return
		}
		o.auth = append(o.auth, credential{"digest", []byte(user + ":" + password)})
	}
}

// WithAuth adds credentials in scheme (ZooKeeper's addauth, as
// zk.Conn.AddAuth sends them) to the session. It may be given several
// times. Open sends them once the session is established and before it
// returns; the client sends them again first thing on every reconnection,
// before any other request, so the session never acts without them.
//
// Open fails with [store.ErrAuth] when the server refuses them (an unknown
// scheme). A digest password, which the server does not check when it is
// given but only against the ACLs it meets, is checked against the ACL of
// the Store's root (the chroot node, or "/"): Open fails with
// [store.ErrAuth] when that ACL names the user and the session does not
// hold that identity (a wrong password). A wrong password elsewhere shows
// as [store.ErrPermission] on the nodes it does not open.
//
// With a digest user, the nodes the Store creates get [CreatorACL] unless
// [WithACL] says otherwise.
func WithAuth(scheme string, auth []byte) Option {
	return func(o *options) {
		if scheme == "" {
			o.invalid = append(o.invalid, "auth scheme \"\"")
			return
		}
		o.auth = append(o.auth, credential{scheme, slices.Clone(auth)})
	}
}

// CreatorACL returns the ACL a Store whose session holds an identity
// gives the nodes it creates unless [WithACL] says otherwise: every right
// to the identities the creating session holds (ZooKeeper's "auth"
// scheme, which the server expands when it creates the node: its digest
// users, and over TLS its client certificate's identity, x509:<subject DN>
// by default), and read to anyone. It is Curator's CREATOR_ALL_ACL plus
// READ_ACL_UNSAFE. A session holds an identity when it has a digest user,
// or a client certificate that the server authenticated
// (ssl.clientAuth=need, ZooKeeper's default, or want); a certificate alone
// is enough.
//
// Deleting a node takes the delete right on its parent; corral's recipes
// create their directories with the same ACL, so the nodes of a lock or an
// election can be deleted only by the identity that made the directory.
// Sessions of other identities cannot contend there either (creating a
// node takes the create right on the parent): for a lock shared by
// several identities, give WithACL an ACL that names them all, bearing in
// mind that ZooKeeper cannot let an identity delete its own nodes in a
// directory without letting it delete the others'.
func CreatorACL() []zk.ACL {
	return []zk.ACL{
		{Perms: zk.PermAll, Scheme: "auth", ID: ""},
		{Perms: zk.PermRead, Scheme: "world", ID: "anyone"},
	}
}

// WithACL sets the ACL of every node the Store creates: the nodes asked
// for, the parents it creates for them, and the chroot node if Open
// creates it. The default is [CreatorACL] for a session that holds an
// identity (a digest user, or a client certificate the server
// authenticated), and zk.WorldACL(zk.PermAll) (anyone may do anything)
// for one that holds none, which Open then logs at Warn (see
// [WithIdentityRequired] to refuse such sessions). An empty ACL fails Open
// with [store.ErrInvalidArgument]; one the server refuses (the "auth"
// scheme for a session that holds no identity) fails each create with it.
func WithACL(acl []zk.ACL) Option {
	return func(o *options) {
		if len(acl) == 0 {
			o.invalid = append(o.invalid, "empty ACL")
			return
		}
		o.acl = slices.Clone(acl)
	}
}

// WithChroot makes the Store's tree the subtree at path, as a ZooKeeper
// connect string's chroot suffix ("host:2181/app") does for ZooKeeper's own
// clients: the Store's "/" is the server's path, its "/lock" is
// path+"/lock", and it never reads or writes above path. Open creates path
// and its missing ancestors (with the Store's ACL) when path does not
// exist, and fails with [store.ErrPermission] when it may not. path must
// be a valid absolute path ([store.ValidatePath]); "/" means no chroot.
func WithChroot(path string) Option {
	return func(o *options) {
		if err := store.ValidatePath(path); err != nil {
			o.invalid = append(o.invalid, fmt.Sprintf("chroot %q: %v", path, err))
			return
		}
		o.chroot = path
		if path == "/" {
			o.chroot = ""
		}
	}
}

// WithTLS makes the Store talk to the servers over TLS, as configured by
// cfg: ZooKeeper's secure client port (secureClientPort, served by its
// Netty connection factory). Set cfg.RootCAs to the CA that signed the
// servers' certificates and, where the servers require client
// certificates (ssl.clientAuth=need, ZooKeeper's default), cfg.Certificates
// to the client's; the server then also authenticates the session as
// x509:<the certificate's subject DN>, an identity that [CreatorACL] and
// other ACLs can name: a certificate alone makes the nodes the Store
// creates its own. An empty cfg.ServerName is set to the host of each
// server's address, so the address must be one the certificate names.
//
// The TLS handshake is part of connecting: it is bounded like the rest of
// the handshake (the session timeout divided by the number of servers).
// A client certificate out of its validity period fails Open with
// [store.ErrAuth] before it dials, saying so. When every server fails the
// handshake on a certificate, either side's (an unknown authority, no
// client certificate), Open fails at once with [store.ErrAuth]; other
// failures (a server that does not speak TLS) make Open wait for its ctx,
// and its error then names the last one.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) {
		if cfg == nil {
			o.invalid = append(o.invalid, "nil TLS config")
			return
		}
		o.tls = cfg.Clone()
	}
}

// checkCertificates fails with store.ErrAuth when a client certificate of
// cfg is out of its validity period: the server would refuse it with an
// alert that does not say why, after a handshake, while the client can
// tell before it dials.
func checkCertificates(cfg *tls.Config, now time.Time) error {
	if cfg == nil {
		return nil
	}
	for _, c := range cfg.Certificates {
		leaf := c.Leaf
		if leaf == nil && len(c.Certificate) > 0 {
			var err error
			if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
				return fmt.Errorf("%w: client certificate: %v", store.ErrInvalidArgument, err)
			}
		}
		switch {
		case leaf == nil:
		case now.After(leaf.NotAfter):
			return fmt.Errorf("%w: the client certificate %q expired at %s", store.ErrAuth, leaf.Subject, leaf.NotAfter.UTC().Format(time.RFC3339))
		case now.Before(leaf.NotBefore):
			return fmt.Errorf("%w: the client certificate %q is not valid until %s", store.ErrAuth, leaf.Subject, leaf.NotBefore.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// setUp readies a new session for its caller: it authenticates it, finds
// whether it holds an identity and chooses the default ACL by that, checks
// its credentials against its root and creates the chroot if missing. It
// retries across lost connections until the session ends or the caller
// leaves.
func (s *Store) setUp(left *caller, o *options) error {
	for _, c := range o.auth {
		if err := s.retry(left, func() error { return s.conn.AddAuth(c.scheme, c.auth) }); err != nil {
			if errors.Is(err, zk.ErrAuthFailed) {
				return fmt.Errorf("%w: the server refused the %q credentials (%w)", store.ErrAuth, c.scheme, err)
			}
			return err
		}
	}
	if err := s.chooseACL(left, o); err != nil {
		return err
	}
	if len(o.auth) == 0 && s.conn.root == "" {
		return nil
	}
	var acl []zk.ACL
	err := s.retry(left, func() error {
		var err error
		acl, _, err = s.conn.GetACL("/")
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode) && s.conn.root != "":
		return s.makeChroot(left)
	case errors.Is(err, zk.ErrNoAuth):
		return fmt.Errorf("%w: the session's identities may neither read nor administer the root %s (%w)", store.ErrPermission, s.rootName(), err)
	case err != nil:
		return err
	}
	for _, c := range o.auth {
		if err := s.checkDigest(acl, c); err != nil {
			return err
		}
	}
	return nil
}

// ErrNoIdentity is what Open fails with, wrapped beside [store.ErrAuth],
// when [WithIdentityRequired] is given and the session holds no identity.
var ErrNoIdentity = errors.New("zkstore: the session holds no identity")

// WithIdentityRequired makes Open fail with an error wrapping
// [ErrNoIdentity] and [store.ErrAuth] when the session holds no identity
// an ACL can name: no digest user, and no client certificate that the
// server authenticated (one it did not ask for, with ssl.clientAuth=none,
// is no identity). Without it such a session opens, and the nodes it
// creates are open to everyone unless [WithACL] says otherwise; Open then
// says so on the Store's logger, at Warn, in a record whose "cause"
// attribute is an error wrapping ErrNoIdentity that says why (so that a
// handler can tell it from the rest, as the corral command does).
func WithIdentityRequired() Option {
	return func(o *options) { o.needIdentity = true }
}

// chooseACL finds whether the session holds an identity, when it is to
// choose the Store's ACL by that or to refuse a session without one, and
// says so when its nodes are to be open to everyone.
func (s *Store) chooseACL(left *caller, o *options) error {
	if o.acl != nil && !o.needIdentity {
		return nil
	}
	held, err := s.holdsIdentity(left, o)
	switch {
	case err != nil:
		return err
	case !held && o.needIdentity:
		return fmt.Errorf("%w: %w: no digest user, and no client certificate the server authenticated", store.ErrAuth, ErrNoIdentity)
	case o.acl != nil:
	case held:
		s.acl = CreatorACL()
	default:
		s.acl = zk.WorldACL(zk.PermAll)
		why := "no credentials and no TLS client certificate"
		if o.tls != nil {
			why = "the server did not authenticate a client certificate (none given, or ssl.clientAuth is not need or want)"
		}
		s.log.Warn("zkstore: the session holds no identity: the nodes it creates are open to everyone (world:anyone:cdrwa); give WithDigestAuth, a client certificate, WithACL, or WithIdentityRequired to refuse such sessions",
			"cause", fmt.Errorf("%w: %s", ErrNoIdentity, why))
	}
	return nil
}

// holdsIdentity reports whether the session holds an identity the "auth"
// scheme can name. A digest user always is one. A client certificate is
// one only if the server asked for it and took it (ZooKeeper's
// X509AuthenticationProvider, whose identity is by default the
// certificate's subject DN), which a client cannot see; so the server is
// asked: it expands an "auth" ACL into the session's identities before it
// looks at the node or the version, and refuses it with INVALIDACL when
// there are none. The request names a version no node has (an ACL version
// is never negative), so it changes nothing whatever the root's ACL.
func (s *Store) holdsIdentity(left *caller, o *options) (bool, error) {
	for _, c := range o.auth {
		if c.scheme == "digest" {
			return true, nil
		}
	}
	if len(o.auth) == 0 && o.tls == nil {
		return false, nil
	}
	err := s.retry(left, func() error {
		_, err := s.conn.SetACL("/", zk.AuthACL(zk.PermAll), probeVersion)
		return err
	})
	switch {
	case errors.Is(err, zk.ErrInvalidACL):
		return false, nil
	case err == nil, errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrNoAuth):
		return true, nil
	}
	return false, fmt.Errorf("find the session's identities: %w", err)
}

// probeVersion is a version no node's ACL has.
const probeVersion = -2

// retry calls f until it returns something other than a connection error,
// waiting for a reconnection in between, or until the session ends or the
// caller leaves.
func (s *Store) retry(left *caller, f func() error) error {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if left.gone() {
				return context.Canceled
			}
			if err := s.pause(attempt - 1); err != nil {
				return err
			}
		}
		if err := s.waitConnected(); err != nil {
			return err
		}
		err := f()
		if !isConnErr(err) || errors.Is(err, zk.ErrClosing) {
			return err
		}
	}
}

// makeChroot creates the chroot and its missing ancestors.
func (s *Store) makeChroot(left *caller) error {
	root := s.conn.root
	for i := 1; i <= len(root); i++ {
		if i < len(root) && root[i] != '/' {
			continue
		}
		p := root[:i]
		err := s.retry(left, func() error {
			_, err := s.conn.zk.Create(p, nil, 0, s.acl)
			return err
		})
		switch {
		case errors.Is(err, zk.ErrNoAuth):
			return fmt.Errorf("%w: cannot create the chroot %s: %s may not be created (%w)", store.ErrPermission, store.ShortPath(root), store.ShortPath(p), err)
		case err != nil && !errors.Is(err, zk.ErrNodeExists):
			return fmt.Errorf("create the chroot %s: %s: %w", store.ShortPath(root), store.ShortPath(p), err)
		}
	}
	return nil
}

func (s *Store) rootName() string {
	if s.conn.root == "" {
		return "/"
	}
	return s.conn.root
}

// checkDigest checks digest credentials against acl, the ACL of the
// Store's root. The server hides the password hashes of digest entries
// from a session without the admin right (it shows "user:x"), so a
// session that sees hashes holds admin, and one that sees "x" in an entry
// that grants admin does not hold that entry's identity.
func (s *Store) checkDigest(acl []zk.ACL, c credential) error {
	if c.scheme != "digest" {
		return nil
	}
	user, password, _ := strings.Cut(string(c.auth), ":")
	ours := zk.DigestACL(0, user, password)[0].ID
	wrong := false
	for _, a := range acl {
		if a.Scheme != "digest" {
			continue
		}
		u, hash, _ := strings.Cut(a.ID, ":")
		switch {
		case u != user:
		case a.ID == ours:
			return nil
		case hash != "x", a.Perms&zk.PermAdmin != 0:
			wrong = true
		}
	}
	if wrong {
		return fmt.Errorf("%w: the ACL of the root %s names digest user %q with another password", store.ErrAuth, s.rootName(), user)
	}
	return nil
}

// handshake runs the TLS handshake on raw, a new connection to addr,
// finished by the time by at the latest.
func (s *Store) handshake(raw net.Conn, addr string, by time.Time) (net.Conn, error) {
	cfg := s.tls
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		cfg.ServerName = addr
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	c := tls.Client(raw, cfg)
	ctx, cancel := context.WithDeadline(s.ctx, by)
	defer cancel()
	if err := c.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("zkstore: TLS handshake with %s: %w", addr, err)
	}
	return c, nil
}

// noteConnErr records why a connection to a server failed before its
// session handshake completed. Before the session is established, a run
// of certificate failures as long as the list of servers ends Open with
// store.ErrAuth: every server was tried, and a certificate does not get
// better by trying again.
func (s *Store) noteConnErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != nil {
		return
	}
	s.lastConnErr = err
	if s.id.Load() != 0 || !isCertErr(err) {
		s.certFails = 0
		return
	}
	s.certFails++
	if s.certFails >= s.nservers && s.refusal == nil {
		s.refusal = fmt.Errorf("%w: %w", store.ErrAuth, err)
		close(s.refused)
	}
}

// isCertErr reports whether err is a TLS handshake failure on a
// certificate: this side's verification of the server's, or the server's
// alert about the client's (which TLS 1.3 delivers on the first read after
// the handshake).
func isCertErr(err error) bool {
	var (
		cve *tls.CertificateVerificationError
		uae x509.UnknownAuthorityError
		cie x509.CertificateInvalidError
		he  x509.HostnameError
		oe  *net.OpError
	)
	if errors.As(err, &cve) || errors.As(err, &uae) || errors.As(err, &cie) || errors.As(err, &he) {
		return true
	}
	if !errors.As(err, &oe) || oe.Op != "remote error" {
		return false
	}
	// crypto/tls reports the peer's alert as its text.
	switch strings.TrimPrefix(oe.Err.Error(), "tls: ") {
	case "bad certificate", "unsupported certificate", "revoked certificate",
		"expired certificate", "unknown certificate", "unknown certificate authority",
		"access denied", "certificate required":
		return true
	}
	return false
}
