package iptables

// rephaseState is rephase's scratch space, kept by the view between calls
// so that regrouping an unchanged (reordered) phase allocates nothing.
type rephaseState struct {
	rules  []*ipRule // the phase's keyed rules, in order
	next   []int32   // per rule: the next rule of its group, -1 none
	groups map[groupKey]rephaseGroup
	tails  map[groupKey]int32
}

// rephaseGroup is one group's rules in the phase: the first (head, -1
// none), and whether rephase has dealt with the group.
type rephaseGroup struct {
	head    int32
	handled bool
}

func (v *ipView) rephaseScratch() *rephaseState {
	if v.scratch == nil {
		v.scratch = &rephaseState{groups: map[groupKey]rephaseGroup{}, tails: map[groupKey]int32{}}
	}
	return v.scratch
}

// add appends a rule to its group's chain.
func (rs *rephaseState) add(key groupKey, r *ipRule) {
	j := int32(len(rs.rules))
	rs.rules, rs.next = append(rs.rules, r), append(rs.next, -1)
	if t, ok := rs.tails[key]; ok {
		rs.next[t] = j
	} else {
		rs.groups[key] = rephaseGroup{head: j}
	}
	rs.tails[key] = j
}

// newSteps gives group g fresh steps for its chain of rules from head,
// placing them in news.
func (rs *rephaseState) newSteps(g *ipGroup, head int32, news []*ipStep) []*ipStep {
	n := 0
	for j := head; j >= 0; j = rs.next[j] {
		n++
	}
	steps := make([]*ipStep, 0, n)
	for j := head; j >= 0; j = rs.next[j] {
		st := &ipStep{r: rs.rules[j], g: g}
		news[j] = st
		steps = append(steps, st)
	}
	return steps
}

// done empties the scratch space, keeping its capacity and no rule.
func (rs *rephaseState) done() {
	clear(rs.rules)
	rs.rules, rs.next = rs.rules[:0], rs.next[:0]
	clear(rs.groups)
	clear(rs.tails)
}
