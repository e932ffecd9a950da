package api

// SnapshotFrontend is one observed frontend in `netdrift snapshot -o json`.
type SnapshotFrontend struct {
	Frontend     string   `json:"frontend"`
	FrontendKind string   `json:"frontend_kind"`
	Family       string   `json:"family"`
	Protocol     string   `json:"protocol"`
	Service      string   `json:"service,omitempty"`
	Port         string   `json:"port,omitempty"`
	Action       string   `json:"action"`
	Backends     []string `json:"backends,omitempty"`
}

// SnapshotReport is `netdrift snapshot -o json`.
type SnapshotReport struct {
	Datapath  string             `json:"datapath"`
	Frontends []SnapshotFrontend `json:"frontends"`
	Warnings  []string           `json:"warnings,omitempty"`
}
