package ipvs

import (
	"fmt"
	"strings"
)

// isListOutput reports whether data is `ipvsadm -L -n` output (what people
// paste) rather than `ipvsadm -S -n`: its banner or column header.
func isListOutput(data []byte) bool {
	s := string(data)
	return strings.Contains(s, "IP Virtual Server version") || strings.Contains(s, "Prot LocalAddress:Port")
}

// listLine turns one `ipvsadm -Ln` line into the tokens of the equivalent
// `ipvsadm -Sn` line ("" service when the line adds nothing):
//
//	TCP  10.96.0.10:53 rr persistent 10800  ->  -A -t 10.96.0.10:53 -s rr -p 10800
//	  -> 10.244.0.2:53  Masq  1  0  0       ->  -a -t 10.96.0.10:53 -r 10.244.0.2:53 -m -w 1
//
// svc is the service option pair of the last service line ("-t", addr).
func listLine(fields []string, svc []string) (tok, newSvc []string, err error) {
	switch fields[0] {
	case "IP", "Prot":
		return nil, svc, nil // banner, column header
	case "->":
		if len(fields) >= 2 && fields[1] == "RemoteAddress:Port" {
			return nil, svc, nil
		}
		if svc == nil {
			return nil, svc, fmt.Errorf("real server before any virtual service")
		}
		if len(fields) < 4 {
			return nil, svc, fmt.Errorf("want \"-> address:port forward weight ...\"")
		}
		fwd, ok := map[string]string{"Masq": "-m", "Route": "-g", "Local": "-g", "Tunnel": "-i"}[fields[2]]
		if !ok {
			return nil, svc, fmt.Errorf("unknown forwarding method %q (want Masq, Route, Local or Tunnel)", fields[2])
		}
		tok = append(append([]string{"-a"}, svc...), "-r", fields[1], fwd, "-w", fields[3])
		return tok, svc, nil
	}
	opt, ok := map[string]string{"TCP": "-t", "UDP": "-u", "SCTP": "--sctp-service", "FWM": "-f"}[fields[0]]
	if !ok {
		return nil, svc, fmt.Errorf("not a line of `ipvsadm -Ln` output")
	}
	if len(fields) < 3 {
		return nil, svc, fmt.Errorf("want \"PROTO address:port scheduler [flags]\"")
	}
	svc = []string{opt, fields[1]}
	tok = append(append([]string{"-A"}, svc...), "-s", fields[2])
	for i := 3; i < len(fields); i++ {
		switch fields[i] {
		case "persistent":
			tok = append(tok, "-p")
		case "mask":
			tok = append(tok, "-M")
		case "pe":
			tok = append(tok, "--pe")
		case "ops":
			tok = append(tok, "-o")
		default:
			if strings.HasPrefix(fields[i], "(") { // "(flag-1,flag-2)" scheduler flags
				continue
			}
			tok = append(tok, fields[i])
		}
	}
	return tok, svc, nil
}
