package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"

	"kjoin.dev/kjoin/atomicfile"
)

// EffectKind is the kind of change an Effect makes to the node.
type EffectKind string

// The kinds of change a workflow makes to the node.
const (
	// EffectWrite writes a file atomically (temp file + rename), with its mode.
	EffectWrite EffectKind = "write"
	// EffectSymlink points a symlink at a target (replaced atomically).
	EffectSymlink EffectKind = "symlink"
	// EffectMkdir makes a directory and its parents.
	EffectMkdir EffectKind = "mkdir"
	// EffectRemove removes a path and all below it (a symlink itself, never its target).
	EffectRemove EffectKind = "remove"
	// EffectService drives a systemd unit (systemctl ACTION UNIT; daemon-reload has no unit).
	EffectService EffectKind = "service"
	// EffectAPI is a change made to the cluster through its API (or, planned, to be made).
	EffectAPI EffectKind = "api"
	// EffectRuntime is a change made through the container runtime (CRI): a pod removed.
	EffectRuntime EffectKind = "runtime"
	// EffectRecord writes or removes kjoin's own record of a workflow (the join journal): its
	// save is bookkeeping, never counted as a change nor planned; its removal (reset's) is a
	// change (the node held a join), planned in a dry run.
	EffectRecord EffectKind = "record"
)

// Effect is one change a workflow made to the node, or in a plan would make.
type Effect struct {
	Kind EffectKind
	// Path is the host path written, linked, made or removed.
	Path string
	// Mode is a written file's mode (a directory's for mkdir).
	Mode os.FileMode
	// Target is a symlink's target.
	Target string
	// Action and Unit are a service effect's systemctl arguments; a record's Action is "save"
	// or "remove".
	Action, Unit string
	// Detail says an API or runtime effect ("label node cp2 ...").
	Detail string
	// Sent: an API effect a plan's client sent as a server-side dry run (Client), which the
	// workflow's own line for the same change says in words.
	Sent bool
	// Changed: the node differs afterwards (a write of the content already there, a removal
	// of nothing or a mkdir of a directory that exists change nothing). Planned effects are
	// all counted as changes.
	Changed bool
}

// String says the effect as a plan line: "write /etc/kubernetes/kubelet.conf (0600)".
func (f Effect) String() string {
	switch f.Kind {
	case EffectWrite:
		return fmt.Sprintf("write %s (%04o)", f.Path, f.Mode.Perm())
	case EffectSymlink:
		return fmt.Sprintf("link %s -> %s", f.Path, f.Target)
	case EffectService:
		return strings.TrimSpace("run: systemctl " + f.Action + " " + f.Unit)
	case EffectAPI, EffectRuntime:
		return f.Detail
	case EffectRecord:
		return f.Action + " the join journal " + f.Path
	default:
		return string(f.Kind) + " " + f.Path
	}
}

// Effects is the one way a workflow changes the node: every file it writes, links, makes or
// removes and every service action goes through it, so "changed", a dry run's plan, the
// journal's file list and what reset undoes are views of one log. Reads (files, is-active)
// do not go through it.
type Effects interface {
	// WriteFile writes data atomically with mode; a file that already has this content and
	// mode is left alone, mtime included.
	WriteFile(hostPath string, data []byte, mode os.FileMode) error
	// Symlink points hostPath at target, replacing what is there atomically.
	Symlink(target, hostPath string) error
	// MkdirAll makes a directory and its parents with mode.
	MkdirAll(hostPath string, mode os.FileMode) error
	// Remove removes hostPath and everything below it; a path that does not exist is no error.
	Remove(hostPath string) error
	// Service runs systemctl action unit (unit "" for daemon-reload).
	Service(ctx context.Context, action, unit string) error
	// API records a change made to the cluster through its API (planned: to be made); the
	// caller makes it, or in a plan does not.
	API(what string)
	// Runtime records a change made through the container runtime, as API does.
	Runtime(what string)
	// SaveRecord writes kjoin's own record (the journal, 0600); RemoveRecord removes it.
	SaveRecord(hostPath string, data []byte) error
	RemoveRecord(hostPath string) error
	// Planning reports that nothing is applied (a dry run).
	Planning() bool
	// Log returns the effects so far, in order.
	Log() []Effect
}

// Fx returns the environment's effects: those a workflow set, else effects applied to this
// host with no hook.
func (e *Env) Fx() Effects {
	if e.Effects == nil {
		return Apply(e, nil)
	}
	return e.Effects
}

// effectLog is the log every Effects implementation keeps.
type effectLog struct {
	mu  sync.Mutex
	log []Effect
}

func (l *effectLog) add(f Effect) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.log = append(l.log, f)
}

// Log returns the effects so far, in order.
func (l *effectLog) Log() []Effect {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Effect(nil), l.log...)
}

// applied changes the host.
type applied struct {
	effectLog
	paths  Paths
	exec   CommandRunner
	before func(Effect) error
}

// Apply returns effects that change the host e describes (its root and command runner).
// before, when set, is called with each effect that will change the node, before it is made
// (the join's journal records a file before writing it); its error stops the effect.
func Apply(e *Env, before func(Effect) error) Effects {
	return &applied{paths: e.Paths, exec: e.Exec, before: before}
}

func (a *applied) Planning() bool { return false }

