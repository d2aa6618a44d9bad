package joinstring

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

var (
	worker = JoinString{
		Endpoints: []string{"cp.example.com:6443"},
		Pins:      []string{"sha256:" + strings.Repeat("ab", 32)},
		Token:     "abcdef.0123456789abcdef",
	}
	controlPlane = JoinString{
		Endpoints:      []string{"10.0.0.11:6443", "10.0.0.12:6443", "[fd00::13]:6443"},
		Pins:           []string{"sha256:" + strings.Repeat("01", 32), "sha256:" + strings.Repeat("fe", 32)},
		Token:          "uvwxyz.abcdefghijklmnop",
		CertificateKey: strings.Repeat("c3", 32),
	}
)

func encode(t testing.TB, j JoinString) string {
	t.Helper()
	s, err := Encode(j)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Round trip: what Encode writes Parse reads back, with the file's newline, and a string is
// canonical (Encode of what Parse read gives the same string).
func TestRoundTrip(t *testing.T) {
	for _, j := range []JoinString{worker, controlPlane} {
		s := encode(t, j)
		if !strings.HasPrefix(s, "kjoin1.") || strings.ContainsAny(s, " \n=+/") {
			t.Errorf("not one URL-safe word: %s", s)
		}
		got, err := Parse(s + "\n")
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if !reflect.DeepEqual(got, j) || got.ControlPlane() != (j.CertificateKey != "") {
			t.Errorf("got %+v, want %+v", got, j)
		}
		if again := encode(t, got); again != s {
			t.Errorf("not canonical: %s then %s", s, again)
		}
	}
	// An upper-case pin is written canonical.
	j := worker
	j.Pins = []string{"SHA256:" + strings.Repeat("AB", 32)}
	if got, err := Parse(encode(t, j)); err != nil || got.Pins[0] != worker.Pins[0] {
		t.Errorf("upper-case pin: %+v %v", got, err)
	}
}

// Cut at any position, the string is refused.
func TestTruncationAnywhereIsRefused(t *testing.T) {
	for _, j := range []JoinString{worker, controlPlane} {
		s := encode(t, j)
		for i := range len(s) {
			if _, err := Parse(s[:i]); err == nil {
				t.Errorf("cut to %d of %d bytes, accepted: %q", i, len(s), s[:i])
			}
			if _, err := Parse(s[i+1:]); err == nil && i < len(s)-1 {
				t.Errorf("its first %d bytes lost, accepted: %q", i+1, s[i+1:])
			}
		}
	}
}

// Any one character changed (to any other character a join string could hold, or a few it
// could not), deleted or doubled: refused.
func TestOneCharacterChangedAnywhereIsRefused(t *testing.T) {
	alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ 1"
	for _, j := range []JoinString{worker, controlPlane} {
		s := encode(t, j)
		for i := range len(s) {
			for _, r := range alphabet {
				if byte(r) == s[i] {
					continue
				}
				changed := s[:i] + string(r) + s[i+1:]
				if _, err := Parse(changed); err == nil {
					t.Errorf("byte %d changed %q -> %q, accepted: %s", i, s[i], r, changed)
				}
			}
			if _, err := Parse(s[:i] + s[i+1:]); err == nil {
				t.Errorf("byte %d deleted, accepted", i)
			}
			if _, err := Parse(s[:i] + s[i:i+1] + s[i:]); err == nil {
				t.Errorf("byte %d doubled, accepted", i)
			}
		}
	}
}

// The refusal names the part that is wrong.
func TestRefusalNamesThePart(t *testing.T) {
	s := encode(t, controlPlane)
	f := strings.Split(s, ".")
	flip := func(part int) string {
		g := append([]string(nil), f...)
		c := g[part][2]
		r := byte('A')
		if c == 'A' {
			r = 'B'
		}
		g[part] = g[part][:2] + string(r) + g[part][3:]
		return strings.Join(g, ".")
	}
	other := strings.Split(encode(t, worker), ".")
	for _, c := range []struct{ in, want string }{
		{"", "empty"},
		{"kjoin2." + strings.Join(f[1:], "."), "version 2"},
		{"kubeadm join cp:6443", "white space"},
		{"abc." + strings.Join(f[1:], "."), `does not start with "kjoin1."`},
		{strings.Join(f[:3], "."), "cut short"},
		{s + ".AAAAAA", "more than a join string has"},
		{flip(1), "the endpoints part (part 1) is damaged"},
		{flip(2), "the CA pins part (part 2) is damaged"},
		{flip(3), "the token part (part 3) is damaged"},
		{flip(4), "the certificate key part (part 4) is damaged"},
		{strings.Join(f[:5], ".") + ".AAAA", "checksum part (the last) is damaged"},
		{strings.Join(append(append([]string{}, f[:2]...), append([]string{other[2]}, f[3:]...)...), "."), "come from different join strings"},
		{strings.Join(f[:3], ".") + ".!!" + f[3][2:] + "." + strings.Join(f[4:], "."), "its character 1 cannot be in a join string"},
	} {
		_, err := Parse(c.in)
		var je *Error
		if !errors.As(err, &je) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error naming %q", c.in, err, c.want)
		}
	}
	// Two damaged parts are both named.
	g := strings.Split(flip(1), ".")
	g[3] = strings.Split(flip(3), ".")[3]
	_, err := Parse(strings.Join(g, "."))
	if err == nil || !strings.Contains(err.Error(), "endpoints part") || !strings.Contains(err.Error(), "token part") {
		t.Errorf("two damaged parts: %v", err)
	}
}

// Encode refuses values a join cannot use, all of them at once.
func TestEncodeChecksEveryValue(t *testing.T) {
	_, err := Encode(JoinString{Endpoints: []string{"cp.example.com", "a,b:1"}, Pins: []string{"md5:00"}, Token: "short", CertificateKey: "xyz"})
	for _, want := range []string{`endpoint "cp.example.com"`, `endpoint "a,b:1" holds a comma`, `CA pin "md5:00"`, "the token is not", "certificate key is not"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err %v, want it to name %s", err, want)
		}
	}
	if _, err := Encode(JoinString{Token: worker.Token}); err == nil || !strings.Contains(err.Error(), "no endpoint") || !strings.Contains(err.Error(), "no pin") {
		t.Errorf("empty: %v", err)
	}
}

// The parser never panics, and what it accepts is canonical: encoding it again gives the
// same string.
func FuzzParse(f *testing.F) {
	f.Add(encode(f, worker))
	f.Add(encode(f, controlPlane))
	f.Add("kjoin1....")
	f.Add("kjoin1.AAAA.AAAA.AAAA.AAAAAA")
	f.Fuzz(func(t *testing.T, s string) {
		j, err := Parse(s)
		if err != nil {
			var je *Error
			if !errors.As(err, &je) || len(je.Problems) == 0 {
				t.Fatalf("error without problems: %v", err)
			}
			return
		}
		again, err := Encode(j)
		if err != nil || again != strings.TrimSpace(s) {
			t.Fatalf("accepted %q, encodes again as %q (%v)", s, again, err)
		}
	})
}
