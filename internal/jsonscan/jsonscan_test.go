package jsonscan

import (
	"encoding/json"
	"testing"
)

func TestSkipPassesOverOneValue(t *testing.T) {
	for _, v := range []string{
		`0`, `-1.5e+3`, `true`, `null`, `""`, `"a\"]}b"`, `"\\"`,
		`[]`, `{}`, `[1, [2, {"a": "]"}], "x"]`, `{"k": {"n": [true, false, null]}, "s": "{\"q\":1}"}`,
		"\n        [\n            1,\n        2\n    ]  ",
	} {
		c := New([]byte(v + ` , 7`))
		if !c.Skip() || !c.Lit(',') {
			t.Errorf("%s: Skip did not stop at the comma after the value", v)
			continue
		}
		if d, ok := c.Digits(); !ok || string(d) != "7" || !c.End() {
			t.Errorf("%s: after the value, got %q %v", v, d, ok)
		}
	}
}

func TestStrReadsOnlyPlainStrings(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
		ok   bool
	}{
		{`"10.0.0.1"`, "10.0.0.1", true},
		{`  "zone-a"`, "zone-a", true},
		{`"é"`, "é", true},
		{`"a\"b"`, "", false},
		{`"a\u0041"`, "", false},
		{"\"\xff\"", "", false}, // invalid UTF-8: a decoder would replace it
		{`1`, "", false},
	} {
		cur := New([]byte(c.in))
		s, ok := cur.Str()
		if ok != c.ok || ok && string(s) != c.want {
			t.Errorf("Str(%s) = %q %v, want %q %v", c.in, s, ok, c.want, c.ok)
		}
	}
}

func TestScalars(t *testing.T) {
	c := New([]byte(`[true, false, 80, 8.5, 1e3, "n"]`))
	if !c.Lit('[') {
		t.Fatal("no [")
	}
	if v, ok := c.Bool(); !ok || !v || !c.Lit(',') {
		t.Fatal("true")
	}
	if v, ok := c.Bool(); !ok || v || !c.Lit(',') {
		t.Fatal("false")
	}
	if d, ok := c.Digits(); !ok || string(d) != "80" || !c.Lit(',') {
		t.Fatal("80")
	}
	if _, ok := c.Digits(); ok {
		t.Fatal("8.5 read as digits")
	}
	c = New([]byte(`1e3`))
	if _, ok := c.Digits(); ok {
		t.Fatal("1e3 read as digits")
	}
	c = New([]byte(`{"name" : "x", "Name": 1}`))
	if !c.Lit('{') || !c.Name("name") {
		t.Fatal("name")
	}
	if s, ok := c.Str(); !ok || string(s) != "x" || !c.Lit(',') || c.Name("name") {
		t.Fatal("Name matched another letter case")
	}
}

// FuzzSkipValid: Skip passes over every valid JSON value whole.
func FuzzSkipValid(f *testing.F) {
	for _, s := range []string{`{"a": [1, "x\"", {"b": null}]}`, `"s"`, `-0.5`, "[\n    true\n]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if !json.Valid([]byte(v)) {
			return
		}
		c := New([]byte(v))
		if !c.Skip() || !c.End() {
			t.Fatalf("Skip stopped inside %q at %d", v, c.i)
		}
	})
}