// do runs an effect that changes the node: the hook first, then the change; it is logged
// once made.
func (a *applied) do(f Effect, change func() error) error {
	if a.before != nil {
		if err := a.before(f); err != nil {
			return err
		}
	}
	if err := change(); err != nil {
		return err
	}
	a.add(f)
	return nil
}

func (a *applied) WriteFile(hostPath string, data []byte, mode os.FileMode) error {
	p := a.paths.Of(hostPath)
	f := Effect{Kind: EffectWrite, Path: hostPath, Mode: mode}
	if same(p, data, mode) {
		a.add(f)
		return nil
	}
	f.Changed = true
	return a.do(f, func() error { return atomicfile.Write(p, data, mode, 0o755) })
}

// same reports whether the file at p already has data and mode.
func same(p string, data []byte, mode os.FileMode) bool {
	st, err := os.Lstat(p)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != mode.Perm() {
		return false
	}
	cur, err := os.ReadFile(p)
	return err == nil && bytes.Equal(cur, data)
}

func (a *applied) Symlink(target, hostPath string) error {
	p := a.paths.Of(hostPath)
	f := Effect{Kind: EffectSymlink, Path: hostPath, Target: target}
	if cur, err := os.Readlink(p); err == nil && cur == target {
		a.add(f)
		return nil
	}
	f.Changed = true
	return a.do(f, func() error { return atomicfile.Symlink(target, p) })
}

func (a *applied) MkdirAll(hostPath string, mode os.FileMode) error {
	p := a.paths.Of(hostPath)
	f := Effect{Kind: EffectMkdir, Path: hostPath, Mode: mode}
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		a.add(f)
		return nil
	}
	f.Changed = true
	return a.do(f, func() error { return os.MkdirAll(p, mode) })
}

func (a *applied) Remove(hostPath string) error {
	p := a.paths.Of(hostPath)
	f := Effect{Kind: EffectRemove, Path: hostPath}
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	f.Changed = true
	return a.do(f, func() error { return os.RemoveAll(p) })
}

func (a *applied) Service(ctx context.Context, action, unit string) error {
	args := []string{action}
	if unit != "" {
		args = append(args, unit)
	}
	return a.do(Effect{Kind: EffectService, Action: action, Unit: unit, Changed: true}, func() error {
		_, err := a.exec.Run(ctx, "systemctl", args...)
		return err
	})
}

func (a *applied) API(what string) { a.add(Effect{Kind: EffectAPI, Detail: what, Changed: true}) }

func (a *applied) Runtime(what string) {
	a.add(Effect{Kind: EffectRuntime, Detail: what, Changed: true})
}

// SaveRecord writes kjoin's record; it is logged, never counted as a change, and never
// passed to the hook (the hook is what saves the journal).
func (a *applied) SaveRecord(hostPath string, data []byte) error {
	p := a.paths.Of(hostPath)
	if same(p, data, 0o600) {
		return nil
	}
	if err := atomicfile.Write(p, data, 0o600, 0o700); err != nil {
		return err
	}
	a.add(Effect{Kind: EffectRecord, Path: hostPath, Mode: 0o600, Action: "save"})
	return nil
}

func (a *applied) RemoveRecord(hostPath string) error {
	err := os.Remove(a.paths.Of(hostPath))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil {
		a.add(Effect{Kind: EffectRecord, Path: hostPath, Action: "remove", Changed: true})
	}
	return err
}

// planned records and touches nothing: a dry run.
type planned struct{ effectLog }

// Plan returns effects that record what would be done and change nothing.
func Plan() Effects { return &planned{} }

func (p *planned) Planning() bool { return true }

func (p *planned) WriteFile(hostPath string, _ []byte, mode os.FileMode) error {
	p.add(Effect{Kind: EffectWrite, Path: hostPath, Mode: mode, Changed: true})
	return nil
}

func (p *planned) Symlink(target, hostPath string) error {
	p.add(Effect{Kind: EffectSymlink, Path: hostPath, Target: target, Changed: true})
	return nil
}

func (p *planned) MkdirAll(hostPath string, mode os.FileMode) error {
	p.add(Effect{Kind: EffectMkdir, Path: hostPath, Mode: mode, Changed: true})
	return nil
}

func (p *planned) Remove(hostPath string) error {
	p.add(Effect{Kind: EffectRemove, Path: hostPath, Changed: true})
	return nil
}

func (p *planned) Service(_ context.Context, action, unit string) error {
	p.add(Effect{Kind: EffectService, Action: action, Unit: unit, Changed: true})
	return nil
}

func (p *planned) API(what string) { p.add(Effect{Kind: EffectAPI, Detail: what, Changed: true}) }

func (p *planned) Runtime(what string) {
	p.add(Effect{Kind: EffectRuntime, Detail: what, Changed: true})
}

// A dry run keeps no record; the removal of one is planned (a reset's plan says it).
func (p *planned) SaveRecord(string, []byte) error { return nil }

func (p *planned) RemoveRecord(hostPath string) error {
	p.add(Effect{Kind: EffectRecord, Path: hostPath, Action: "remove", Changed: true})
	return nil
}

// Changes counts the effects in a log that changed (or would change) the node.
func Changes(log []Effect) int {
	n := 0
	for _, f := range log {
		if f.Changed {
			n++
		}
	}
	return n
}
