package labenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pkiFiles names the certificates and keys the lab writes under its dir.
type pkiFiles struct {
	CACert, CAKey           string
	ServingCert, ServingKey string
	SAPub, SAKey            string
	AdminCert, AdminKey     string
}

func newPKIFiles(dir string) pkiFiles {
	p := func(n string) string { return filepath.Join(dir, "pki", n) }
	return pkiFiles{
		CACert: p("ca.crt"), CAKey: p("ca.key"),
		ServingCert: p("apiserver.crt"), ServingKey: p("apiserver.key"),
		SAPub: p("sa.pub"), SAKey: p("sa.key"),
		AdminCert: p("admin.crt"), AdminKey: p("admin.key"),
	}
}

// writePKI generates a self-signed CA, the API server's serving certificate
// (valid for the given IPs and the in-cluster names), a service-account
// signing key and an admin client certificate (group system:masters).
func writePKI(f pkiFiles, serverIPs []net.IP) error {
	if err := os.MkdirAll(filepath.Dir(f.CACert), 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "netdrift-lab-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writeCertKey(f.CACert, f.CAKey, caDER, caKey); err != nil {
		return err
	}
	serving := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now, NotAfter: caTmpl.NotAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default",
			"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: append([]net.IP{net.IPv4(127, 0, 0, 1)}, serverIPs...),
	}
	if err := signLeaf(f.ServingCert, f.ServingKey, serving, caCert, caKey); err != nil {
		return err
	}
	admin := &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "lab-admin", Organization: []string{"system:masters"}},
		NotBefore:    now, NotAfter: caTmpl.NotAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := signLeaf(f.AdminCert, f.AdminKey, admin, caCert, caKey); err != nil {
		return err
	}
	return writeSAKey(f.SAPub, f.SAKey)
}

func signLeaf(certPath, keyPath string, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("sign %s: %w", tmpl.Subject.CommonName, err)
	}
	return writeCertKey(certPath, keyPath, der, key)
}

func writeCertKey(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
}

// writeSAKey writes the RSA key pair the API server signs service-account
// tokens with (and verifies them against).
func writeSAKey(pubPath, keyPath string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
}

// writeKubeconfig writes an admin kubeconfig for the given server URL.
func writeKubeconfig(path, server string, f pkiFiles) error {
	const tmpl = `apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: admin
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: lab
  context: {cluster: lab, user: admin}
current-context: lab
`
	return os.WriteFile(path, fmt.Appendf(nil, tmpl, server, f.CACert, f.AdminCert, f.AdminKey), 0o600)
}
