package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/zkstore"
)

// secureFlags are the credential and TLS flags of every command that talks
// to a store, named as etcdctl names them. Each defaults to an environment
// variable, so that a password never has to be on the command line.
type secureFlags struct {
	user         string
	passwordFile string
	cacert       string
	cert, key    string
	// requireIdentity refuses a ZooKeeper session without an identity;
	// its default is $CORRAL_REQUIRE_IDENTITY, kept in requireEnv for
	// resolve to check.
	requireIdentity bool
	requireEnv      string
}

func (sf *secureFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&sf.user, "user", getenv("CORRAL_USER"), "`NAME` to authenticate as: an etcd user, or a ZooKeeper digest user (default $CORRAL_USER); the password comes from --password-file, $CORRAL_PASSWORD or a prompt")
	fs.StringVar(&sf.passwordFile, "password-file", getenv("CORRAL_PASSWORD_FILE"), "read the password of --user from `FILE`, its first line, which must not be empty (default $CORRAL_PASSWORD_FILE)")
	fs.StringVar(&sf.cacert, "cacert", getenv("CORRAL_CACERT"), "verify the servers' certificates with the CA bundle in `FILE`, and talk TLS (default $CORRAL_CACERT)")
	fs.StringVar(&sf.cert, "cert", getenv("CORRAL_CERT"), "present the client certificate in `FILE` over TLS (default $CORRAL_CERT)")
	fs.StringVar(&sf.key, "key", getenv("CORRAL_KEY"), "the key of --cert, in `FILE` (default $CORRAL_KEY)")
	sf.requireEnv = getenv("CORRAL_REQUIRE_IDENTITY")
	def, _ := strconv.ParseBool(sf.requireEnv)
	fs.BoolVar(&sf.requireIdentity, "require-identity", def, "ZooKeeper: refuse a session that holds no identity (no --user, and no --cert the server authenticated), whose nodes anyone could change or delete, instead of warning (default $CORRAL_REQUIRE_IDENTITY)")
}

// credentials are what a store is reached with, resolved from the flags,
// the environment and the store URL.
type credentials struct {
	user, password  string
	tls             *tls.Config // nil: plain TCP
	requireIdentity bool        // refuse a ZooKeeper session without one
}

