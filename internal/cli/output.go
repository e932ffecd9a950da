package cli

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/netdrift/netdrift/internal/api"
)

// Output formats of -o: tables for people (wide adds columns), documents
// for tools (with apiVersion and kind).
const (
	outTable = "table"
	outWide  = "wide"
	outJSON  = "json"
	outYAML  = "yaml"
)

// allOutputs are the formats of the commands that print documents.
var allOutputs = []string{outTable, outWide, outJSON, outYAML}

// output is a command's -o flag.
type output struct {
	format  string
	formats []string
}

// addOutputFlag registers -o/--output with the given formats (the first is
// the default) and completes its values.
func addOutputFlag(cmd *cobra.Command, formats ...string) *output {
	o := &output{formats: formats}
	cmd.Flags().StringVarP(&o.format, "output", "o", formats[0], "output `FORMAT`: "+strings.Join(formats, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletion(formats...))
	return o
}

// check refuses a format the command does not have.
func (o *output) check() error {
	if !slices.Contains(o.formats, o.format) {
		return usagef("-o must be %s, not %q", orList(o.formats), o.format)
	}
	return nil
}

// document reports whether the output is a document (JSON or YAML), not
// a table.
func (o *output) document() bool { return o.format == outJSON || o.format == outYAML }

// wide reports whether tables carry their wide-only columns.
func (o *output) wide() bool { return o.format == outWide }

// print writes v as a JSON or YAML document.
func (o *output) print(w io.Writer, v any) {
	if err := printDocument(w, o.format, v); err != nil {
		fmt.Fprintln(w, "error:", err)
	}
}

// printDocument writes v with apiVersion and kind, as JSON indented by
// two spaces (as the HTTP API serves it) or as YAML. The YAML is made from
// the JSON (sigs.k8s.io/yaml, as kubectl does), so both carry the same
// members under the same names.
func printDocument(w io.Writer, format string, v any) error {
	var buf bytes.Buffer
	if err := api.EncodeJSON(&buf, v); err != nil {
		return err
	}
	if format == outJSON {
		_, err := w.Write(buf.Bytes())
		return err
	}
	y, err := yaml.JSONToYAML(buf.Bytes())
	if err != nil {
		return err
	}
	_, err = w.Write(y)
	return err
}

// printJSON writes v as an indented JSON document.
func printJSON(w io.Writer, v any) { _ = printDocument(w, outJSON, v) }

// fixedCompletion completes a flag's value from a fixed set.
func fixedCompletion(values ...string) cobra.CompletionFunc { return FixedCompletion(values...) }

// FixedCompletion completes a flag's value from a fixed set: the values
// that start with what is typed, no file names.
func FixedCompletion(values ...string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, typed string) ([]string, cobra.ShellCompDirective) {
		var out []string
		for _, v := range values {
			if strings.HasPrefix(v, typed) {
				out = append(out, v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// orList is "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
