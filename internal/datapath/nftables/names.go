package nftables

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strings"

	"github.com/netdrift/netdrift/internal/model"
)

// Prefixes of kube-proxy's per-service nftables chains. Each is followed by
// an 8-character hash, "-", and "namespace/name/protocol/portname"
// ("...__endpointIP/port" for endpoint chains). Long names are cut and end in
// "..."; the hash (over the untruncated name) is never cut.
const (
	nftPrefixService  = "service-"
	nftPrefixLocal    = "local-"
	nftPrefixExternal = "external-"
	nftPrefixFirewall = "firewall-"
	nftPrefixEndpoint = "endpoint-"
	nftTruncMark      = "..."
	nftHashLen        = 8
)

var nftChainPrefixes = []string{nftPrefixService, nftPrefixLocal, nftPrefixExternal, nftPrefixFirewall, nftPrefixEndpoint}

// ChainBase is the part of kube-proxy's nftables chain names that names a
// service port: "namespace/name/protocol/portname" (protocol in lower case,
// port name empty for an unnamed port).
func ChainBase(sp model.ServicePort) string {
	return sp.Namespace + "/" + sp.Name + "/" + strings.ToLower(string(sp.Protocol)) + "/" + sp.Port
}

// ChainHash is the 8-character hash kube-proxy's nftables mode puts in
// front of a name: the standard base32 encoding of its sha256, cut to 8.
func ChainHash(name string) string {
	sum := sha256.Sum256([]byte(name))
	return base32.StdEncoding.EncodeToString(sum[:])[:nftHashLen]
}

// nftNameIndex resolves per-service chain names to service ports, using the
// service ports known from the API when it has them.
type nftNameIndex struct {
	byHash map[string]model.ServicePort
}

func newNFTNameIndex(known []model.ServicePort) *nftNameIndex {
	ix := &nftNameIndex{byHash: make(map[string]model.ServicePort, len(known))}
	for _, sp := range known {
		ix.byHash[ChainHash(ChainBase(sp))] = sp
	}
	return ix
}

// nftSplitChain splits a per-service chain name into prefix, hash and base.
func nftSplitChain(chain string) (prefix, hash, base string, ok bool) {
	for _, p := range nftChainPrefixes {
		if !strings.HasPrefix(chain, p) {
			continue
		}
		rest := chain[len(p):]
		if len(rest) < nftHashLen+2 || rest[nftHashLen] != '-' {
			return "", "", "", false
		}
		return p, rest[:nftHashLen], rest[nftHashLen+1:], true
	}
	return "", "", "", false
}

// resolve maps a service, local, external or firewall chain name to its
// service port: by hash among the known service ports first (the only way
// for truncated names), else by parsing the name.
func (ix *nftNameIndex) resolve(chain string) (model.ServicePort, error) {
	prefix, hash, base, ok := nftSplitChain(chain)
	if !ok || prefix == nftPrefixEndpoint {
		return model.ServicePort{}, fmt.Errorf("chain %q is not a kube-proxy service chain", chain)
	}
	if sp, ok := ix.byHash[hash]; ok {
		return sp, nil
	}
	if strings.HasSuffix(base, nftTruncMark) {
		return model.ServicePort{}, fmt.Errorf("chain %q: name truncated and hash %s matches no known service port", chain, hash)
	}
	sp, err := nftParseChainBase(base)
	if err != nil {
		return model.ServicePort{}, fmt.Errorf("chain %q: %w", chain, err)
	}
	if ChainHash(base) != hash {
		return sp, fmt.Errorf("chain %q: hash %s does not match its name (not written by kube-proxy?)", chain, hash)
	}
	return sp, nil
}

// nftParseChainBase parses "namespace/name/protocol/portname".
func nftParseChainBase(base string) (model.ServicePort, error) {
	parts := strings.Split(base, "/")
	if len(parts) != 4 || parts[0] == "" || parts[1] == "" {
		return model.ServicePort{}, fmt.Errorf("want namespace/name/protocol/port, got %q", base)
	}
	proto, err := model.ParseProtocol(parts[2])
	if err != nil {
		return model.ServicePort{}, err
	}
	return model.ServicePort{ServiceName: model.ServiceName{Namespace: parts[0], Name: parts[1]}, Port: parts[3], Protocol: proto}, nil
}

// nftParsePortComment parses an element comment, "namespace/name:port" or
// "namespace/name" (kube-proxy's ServicePortName form).
func nftParsePortComment(c string, proto model.Protocol) (model.ServicePort, bool) {
	ns, rest, ok := strings.Cut(c, "/")
	if !ok || ns == "" || rest == "" {
		return model.ServicePort{}, false
	}
	name, port, _ := strings.Cut(rest, ":")
	if name == "" || strings.ContainsAny(ns+name+port, " /:") {
		return model.ServicePort{}, false
	}
	return model.ServicePort{ServiceName: model.ServiceName{Namespace: ns, Name: name}, Port: port, Protocol: proto}, true
}
