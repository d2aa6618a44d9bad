package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type recordingRunner struct{ calls []string }

func (r *recordingRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	r.calls = append(r.calls, name+" "+strings.Join(args, " "))
	return nil, nil
}

// Applied effects change the host under the root, call the hook before each change (and only
// for a change), and log every effect with whether it changed the node.
func TestApplyChangesTheHostAndLogs(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	runner := &recordingRunner{}
	var hooked []string
	fx := Apply(&Env{Paths: Paths{Root: root}, Exec: runner}, func(f Effect) error {
		hooked = append(hooked, f.String())
		if f.Path == "/etc/refused" {
			return errors.New("journal full")
		}
		return nil
	})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fx.WriteFile("/etc/a.conf", []byte("x"), 0o600))
	st, _ := os.Stat(filepath.Join(root, "etc/a.conf"))
	must(fx.WriteFile("/etc/a.conf", []byte("x"), 0o600)) // the same: left alone
	if st2, _ := os.Stat(filepath.Join(root, "etc/a.conf")); !st2.ModTime().Equal(st.ModTime()) {
		t.Error("an identical write touched the file")
	}
	must(fx.Symlink("/etc/a.conf", "/etc/b.conf"))
	must(fx.MkdirAll("/var/lib/x", 0o700))
	must(fx.Remove("/etc/a.conf"))
	must(fx.Remove("/etc/none")) // nothing there: no effect
	must(fx.Service(context.Background(), "restart", "kubelet"))
	must(fx.SaveRecord("/var/lib/kjoin/journal.json", []byte("{}")))
	if err := fx.WriteFile("/etc/refused", []byte("y"), 0o644); err == nil {
		t.Error("a hook's refusal did not stop the write")
	}
	if _, err := os.Stat(filepath.Join(root, "etc/refused")); err == nil {
		t.Error("the refused file was written")
	}
	var got []string
	for _, f := range fx.Log() {
		got = append(got, f.String()+map[bool]string{true: " *"}[f.Changed])
	}
	want := []string{"write /etc/a.conf (0600) *", "write /etc/a.conf (0600)", "link /etc/b.conf -> /etc/a.conf *", "mkdir /var/lib/x *",
		"remove /etc/a.conf *", "run: systemctl restart kubelet *", "save the join journal /var/lib/kjoin/journal.json"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := Changes(fx.Log()); n != 5 {
		t.Errorf("changes %d, want 5 (the identical write and the record do not count)", n)
	}
	if len(hooked) != 6 || hooked[5] != "write /etc/refused (0644)" {
		t.Errorf("hook saw %q", hooked)
	}
	if strings.Join(runner.calls, ";") != "systemctl restart kubelet" {
		t.Errorf("commands %q", runner.calls)
	}
	if _, err := os.Lstat(filepath.Join(root, "etc/a.conf")); err == nil {
		t.Error("the removed file is still there")
	}
}

// Planned effects (which hold no root or runner: they cannot touch the host) record every
// effect but the record as a change.
func TestPlanRecordsEverything(t *testing.T) {
	t.Parallel()
	fx := Plan()
	_ = fx.WriteFile("/etc/a.conf", []byte("x"), 0o600)
	_ = fx.MkdirAll("/var/lib/x", 0o700)
	_ = fx.Service(context.Background(), "restart", "kubelet")
	_ = fx.SaveRecord("/var/lib/kjoin/journal.json", []byte("{}"))
	fx.API("label node w1")
	fx.Runtime("remove pod web-0")
	_ = fx.RemoveRecord("/var/lib/kjoin/journal.json") // a reset's: the node held a join
	if !fx.Planning() {
		t.Error("a plan says it applies")
	}
	log := fx.Log()
	if n := Changes(log); n != 6 || len(log) != 6 || log[5].String() != "remove the join journal /var/lib/kjoin/journal.json" {
		t.Errorf("planned %v", log)
	}
}
