package agent

import "sort"

// sourceHealth is the health of every source (the datapath reader, the node
// sources) by name. The agent changes it under its lock.
type sourceHealth map[string]SourceStatus

// record keeps st as its source's health; a failed attempt keeps the time
// of the source's last success.
func (h sourceHealth) record(st SourceStatus) {
	if !st.Up {
		st.LastSuccess = h[st.Name].LastSuccess
	}
	h[st.Name] = st
}

// list is every source's health, by name.
func (h sourceHealth) list() []SourceStatus {
	var out []SourceStatus // nil when there is none
	for _, st := range h {
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
