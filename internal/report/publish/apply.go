package publish

import (
	"context"
	"encoding/json"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/netdrift/netdrift/internal/report"
)

// FieldManager is the agent's field manager in Server-Side Apply.
const FieldManager = "netdrift-agent"

// Applier writes reports by Server-Side Apply (force: the agent owns every
// field of its node's report) over a REST client of the API server's root
// (the clientset's discovery client serves: it takes absolute paths).
type Applier struct {
	Client rest.Interface
}

// Apply writes r, creating it if needed.
func (a Applier) Apply(ctx context.Context, r *report.NodeReport) error {
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return a.Client.Patch(types.ApplyPatchType).
		AbsPath("/apis", report.Group, report.Version, report.Resource, r.Name).
		Param("fieldManager", FieldManager).Param("force", "true").
		Body(body).Do(ctx).Error()
}
