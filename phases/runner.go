// Package phases runs a join as an ordered list of small phases over a typed State, with
// --skip-phases, single-phase runs, per-phase durations and "[phase] message" progress.
// The reset workflow runs on the same runner. Every host path, client, clock, command and
// output comes through Env. It knows nothing about the command line.
package phases

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

// Phase is one step of a workflow.
type Phase struct {
	Name  string
	Short string
	// Needs names read-only phases that must run first when this phase runs alone.
	Needs []string
	// ReadOnly phases change nothing; the others report "unchanged" when they found their
	// work already done.
	ReadOnly bool
	// Skip returns a reason to skip the phase for this state ("" runs it).
	Skip func(*State) string
	Run  func(ctx context.Context, e *host.Env, s *State) error
}

// Join is the join workflow, in order. (ResetWorkflow undoes it.)
var Join = []Phase{
	Preflight, Discovery, VersionCheck, ControlPlanePrepare, TLSBootstrap, KubeletConfig, KubeletStart,
	EtcdJoin, ControlPlaneStart, MarkControlPlane, WaitControlPlane, WaitReady,
}

// Names returns the phase names of a workflow.
func Names(workflow []Phase) []string {
	var n []string
	for _, p := range workflow {
		n = append(n, p.Name)
	}
	return n
}

// RunOptions select phases.
type RunOptions struct {
	// Skip names phases not to run.
	Skip []string
	// Only, when set, runs just these phases (kjoin join phase <name>).
	Only []string
	// AfterPhase is called after each completed phase (fault injection in lab tests).
	AfterPhase func(name string)
	// KeepJournal leaves s.Journal as it is: no phase completion is recorded or saved
	// (reset, which removes the journal).
	KeepJournal bool
}

// Run executes the workflow in order and returns the per-phase results. It stops at the
// first error, wrapped with the phase name.
func Run(ctx context.Context, e *host.Env, s *State, workflow []Phase, o RunOptions) ([]PhaseResult, error) {
	known := map[string]bool{}
	for _, p := range workflow {
		known[p.Name] = true
	}
	for _, n := range append(append([]string{}, o.Skip...), o.Only...) {
		if !known[n] {
			return nil, operr.Newf(operr.Usage, "unknown phase %q", n).
				WithHint("known phases: " + strings.Join(Names(workflow), ", "))
		}
	}
	skip := toSet(o.Skip)
	only := toSet(o.Only)
	for _, p := range workflow {
		if only[p.Name] {
			for _, n := range p.Needs {
				only[n] = true
			}
		}
	}
	if s.Started.IsZero() {
		s.Started = e.Clock.Now()
	}
	if s.Journal == nil && !s.Opts.DryRun {
		j, err := LoadJournal(e)
		if err != nil {
			return nil, journalError(err)
		}
		s.Journal = j
	}
	var results []PhaseResult
	for _, p := range workflow {
		res := PhaseResult{Name: p.Name}
		switch {
		case len(only) > 0 && !only[p.Name]:
			continue
		case skip[p.Name]:
			res.Status, res.Reason = "skipped", "--skip-phases"
		case p.Skip != nil && p.Skip(s) != "":
			res.Status, res.Reason = "skipped", p.Skip(s)
		}
		if res.Status == "skipped" {
			e.Debugf(p.Name, "skipped: %s", res.Reason)
			results = append(results, res)
			continue
		}
		if err := ctx.Err(); err != nil {
			return results, operr.Wrap(operr.Other, err, "interrupted before phase "+p.Name, "run the same command again to finish the join")
		}
		start := e.Clock.Now()
		changesBefore := s.changes
		err := p.Run(ctx, e, s)
		res.Duration = e.Clock.Since(start)
		res.Millis = res.Duration.Milliseconds()
		res.Status = "ran"
		if !p.ReadOnly && s.changes == changesBefore {
			res.Status = "unchanged"
		}
		if err != nil {
			res.Status = "failed"
			results = append(results, res)
			return results, fmt.Errorf("phase %s: %w", p.Name, diskFull(err))
		}
		e.Debugf(p.Name, "done in %s", res.Duration.Round(time.Millisecond))
		results = append(results, res)
		if s.Journal != nil && !s.Opts.DryRun && !o.KeepJournal {
			s.Journal.Completed(p.Name)
		}
		// Read-only phases leave no trace on a host the join has not changed yet: a refused
		// join (preflight, discovery) writes nothing, not even the journal.
		if s.Journal != nil && !s.Opts.DryRun && !o.KeepJournal && (!p.ReadOnly || e.Exists(JournalPath)) {
			if err := s.Journal.Save(e); err != nil {
				return results, operr.Wrap(operr.Other, err, "cannot save the join journal", "")
			}
		}
		if o.AfterPhase != nil {
			o.AfterPhase(p.Name)
		}
	}
	return results, nil
}

// diskFull makes a write that failed for lack of space an operator error (exit 3) that says
// so and what to do; the write itself left the previous file in place (atomicfile).
func diskFull(err error) error {
	if !errors.Is(err, syscall.ENOSPC) {
		return err
	}
	return &operr.Error{Code: operr.Preflight, Err: err, What: "no space left on the device",
		Hint: "free space on the filesystem of the path named above, then run the same command again: the join resumes where it stopped"}
}

func toSet(l []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range l {
		m[x] = true
	}
	return m
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
