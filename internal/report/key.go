package report

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"
)

// Key is a report's change key: the set of stale findings (kind, service,
// frontend, backend, subject), whether the view is current and its code, whether the
// watch is healthy, the degraded set and the datapath. A report is written
// when its key changes; pending counts and lag percentiles ride along with
// those writes and the heartbeat but do not cause one.
func Key(in Inputs) string {
	ids := make([]string, 0, len(in.Findings))
	for _, f := range in.Findings {
		ids = append(ids, Identity(f))
	}
	sort.Strings(ids)
	st := in.Status
	var b strings.Builder
	b.WriteString("datapath=" + st.Datapath + "\n")
	if st.View != nil {
		b.WriteString("view=" + strconv.FormatBool(st.View.Current) + "/" + st.View.Code + "\n")
	}
	b.WriteString("watch=" + strconv.FormatBool(st.Watch.Healthy) + "\n")
	for _, d := range Degraded(st) {
		b.WriteString("degraded=" + d + "\n")
	}
	for _, id := range ids {
		b.WriteString("finding=" + id + "\n")
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:12])
}
