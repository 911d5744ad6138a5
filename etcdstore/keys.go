package etcdstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"

	"github.com/corral-go/corral/store"
)

// ownKeys starts the keys the adapter keeps for itself: the anchor it
// watches and never writes, and each session's create fence. Without a
// chroot they do not start with '/', so no path of the Store can reach
// them. Under a chroot they are chroot+"/"+ownKeys+..., below the chroot
// with the rest: a role granted the chroot's prefix covers them. A NUL in
// a name keeps them out of every path (see store.ValidatePath), and the
// '/' after it out of every listing (they are never anyone's direct
// child).
const ownKeys = "\x00corral/etcdstore/"

// WithChroot makes the Store's tree the keys below path: its "/" is path,
// its "/lock" is the key path+"/lock", and it reads and writes no key
// outside path+"/" (like clientv3's namespace package with the prefix
// path, at a path boundary). path itself is no key, as the root never is.
//
// That is what a role scoped to a prefix needs. A user whose role grants
// read and write on the prefix "/app/" (etcdctl role grant-permission
// --prefix=true app readwrite /app/) can run every recipe with
// WithChroot("/app"), at the Store's paths "/lock", "/jobs" and so on:
// the keys "/app/lock/...", "/app/jobs/...", and the adapter's own keys
// under "/app/\x00corral/etcdstore/". Without a chroot the same recipe at
// "/app/lock" also writes the parent key "/app" and the adapter's own keys
// "\x00corral/etcdstore/anchor" (read) and "\x00corral/etcdstore/fence/<lease>"
// (read and write), which such a role does not grant.
//
// path must be a valid absolute path ([store.ValidatePath]); "/" means
// no chroot. The Store's paths, and those of the nodes and events it
// returns, are in its own tree.
func WithChroot(path string) Option {
	return func(o *options) {
		if err := store.ValidatePath(path); err != nil {
			o.invalid = fmt.Sprintf("chroot %q: %v", path, err)
			return
		}
		o.chroot = path
		if path == "/" {
			o.chroot = ""
		}
	}
}

// rootName is the server's name of the Store's root, for errors.
func (s *Store) rootName() string {
	if s.chroot == "" {
		return "/"
	}
	return s.chroot
}

// check makes one read within the Store's root (its anchor key), so that
// credentials the server refuses, or a role that grants nothing there,
// fail Open rather than every later call. It retries attempts given up or
// refused for the connection's sake until ctx ends.
func (s *Store) check(ctx context.Context, diag *dialDiag) error {
	var last error
	for i := 0; ; i++ {
		if i > 0 {
			if err := s.sleep(ctx, backoff(i)); err != nil {
				return unreachable(ctx, s.cli, diag, last)
			}
		}
		actx, cancel := context.WithTimeout(ctx, s.attempt)
		_, err := s.kv.Get(actx, s.anchorKey, clientv3.WithCountOnly())
		cancel()
		if err == nil {
			return nil
		}
		if refusal := tlsRefusal(err, diag); refusal != nil {
			return fmt.Errorf("etcdstore: open: %w", refusal)
		}
		if ctx.Err() != nil {
			return unreachable(ctx, s.cli, diag, err)
		}
		cerr := classify(ctx, err)
		if errors.Is(cerr, store.ErrPermission) {
			// With a chroot, the role is what is missing.
			hint := "a role scoped to a prefix needs WithChroot"
			if s.chroot != "" {
				hint = fmt.Sprintf("the user's role must grant read and write on the prefix %s/", s.chroot)
			}
			return fmt.Errorf("etcdstore: open: the user may not read the adapter's keys in %s (%q): %s: %w", s.rootName(), s.anchorKey, hint, cerr)
		}
		if !errors.Is(cerr, store.ErrDisconnected) {
			return fmt.Errorf("etcdstore: open: %w", cerr)
		}
		s.log.Debug("etcdstore: open: read attempt failed", "err", err)
		last = err
	}
}

// authSentinel returns the sentinel an etcd authentication or permission
// error means, or nil. code is err's gRPC code.
func authSentinel(err error, code codes.Code) error {
	switch {
	case code == codes.PermissionDenied, errors.Is(err, rpctypes.ErrPermissionDenied):
		return store.ErrPermission
	case code == codes.Unauthenticated,
		errors.Is(err, rpctypes.ErrAuthFailed), errors.Is(err, rpctypes.ErrUserEmpty),
		errors.Is(err, rpctypes.ErrInvalidAuthToken), errors.Is(err, rpctypes.ErrUserNotFound):
		return store.ErrAuth
	}
	return nil
}

// watchErr is the error of a watch the server cancelled: refused
// (ErrPermission), or most likely for want of a leader (ErrDisconnected).
func watchErr(err error) error {
	if sentinel := authSentinel(err, codeOf(err)); sentinel != nil {
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	return fmt.Errorf("%w: %w", store.ErrDisconnected, err)
}

// tlsRefusal returns the error of an Open whose first request failed
// because a TLS handshake failed on a certificate (either side's), or nil.
// Trying again cannot help. gRPC keeps the handshake's error only as text,
// in the status it fails requests with (or, when Dial made the client, in
// the last error its interceptor saw).
func tlsRefusal(err error, diag *dialDiag) error {
	if diag != nil {
		if p := diag.last.Load(); p != nil && isCertRefusal(*p) {
			err = *p
		}
	}
	if !isCertRefusal(err) {
		return nil
	}
	return fmt.Errorf("%w: the TLS handshake failed on a certificate: %w", store.ErrAuth, err)
}

// certTexts are what crypto/tls says of certificate failures: its own
// verification of the server's, and the server's alerts about the
// client's.
var certTexts = []string{
	"x509: ",
	"tls: failed to verify certificate",
	"tls: bad certificate",
	"tls: unsupported certificate",
	"tls: revoked certificate",
	"tls: expired certificate",
	"tls: unknown certificate",
	"tls: unknown certificate authority",
	"tls: access denied",
	"tls: certificate required",
}

func isCertRefusal(err error) bool {
	var (
		verify    *tls.CertificateVerificationError
		authority x509.UnknownAuthorityError
		invalid   x509.CertificateInvalidError
		hostname  x509.HostnameError
	)
	if errors.As(err, &verify) || errors.As(err, &authority) || errors.As(err, &invalid) || errors.As(err, &hostname) {
		return true
	}
	msg := err.Error()
	for _, t := range certTexts {
		if strings.Contains(msg, t) {
			return true
		}
	}
	return false
}
