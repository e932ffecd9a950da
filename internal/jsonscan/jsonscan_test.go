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
	c = New([]byte(`080`))
	if _, ok := c.Digits(); ok {
		t.Fatal("080 (a leading zero) read as digits")
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

func TestInt(t *testing.T) {
	for _, c := range []struct {
		in   string
		bits int
		want int64
		ok   bool
	}{
		{`80`, 32, 80, true}, {` -1`, 32, -1, true}, {`0`, 32, 0, true},
		{`2147483647`, 32, 1<<31 - 1, true}, {`2147483648`, 32, 0, false}, {`-2147483648`, 32, -1 << 31, true},
		{`9223372036854775807`, 64, 1<<63 - 1, true}, {`9223372036854775808`, 64, 0, false},
		{`99999999999999999999`, 64, 0, false}, {`01`, 32, 0, false}, {`-`, 32, 0, false}, {`1.0`, 32, 0, false},
		{`1e2`, 32, 0, false}, {`+1`, 32, 0, false}, {`"1"`, 32, 0, false},
	} {
		cur := New([]byte(c.in))
		v, ok := cur.Int(c.bits)
		if ok != c.ok || ok && v != c.want {
			t.Errorf("Int(%s, %d) = %d %v, want %d %v", c.in, c.bits, v, ok, c.want, c.ok)
		}
	}
}

func TestSkipAndStrictness(t *testing.T) {
	c := New([]byte(` "2026-12-04T22:10:24Z" , {"a": [1, "]"]} ]`))
	if s, ok := c.Str(); !ok || string(s) != `2026-12-04T22:10:24Z` || !c.Lit(',') {
		t.Fatalf("Str: %q %v", s, ok)
	}
	if !c.Skip() || !c.Lit(']') {
		t.Fatal("Skip did not pass over the object")
	}
	for _, in := range []string{"\"a\tb\"", "\"a\x01\""} {
		c = New([]byte(in))
		if _, ok := c.Str(); ok {
			t.Errorf("Str read the control character in %q", in)
		}
	}
	c = New([]byte("\x0b1"))
	if _, ok := c.Int(64); ok {
		t.Error("a vertical tab read as whitespace")
	}
}

// readStrict reads any value but null with the strict readers alone.
func readStrict(c *Cursor, depth int) bool {
	if depth > 20 {
		return false
	}
	c.ws()
	if c.i >= len(c.b) {
		return false
	}
	switch c.b[c.i] {
	case '{', '[':
		obj := c.b[c.i] == '{'
		return c.Each(c.b[c.i], func() bool {
			if obj {
				if _, ok := c.Member(); !ok {
					return false
				}
			}
			return readStrict(c, depth+1)
		})
	case '"':
		_, ok := c.Str()
		return ok
	case 't', 'f':
		_, ok := c.Bool()
		return ok
	}
	_, ok := c.Int(64)
	return ok
}

// FuzzStrictReadIsValid: what the strict readers read whole is valid JSON
// (the cluster-file scan relies on it to refuse what a decoder would).
func FuzzStrictReadIsValid(f *testing.F) {
	for _, s := range []string{`{"a": [1, "x", {"b": true}]}`, `[-1, 0, "é"]`, "{\n    \"k\": false\n}", `[1,]`, `{"a" 1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		c := New([]byte(v))
		if readStrict(&c, 0) && c.End() && !json.Valid([]byte(v)) {
			t.Fatalf("the strict readers read %q, which is not valid JSON", v)
		}
	})
}

func TestEach(t *testing.T) {
	c := New([]byte(`[1, 2, 3] {"a": true, "b": false} [] {} [1,] [1 2]`))
	var n []int64
	if !c.Each('[', func() bool { v, ok := c.Int(64); n = append(n, v); return ok }) || len(n) != 3 || n[2] != 3 {
		t.Fatalf("array: %v", n)
	}
	names := ""
	if !c.Each('{', func() bool { m, ok := c.Member(); names += string(m); _, ok2 := c.Bool(); return ok && ok2 }) || names != "ab" {
		t.Fatalf("object: %q", names)
	}
	if !c.Each('[', func() bool { return false }) || !c.Each('{', func() bool { return false }) {
		t.Fatal("empty array or object refused")
	}
	for _, bad := range []string{"trailing comma", "no comma"} {
		if c.Each('[', func() bool { _, ok := c.Int(64); return ok }) {
			t.Fatalf("%s accepted", bad)
		}
		c.Skip() // pass over what is left of it
		c.Lit(']')
	}
}