// resolve reads the password and the certificates the flags name. urlUser
// is the user named in the store URL, if any; wantTLS says whether the URL
// asked for TLS.
func (sf *secureFlags) resolve(e *env, urlUser string, wantTLS bool) (credentials, error) {
	var c credentials
	if sf.requireEnv != "" {
		if _, err := strconv.ParseBool(sf.requireEnv); err != nil {
			return c, fmt.Errorf("%w: $CORRAL_REQUIRE_IDENTITY=%q: want true or false", errUsage, sf.requireEnv)
		}
	}
	c.requireIdentity = sf.requireIdentity
	c.user = sf.user
	switch {
	case urlUser != "" && c.user != "" && urlUser != c.user:
		return c, fmt.Errorf("%w: the store URL names user %q and --user %q", errUsage, urlUser, c.user)
	case urlUser != "":
		c.user = urlUser
	}
	if strings.Contains(c.user, ":") {
		return c, fmt.Errorf("%w: --user has a ':': a password on the command line is visible to every user of the machine; give it in --password-file, $CORRAL_PASSWORD or at the prompt", errUsage)
	}
	if c.user != "" {
		pw, err := sf.password(e, c.user)
		if err != nil {
			return c, err
		}
		c.password = pw
	}
	if sf.cacert == "" && sf.cert == "" && sf.key == "" && !wantTLS {
		return c, nil
	}
	if (sf.cert == "") != (sf.key == "") {
		return c, fmt.Errorf("%w: --cert and --key go together", errUsage)
	}
	c.tls = &tls.Config{MinVersion: tls.VersionTLS12}
	if sf.cacert != "" {
		pem, err := os.ReadFile(sf.cacert)
		if err != nil {
			return c, fmt.Errorf("%w: --cacert: %v", errUsage, err)
		}
		c.tls.RootCAs = x509.NewCertPool()
		if !c.tls.RootCAs.AppendCertsFromPEM(pem) {
			return c, fmt.Errorf("%w: --cacert %s: no PEM certificate in it", errUsage, sf.cacert)
		}
	}
	if sf.cert != "" {
		pair, err := tls.LoadX509KeyPair(sf.cert, sf.key)
		if err != nil {
			return c, fmt.Errorf("%w: --cert/--key: %v", errUsage, err)
		}
		// Said here, before dialing: a server refuses an expired
		// certificate with an alert that does not say when it
		// expired.
		switch now := time.Now(); {
		case pair.Leaf == nil:
		case now.After(pair.Leaf.NotAfter):
			return c, fmt.Errorf("%w: --cert %s expired at %s", store.ErrAuth, sf.cert, pair.Leaf.NotAfter.UTC().Format(time.RFC3339))
		case now.Before(pair.Leaf.NotBefore):
			return c, fmt.Errorf("%w: --cert %s is not valid until %s", store.ErrAuth, sf.cert, pair.Leaf.NotBefore.UTC().Format(time.RFC3339))
		}
		c.tls.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// password returns the password of --user: from --password-file, else
// $CORRAL_PASSWORD, else asked on the terminal. An empty password is
// refused, wherever it comes from: the stores take it for no password
// (ZooKeeper's digest, for one, then authenticates as a user nobody set
// up, and a session with a certificate acts as the certificate alone).
func (sf *secureFlags) password(e *env, user string) (string, error) {
	pw, from, err := sf.readPassword(e, user)
	if err != nil {
		return "", err
	}
	if pw == "" {
		return "", fmt.Errorf("%w: %w for user %q (from %s)", errUsage, errEmptyPassword, user, from)
	}
	return pw, nil
}

// errEmptyPassword says that the password of --user is empty.
var errEmptyPassword = errors.New("empty password")

func (sf *secureFlags) readPassword(e *env, user string) (pw, from string, err error) {
	if sf.passwordFile != "" {
		from = "--password-file " + sf.passwordFile
		data, err := os.ReadFile(sf.passwordFile)
		if err != nil {
			return "", from, fmt.Errorf("%w: --password-file: %v", errUsage, err)
		}
		line, _, _ := strings.Cut(string(data), "\n")
		return strings.TrimSuffix(line, "\r"), from, nil
	}
	if pw := e.getenv("CORRAL_PASSWORD"); pw != "" {
		return pw, "$CORRAL_PASSWORD", nil
	}
	pw, err = prompt(fmt.Sprintf("Password for %s: ", user))
	if err != nil {
		return "", "", fmt.Errorf("%w: %w for user %q: $CORRAL_PASSWORD is empty or unset, and there is no --password-file (%v)", errUsage, errEmptyPassword, user, err)
	}
	return pw, "the terminal", nil
}

// errNoTerminal says that there is no terminal to ask for a password on.
var errNoTerminal = errors.New("no terminal to ask on")

// prompt asks for a password on the controlling terminal (as ssh and sudo
// do, so that corral's own stdin stays the command's), without echo.
func prompt(question string) (string, error) {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return "", errNoTerminal
	}
	defer tty.Close()
	restore, err := noEcho(tty)
	if err != nil {
		return "", err
	}
	fmt.Fprint(tty, question)
	line, err := bufio.NewReader(tty).ReadString('\n')
	restore()
	fmt.Fprintln(tty)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// identityWarning is the log handler of a ZooKeeper session: it shows on w
// zkstore's warning that the session holds no identity (the record whose
// cause wraps zkstore.ErrNoIdentity), in the command line's terms, and
// nothing else: what else goes wrong, the command reports as its error.
type identityWarning struct{ w io.Writer }

func (h identityWarning) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h identityWarning) Handle(_ context.Context, r slog.Record) error {
	var cause error
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && errors.Is(err, zkstore.ErrNoIdentity) {
			cause = err
			return false
		}
		return true
	})
	if cause == nil {
		return nil
	}
	_, err := fmt.Fprintf(h.w, "corral: warning: %v: the nodes this session creates are open to everyone (world:anyone:cdrwa), who may change or delete them; give --user, or a --cert the server authenticates; --require-identity refuses such sessions\n", cause)
	return err
}

func (h identityWarning) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h identityWarning) WithGroup(string) slog.Handler      { return h }
