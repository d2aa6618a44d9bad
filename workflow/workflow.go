// Package workflow runs an ordered list of typed phases over one state: --skip-phases,
// single-phase runs with their read-only prerequisites, per-phase results and durations, and
// hooks for what a workflow records after each phase (the join's journal). It knows nothing
// of joins, resets or the command line.
package workflow

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

// Phase is one step of a workflow over state S.
type Phase[S any] struct {
	Name  string
	Short string
	// Needs names read-only phases that must run first when this phase runs alone.
	Needs []string
	// ReadOnly phases change nothing; the others report "unchanged" when they found their
	// work already done.
	ReadOnly bool
	// Skip returns a reason to skip the phase for this state ("" runs it). It is asked once.
	Skip func(S) string
	Run  func(ctx context.Context, e *host.Env, s S) error
}

// Result is what one phase did.
type Result struct {
	Name     string
	Status   string // ran | skipped | unchanged | failed | would change (a dry run's plan)
	Reason   string
	Duration time.Duration
}

// Options select phases.
type Options struct {
	// Skip names phases not to run.
	Skip []string
	// Only, when set, runs just these phases (and the read-only phases they need).
	Only []string
	// AfterPhase is called after each completed phase (fault injection in lab tests).
	AfterPhase func(name string)
}

// Hooks are what a workflow adds to the runner.
type Hooks[S any] struct {
	// Changes counts the changes the state records: a phase that is not read-only and made
	// none reports "unchanged". Nil: every phase that ran reports "ran".
	Changes func(S) int
	// Before runs once the phase names are known good, before the first phase (the join
	// loads its journal).
	Before func() error
	// Done is called after each phase that completed (the join records it in its journal).
	Done func(p Phase[S]) error
	// Again says what to do when the run is interrupted between phases.
	Again string
	// DryRun: the changes Changes counts are planned, not made; a phase that is not
	// read-only and planned one reports "would change".
	DryRun bool
}

// Names returns the phase names of a workflow.
func Names[S any](wf []Phase[S]) []string {
	var n []string
	for _, p := range wf {
		n = append(n, p.Name)
	}
	return n
}

// check refuses phase names the workflow does not have (a usage error naming the known ones).
func check[S any](wf []Phase[S], names ...[]string) error {
	known := map[string]bool{}
	for _, p := range wf {
		known[p.Name] = true
	}
	for _, l := range names {
		for _, n := range l {
			if !known[n] {
				return operr.Invalid("", fmt.Sprintf("phase %q: want one of %s", n, strings.Join(Names(wf), ", ")))
			}
		}
	}
	return nil
}

// selected is the set Only names with the phases they need (empty: every phase).
func selected[S any](wf []Phase[S], names []string) map[string]bool {
	only := toSet(names)
	for _, p := range wf {
		if only[p.Name] {
			for _, n := range p.Needs {
				only[n] = true
			}
		}
	}
	return only
}

// Runs reports whether o lets phase name of wf run (its own Skip is not asked): a phase
// that leaves work to a later one asks whether that one will come in this run.
func Runs[S any](wf []Phase[S], o Options, name string) bool {
	only := selected(wf, o.Only)
	for _, p := range wf {
		if p.Name == name {
			return (len(only) == 0 || only[name]) && !toSet(o.Skip)[name]
		}
	}
	return false
}

// Run executes the workflow in order and returns the per-phase results. It stops at the
// first error, wrapped with the phase name.
func Run[S any](ctx context.Context, e *host.Env, s S, wf []Phase[S], o Options, h Hooks[S]) ([]Result, error) {
	if err := check(wf, o.Skip, o.Only); err != nil {
		return nil, err
	}
	if h.Before != nil {
		if err := h.Before(); err != nil {
			return nil, err
		}
	}
	skip := toSet(o.Skip)
	only := selected(wf, o.Only)
	var results []Result
	for _, p := range wf {
		res := Result{Name: p.Name}
		switch {
		case len(only) > 0 && !only[p.Name]:
			continue
		case skip[p.Name]:
			res.Status, res.Reason = "skipped", "--skip-phases"
		case p.Skip != nil:
			if why := p.Skip(s); why != "" {
				res.Status, res.Reason = "skipped", why
			}
		}
		if res.Status == "skipped" {
			e.Debugf(p.Name, "skipped: %s", res.Reason)
			results = append(results, res)
			continue
		}
		if err := ctx.Err(); err != nil {
			return results, operr.Wrap(operr.Other, err, "interrupted before phase "+p.Name, h.Again)
		}
		start := e.Clock.Now()
		before := 0
		if h.Changes != nil {
			before = h.Changes(s)
		}
		err := p.Run(ctx, e, s)
		res.Duration = e.Clock.Since(start)
		res.Status = "ran"
		if !p.ReadOnly && h.Changes != nil {
			switch {
			case h.Changes(s) == before:
				res.Status = "unchanged"
			case h.DryRun:
				res.Status = "would change"
			}
		}
		if err != nil {
			res.Status = "failed"
			results = append(results, res)
			return results, fmt.Errorf("phase %s: %w", p.Name, diskFull(err))
		}
		e.Debugf(p.Name, "done in %s", res.Duration.Round(time.Millisecond))
		results = append(results, res)
		if h.Done != nil {
			if err := h.Done(p); err != nil {
				return results, err
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
