package yamlnode

import (
	"slices"
	"testing"

	"gopkg.in/yaml.v3"
)

func doc(t *testing.T, text string) *yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(text), &n); err != nil {
		t.Fatal(err)
	}
	return n.Content[0]
}

func TestStrings(t *testing.T) {
	for _, tc := range []struct {
		text    string
		want    []string
		notList bool
		bad     int
	}{
		{"l: [a, 5, true]", []string{"a", "5", "true"}, false, -1},
		{"l: ~", nil, false, -1},
		{"x: 1", nil, false, -1}, // absent
		{"l: a", nil, true, -1},
		{"l: [a, [b]]", nil, false, 1},
		{"l: [a, ~]", nil, false, 1},
		{"a: &x [p, q]\nl: *x", []string{"p", "q"}, false, -1},
	} {
		got, notList, bad := Strings(MapValue(doc(t, tc.text), "l"))
		if !slices.Equal(got, tc.want) || notList != tc.notList || bad != tc.bad {
			t.Errorf("%q: %v %v %d, want %v %v %d", tc.text, got, notList, bad, tc.want, tc.notList, tc.bad)
		}
	}
}

func TestMapValueAndNull(t *testing.T) {
	d := doc(t, "a: &v 1\nb: *v\nc: null")
	if v := MapValue(d, "b"); v == nil || v.Value != "1" {
		t.Fatalf("alias not followed: %v", v)
	}
	if !IsNull(MapValue(d, "c")) || !IsNull(MapValue(d, "none")) || IsNull(MapValue(d, "a")) {
		t.Fatal("IsNull")
	}
	if MapValue(MapValue(d, "a"), "x") != nil {
		t.Fatal("a scalar has no keys")
	}
}
