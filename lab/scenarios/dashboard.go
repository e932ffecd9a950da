package scenarios

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
)

// PanelQuery is one query of a dashboard panel.
type PanelQuery struct {
	Panel string
	RefID string
	Expr  string
}

// DashboardQueries reads a Grafana dashboard's panel queries (rows
// included).
func DashboardQueries(path string) ([]PanelQuery, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	type panel struct {
		Type    string  `json:"type"`
		Title   string  `json:"title"`
		Panels  []panel `json:"panels"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	}
	var d struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []PanelQuery
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out = append(out, PanelQuery{Panel: p.Title, RefID: t.RefID, Expr: t.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out, nil
}

var grafanaVarRE = regexp.MustCompile(`\$\{?(\w+)\}?`)

// Substitute replaces Grafana's variables as a user viewing every node
// would have them: $node matches all nodes, $__rate_interval is rate.
func Substitute(expr, rate string) string {
	return grafanaVarRE.ReplaceAllStringFunc(expr, func(m string) string {
		switch grafanaVarRE.FindStringSubmatch(m)[1] {
		case "node":
			return ".*"
		case "__rate_interval", "__interval":
			return rate
		}
		return m
	})
}
