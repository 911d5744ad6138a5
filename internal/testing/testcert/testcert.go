// Package testcert makes TLS certificates for tests: a certificate
// authority of its own and the server and client certificates it signs,
// written as PEM files (for servers that read files: ZooKeeper, etcd) and
// offered as tls.Configs (for Go clients). Nothing is installed on the
// machine: the keys are ECDSA P-256, made in a few milliseconds.
//
// It is test-only, like every package under internal/testing: _test.go
// files and the other internal/testing packages import it; code that ships
// never does (test.sh checks).
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority that signs the certificates of a test.
type CA struct {
	// File is the CA's certificate, PEM, for servers to trust clients by
	// and clients to trust servers by.
	File string

	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

// Pair is a certificate and its key.
type Pair struct {
	// CertFile holds the certificate, KeyFile its key (PKCS #8), and
	// BundleFile both, the key first: the PEM key store ZooKeeper reads.
	CertFile, KeyFile, BundleFile string
	// Cert is the pair as crypto/tls uses it.
	Cert tls.Certificate
}

// New makes a CA whose files go into dir.
func New(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &CA{File: filepath.Join(dir, name+"-ca.pem"), dir: dir, cert: cert, key: key, pool: x509.NewCertPool()}
	ca.pool.AddCert(cert)
	if err := writePEM(ca.File, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return ca, nil
}

// ForTest makes a CA in t.TempDir() and fails t if it cannot.
func ForTest(t testing.TB, name string) *CA {
	t.Helper()
	ca, err := New(t.TempDir(), name)
	if err != nil {
		t.Fatalf("testcert: %v", err)
	}
	return ca
}

// Pool returns a pool that holds the CA's certificate alone.
func (ca *CA) Pool() *x509.CertPool { return ca.pool }

// Server makes a server certificate for 127.0.0.1, ::1, localhost and
// hosts, named name.
func (ca *CA) Server(name string, hosts ...string) (Pair, error) {
	return ca.issueValid(name, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), hosts,
		x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
}

// Client makes a client certificate whose subject is CN=cn.
func (ca *CA) Client(cn string) (Pair, error) {
	return ca.issueValid(cn, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), nil, x509.ExtKeyUsageClientAuth)
}

// MustExpiredClient makes a client certificate whose subject is CN=cn and
// that expired an hour ago; it fails t on an error.
func (ca *CA) MustExpiredClient(t testing.TB, cn string) Pair {
	t.Helper()
	p, err := ca.issueValid(cn, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour), nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		t.Fatalf("testcert: %v", err)
	}
	return p
}

// MustServer is Server for a test: it fails t on an error.
func (ca *CA) MustServer(t testing.TB, name string) Pair {
	t.Helper()
	p, err := ca.Server(name)
	if err != nil {
		t.Fatalf("testcert: %v", err)
	}
	return p
}

// MustClient is Client for a test: it fails t on an error.
func (ca *CA) MustClient(t testing.TB, cn string) Pair {
	t.Helper()
	p, err := ca.Client(cn)
	if err != nil {
		t.Fatalf("testcert: %v", err)
	}
	return p
}

// ClientTLS returns a client configuration that trusts the CA and, for
// each pair given, presents it.
func (ca *CA) ClientTLS(pairs ...Pair) *tls.Config {
	cfg := &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12}
	for _, p := range pairs {
		cfg.Certificates = append(cfg.Certificates, p.Cert)
	}
	return cfg
}

func (ca *CA) issueValid(name string, notBefore, notAfter time.Time, hosts []string, usage ...x509.ExtKeyUsage) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
	}
	for _, u := range usage {
		if u == x509.ExtKeyUsageServerAuth {
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
			tmpl.DNSNames = append([]string{"localhost"}, hosts...)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, err
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	base := filepath.Join(ca.dir, fmt.Sprintf("%s-%x", name, tmpl.SerialNumber.Uint64()))
	p := Pair{CertFile: base + ".pem", KeyFile: base + "-key.pem", BundleFile: base + "-bundle.pem"}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk})
	for file, data := range map[string][]byte{p.CertFile: certPEM, p.KeyFile: keyPEM, p.BundleFile: append(keyPEM, certPEM...)} {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			return Pair{}, err
		}
	}
	if p.Cert, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return Pair{}, err
	}
	return p, nil
}

func writePEM(file, typ string, der []byte) error {
	return os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n.Add(n, big.NewInt(1))
}
