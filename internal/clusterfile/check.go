package clusterfile

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/netdrift/netdrift/internal/watch"

	"github.com/netdrift/netdrift/internal/textmatch"
)

// kubectlGet is the capture every refusal asks for.
const kubectlGet = "`kubectl get services,endpointslices,nodes -A -o json`"

// Check refuses cluster files that cannot support an answer for any node:
// no Services and EndpointSlices at all (an empty List), or Services without
// a single EndpointSlice (a cluster always has the `kubernetes` Service's
// slice, so their absence is a capture mistake: legacy Endpoints given
// instead, `kubectl get svc,ep`; or a single object instead of the List).
// The files are read again only when the loaded state is refused, to name
// the mistake.
func Check(cs *watch.ClusterState, paths []string) error {
	if len(cs.EndpointSlices) > 0 {
		return nil
	}
	shapes := make([]fileShape, 0, len(paths))
	for _, p := range paths {
		data, err := ReadInput(p, "--cluster")
		if err != nil {
			return err
		}
		shapes = append(shapes, inspect(data, InputName(p)))
	}
	return refusal(cs, shapes)
}

// fileShape is what a cluster file holds, counted by kind.
type fileShape struct {
	path     string
	lists    int            // List documents
	objects  int            // documents that are one object, not a List
	kinds    map[string]int // kinds of every object, in Lists or not
	topKinds []string       // kinds of the documents that are one object
}

// refusal names the first mistake the shapes show.
func refusal(cs *watch.ClusterState, shapes []fileShape) error {
	for _, s := range shapes {
		if s.kinds["Endpoints"] > 0 {
			return fmt.Errorf("%s holds %d legacy Endpoints objects (`kubectl get svc,ep`?) and no EndpointSlices, which kube-proxy reads: run %s",
				s.path, s.kinds["Endpoints"], kubectlGet)
		}
	}
	if len(shapes) == 1 && shapes[0].lists == 0 && shapes[0].objects == 1 {
		return fmt.Errorf("%s is a single %s object, not the cluster's List (`kubectl get svc NAME -o json`?): run %s",
			shapes[0].path, shapes[0].topKinds[0], kubectlGet)
	}
	if len(cs.Services) == 0 {
		return fmt.Errorf("%s hold%s no Services and no EndpointSlices (an empty List? wrong context or namespace?): run %s",
			pathList(shapes), plural(len(shapes)), kubectlGet)
	}
	return fmt.Errorf("%s hold%s %d Services but no EndpointSlices: run %s",
		pathList(shapes), plural(len(shapes)), len(cs.Services), kubectlGet)
}

func pathList(shapes []fileShape) string {
	names := make([]string, len(shapes))
	for i, s := range shapes {
		names[i] = s.path
	}
	return strings.Join(names, ", ")
}

func plural(n int) string {
	if n == 1 {
		return "s"
	}
	return ""
}

// inspect counts the kinds of a file's documents and List items. It
// decodes only apiVersion, kind and items; a file that does not parse was
// refused by Load already, so parse errors only leave counts out.
func inspect(data []byte, path string) fileShape {
	s := fileShape{path: path, kinds: map[string]int{}}
	docs, _ := splitDocuments(data)
	for _, d := range docs {
		var tm typeMeta
		if json.Unmarshal(d.json, &tm) != nil {
			continue
		}
		if !isList(tm.Kind) {
			s.objects++
			s.kinds[tm.Kind]++
			s.topKinds = append(s.topKinds, tm.Kind)
			continue
		}
		s.lists++
		for _, item := range tm.Items {
			var k struct{ Kind string }
			if json.Unmarshal(item, &k) == nil {
				s.kinds[k.Kind]++
			}
		}
	}
	return s
}

// CheckNode refuses a node that is not among the cluster's Nodes: its
// zone, and so every topology-aware verdict, is unknown, and a typo would
// compare the datapath with another node's answer. It names the closest
// node names.
func CheckNode(cs *watch.ClusterState, node string) error {
	if len(cs.Nodes) == 0 {
		return fmt.Errorf("--node %s: the cluster files hold no Nodes: run %s", node, kubectlGet)
	}
	names := make([]string, 0, len(cs.Nodes))
	for _, n := range cs.Nodes {
		if n.Name == node {
			return nil
		}
		names = append(names, n.Name)
	}
	if close := textmatch.Closest(node, names, 3); len(close) > 0 {
		return fmt.Errorf("--node %s is not among the cluster's %d Nodes; did you mean %s?", node, len(names), strings.Join(close, " or "))
	}
	return fmt.Errorf("--node %s is not among the cluster's %d Nodes (kubectl get nodes lists them)", node, len(names))
}
