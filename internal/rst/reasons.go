package rst

import "strconv"

// defaultReasons are the values of enum sk_rst_reason that have been stable
// since it appeared (6.10); the running kernel's table is read from the
// tracepoint format when available and overrides these.
var defaultReasons = map[uint16]string{
	ReasonNotSpecified: "NOT_SPECIFIED",
	ReasonNoSocket:     "NO_SOCKET",
}

type reasonTable map[uint16]string

func newReasonTable(fromKernel map[uint16]string) reasonTable {
	t := reasonTable{}
	for k, v := range defaultReasons {
		t[k] = v
	}
	for k, v := range fromKernel {
		t[k] = v
	}
	return t
}

func (t reasonTable) name(code uint16) string {
	if code == ReasonUnknown {
		return "UNKNOWN"
	}
	if n, ok := t[code]; ok {
		return n
	}
	return "REASON_" + strconv.Itoa(int(code))
}
