package agent

import (
	"time"

	"github.com/netdrift/netdrift/internal/datapath"
	"github.com/netdrift/netdrift/internal/model"
)

// FallbackChangeEvents is the Fallback.Reader of the nftables change
// events (events replaced by polling, events dated when read).
const FallbackChangeEvents = "nftables-events"

// judgeLocked sets s.Watch and s.View (s.Now set) from one read of the API
// health, which it returns for the rest of the step.
func (a *Agent) judgeLocked(s *State) APIState {
	api := a.apiState()
	s.Watch = a.watchStatusLocked(s.Now, api)
	a.judgeViewLocked(s, api)
	return api
}

// judgeViewLocked judges the view for s (its Now and Watch set) and sets
// s.View, and s.Ready and s.ReadyReason from it: the agent is ready only
// while its view is current. A change of Current is logged.
func (a *Agent) judgeViewLocked(s *State, api APIState) {
	v, changed := a.view.update(s.Now, viewInput{watch: s.Watch, api: api, read: a.read, behind: a.gen.behind(),
		behindLimit: a.cfg.StaleAfter})
	s.View = v
	s.Ready, s.ReadyReason = v.Current, v.Reason
	if !changed {
		return
	}
	if v.Current {
		a.log.Info("view current: the cluster's watch and the datapath read are current again")
	} else {
		a.log.Warn("no current view: answers say so until it is back", "code", v.Code, "reason", v.Reason, "last_err", v.LastError)
	}
}

// noteReadLocked records a finished datapath read for the view: err is
// its error ("" when it succeeded); a read of mode none found no
// kube-proxy state.
func (a *Agent) noteReadLocked(now time.Time, err string) {
	none := ""
	if err == "" && (a.src == nil || a.mode == "" || a.mode == model.ModeNone) {
		none = a.reason
		if none == "" {
			none = "no reader"
		}
	}
	a.read.record(now, err, none)
}

// noteFallbackLocked keeps the reader's fallback in force, if it reports one.
func (a *Agent) noteFallbackLocked(fr datapath.FallbackReporter, ok bool) {
	a.readerFB = Fallback{}
	if !ok {
		return
	}
	if from, to, why, since := fr.Fallback(); from != "" {
		a.readerFB = Fallback{Reader: a.src.Name(), From: from, To: to, Reason: why, Since: since}
	}
}

// fallbacksLocked is every fallback in force: the reader's, then those
// known at start or met by the loop. Nil when none.
func (a *Agent) fallbacksLocked() []Fallback {
	var out []Fallback
	if a.readerFB.Reader != "" {
		out = append(out, a.readerFB)
	}
	return append(out, a.degraded...)
}
