// Package phases is the join and the reset of a node as workflows of small phases
// (workflow.Phase) over typed states: State for a join, ResetState for a reset. Every host
// path, client, clock, command and output comes through host.Env. It knows nothing about the
// command line.
package phases

import (
	"context"
	"fmt"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/workflow"
)

// Phase is one step of the join.
type Phase = workflow.Phase[*State]

// PhaseResult is what one phase did.
type PhaseResult = workflow.Result

// RunOptions select phases.
type RunOptions struct {
	// Skip names phases not to run.
	Skip []string
	// Only, when set, runs just these phases (kjoin join phase <name>).
	Only []string
	// AfterPhase is called after each completed phase (fault injection in lab tests).
	AfterPhase func(name string)
}

// Run executes the join workflow in order and returns the per-phase results. It stops at the
// first error, wrapped with the phase name. After each phase the journal records it (saved
// once the join has changed the host, so a refused join writes nothing).
//
// In a dry run a phase's change is what it plans (writes, API calls, repairs), and a phase that
// plans one reports "would change" rather than "ran".
func Run(ctx context.Context, e *host.Env, s *State, wf []Phase, o RunOptions) ([]PhaseResult, error) {
	e = s.effects(e, s.Opts.DryRun, s.journalFirst)
	s.etcdJoinFollows = workflow.Runs(wf, workflow.Options{Skip: o.Skip, Only: o.Only}, EtcdJoin.Name)
	results, err := workflow.Run(ctx, e, s, wf, workflow.Options{Skip: o.Skip, Only: o.Only, AfterPhase: o.AfterPhase}, workflow.Hooks[*State]{
		Changes: func(s *State) int {
			if s.Opts.DryRun {
				return s.changeCount() + len(s.Repairs)
			}
			return s.changeCount()
		},
		Again:  "run the same command again to finish the join",
		DryRun: s.Opts.DryRun,
		Before: func() error {
			if s.Started.IsZero() {
				s.Started = e.Clock.Now()
			}
			if s.Journal == nil && !s.Opts.DryRun {
				j, err := LoadJournal(e)
				if err != nil {
					return journalError(err)
				}
				s.Journal = j
			}
			return nil
		},
		Done: func(p Phase) error {
			if s.Journal == nil || s.Opts.DryRun {
				return nil
			}
			s.Journal.Completed(p.Name)
			// Read-only phases leave no trace on a host the join has not changed yet: a
			// refused join (preflight, discovery) writes nothing, not even the journal.
			if !p.ReadOnly || e.Exists(JournalPath) {
				if err := s.Journal.Save(e); err != nil {
					return operr.Wrap(operr.Other, err, "cannot save the join journal", "")
				}
			}
			return nil
		},
	})
	return results, err
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
