package clusterfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"

	"sigs.k8s.io/yaml"
)

// document is one JSON value or YAML document of a file, converted to JSON.
type document struct {
	json []byte
	line int // 1-based line the document starts on
}

func (d document) where(i, n int) string {
	if n == 1 {
		return "line " + strconv.Itoa(d.line)
	}
	return fmt.Sprintf("document %d (line %d)", i+1, d.line)
}

// splitDocuments turns a file into JSON documents: a JSON stream when the
// file starts with '{' or '[', else YAML documents separated by "---".
// Empty documents are skipped.
func splitDocuments(data []byte) ([]document, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, nil
	}
	if trimmed[0] == '{' || trimmed[0] == '[' {
		return splitJSON(data)
	}
	return splitYAML(data)
}

func splitJSON(data []byte) ([]document, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var docs []document
	for {
		start := dec.InputOffset()
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, jsonError(data, start, err)
		}
		line := lineAt(data, start+int64(countLeadingSpace(data[start:])))
		docs = append(docs, document{json: raw, line: line})
	}
}

// jsonError names the line of a JSON syntax error.
func jsonError(data []byte, start int64, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("line %d: invalid JSON: %v", lineAt(data, se.Offset), err)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("line %d: invalid JSON: unexpected end of input in the value starting here", lineAt(data, start+int64(countLeadingSpace(data[start:]))))
	}
	return fmt.Errorf("line %d: invalid JSON: %v", lineAt(data, start), err)
}

func countLeadingSpace(b []byte) int {
	return len(b) - len(bytes.TrimLeft(b, " \t\r\n"))
}

func lineAt(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

func splitYAML(data []byte) ([]document, error) {
	var docs []document
	for _, chunk := range yamlChunks(data) {
		j, err := yaml.YAMLToJSON(chunk.text)
		if err != nil {
			return nil, fmt.Errorf("document at line %d: invalid YAML: %s", chunk.line, shiftLines(err.Error(), chunk.line-1))
		}
		if t := bytes.TrimSpace(j); len(t) == 0 || bytes.Equal(t, []byte("null")) {
			continue
		}
		docs = append(docs, document{json: j, line: chunk.line})
	}
	return docs, nil
}

// shiftLines rewrites "line N" in a YAML error to the file's line numbers.
func shiftLines(msg string, by int) string {
	return yamlLineRE.ReplaceAllStringFunc(msg, func(m string) string {
		n, err := strconv.Atoi(m[len("line "):])
		if err != nil {
			return m
		}
		return "line " + strconv.Itoa(n+by)
	})
}

type yamlChunk struct {
	text []byte
	line int
}

// yamlChunks splits at document separators ("---" lines, optionally followed
// by content) and end markers ("..." lines).
func yamlChunks(data []byte) []yamlChunk {
	var out []yamlChunk
	cur := yamlChunk{line: 1}
	lines := bytes.SplitAfter(data, []byte("\n"))
	for i, l := range lines {
		body := bytes.TrimRight(l, "\r\n")
		switch {
		case isDocStart(body):
			out = append(out, cur)
			cur = yamlChunk{line: i + 2} // content starts on the next line
			if rest := bytes.TrimLeft(body[3:], " \t"); len(rest) > 0 {
				cur = yamlChunk{line: i + 1, text: append(append([]byte(nil), rest...), '\n')}
			}
			continue
		case bytes.Equal(bytes.TrimRight(body, " \t"), []byte("...")):
			out = append(out, cur)
			cur = yamlChunk{line: i + 2}
			continue
		}
		cur.text = append(cur.text, l...)
	}
	return append(out, cur)
}

func isDocStart(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("---")) {
		return false
	}
	return len(line) == 3 || line[3] == ' ' || line[3] == '\t'
}
