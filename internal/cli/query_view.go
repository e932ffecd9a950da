package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/netdrift/netdrift/internal/api"
)

// blind reports whether an answer rests on no current view. An answer
// without a view (an agent that does not report it) is taken as it is.
func blind(v *api.View) bool { return v != nil && !v.Current }

// noViewLine is the line every answer without a current view starts with:
// why, since when, and the error behind it.
func noViewLine(v *api.View) string {
	s := "no view: " + v.Reason
	if !v.Since.IsZero() {
		s += "; since " + v.Since.UTC().Format(time.RFC3339)
	}
	if v.LastError != "" {
		s += "; last error: " + v.LastError
	}
	return s
}

// sayNoView prints the "no view" line of a blind answer, before the table
// on stdout, or on stderr when stdout carries a document; it returns the exit
// status such an answer has (ExitNoView), or ok when the view is current.
func sayNoView(q *queryFlags, v *api.View, stdout, stderr io.Writer, ok int) int {
	if !blind(v) {
		return ok
	}
	w := stdout
	if q.document() {
		w = stderr
	}
	fmt.Fprintln(w, noViewLine(v))
	return ExitNoView
}

// viewText is the view row of `netdrift status`.
func viewText(v *api.View) string {
	switch {
	case v == nil:
		return "-"
	case v.Current:
		return "current since " + v.Since.UTC().Format(time.RFC3339)
	}
	return "NOT CURRENT (" + v.Code + ") since " + v.Since.UTC().Format(time.RFC3339)
}

// fallbackText is a fallback row of `netdrift status`.
func fallbackText(f api.Fallback) string {
	s := f.From + " -> " + f.To
	if !f.Since.IsZero() {
		s += " since " + f.Since.UTC().Format(time.RFC3339)
	}
	if f.Reason != "" {
		s += ": " + f.Reason
	}
	return s
}
