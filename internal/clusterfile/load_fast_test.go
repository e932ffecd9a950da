package clusterfile

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestLoadFastMatchesStd: documents where the fast decoding's shortcuts
// (items decoded as the kind before them, a non-List decoded twice) could
// part from encoding/json: what the fast decoding loads, encoding/json
// loads the same (where it fails, Load decodes again with
// encoding/json), and Load returns what encoding/json does, errors
// included.
func TestLoadFastMatchesStd(t *testing.T) {
	svc := `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s","namespace":"n"},"spec":{"clusterIP":"10.0.0.1"}}`
	node := `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}`
	list := func(items ...string) string {
		return `{"apiVersion":"v1","kind":"List","items":[` + strings.Join(items, ",") + `]}`
	}
	for name, doc := range map[string]string{
		"kinds_interleaved":        list(svc, node, svc, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"b"}}`, svc),
		"unwanted_kind_like_guess": list(svc, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"spec":"not a spec"}`),
		"items_member_in_item":     list(svc, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"t"},"ITEMS":5}`),
		"items_array_in_item":      list(svc, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"t"},"items":[1]}`),
		"kind_case_and_duplicate":  list(svc, `{"apiVersion":"v1","KIND":"Node","kind":"Service","metadata":{"name":"t"}}`),
		"wrong_api_version":        list(svc, `{"apiVersion":"v2","kind":"Service","metadata":{"name":"t"}}`),
		"no_name":                  list(svc, `{"apiVersion":"v1","kind":"Service","metadata":{}}`),
		"item_not_object":          list(svc, `5`),
		"items_null":               `{"apiVersion":"v1","kind":"List","items":null}`,
		"items_repeated":           `{"apiVersion":"v1","kind":"List","items":[` + svc + `],"items":[` + node + `]}`,
		"kind_after_items":         `{"items":[` + svc + `],"kind":"List","apiVersion":"v1"}`,
		"object_with_items":        `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n2"},"items":[5]}`,
		"concatenated":             svc + "\n" + node + list(svc),
		"bom_and_space":            "\xef\xbb\xbf \n" + list(node),
		"trailing_garbage":         list(node) + " x",
		"array_top_level":          "[" + svc + "]",
		"yaml_list":                yamlList,
		"yaml_multi":               multiDoc,
		"empty":                    " \n",
		"type_mismatch":            list(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"t"},"spec":{"ports":[{"port":"80"}]}}`),
	} {
		t.Run(name, func(t *testing.T) {
			std, serr := load([]byte(doc), "f", stdDecoding)
			if fast, err := loadFast([]byte(doc)); err == nil && (serr != nil || !reflect.DeepEqual(fast, std)) {
				t.Fatalf("fast decoding loaded %+v, encoding/json %+v (error %v)", fast, std, serr)
			}
			got, err := Load([]byte(doc), "f")
			if fmt.Sprint(err) != fmt.Sprint(serr) || !reflect.DeepEqual(got, std) {
				t.Fatalf("Load: %+v, %v; encoding/json: %+v, %v", got, err, std, serr)
			}
		})
	}
}
