package phases

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"slices"

	"kjoin.dev/kjoin/atomicfile"
)

// JournalPath records, on the node, what a join completed and created, so an interrupted join
// resumes without duplicates and kjoin reset removes exactly what was written.
const JournalPath = "/var/lib/kjoin/journal.json"

// Journal is the on-node record of a join (0600; holds no secrets).
type Journal struct {
	Node     string   `json:"node"`
	Role     string   `json:"role"`
	CAPin    string   `json:"caCertHash,omitempty"`
	Endpoint string   `json:"endpoint,omitempty"`
	Phases   []string `json:"completedPhases"`
	Files    []string `json:"files"`
	// CSR is the last certificate request created; PendingKey holds its key until it is issued.
	CSR          string `json:"csr,omitempty"`
	PendingKey   string `json:"pendingKey,omitempty"`
	EtcdMemberID uint64 `json:"etcdMemberID,omitempty"`
	EtcdPeerURL  string `json:"etcdPeerURL,omitempty"`
	// EtcdLockLease is the lease of the etcd join lock while etcd-join runs: a run killed
	// holding the lock has its lease revoked by the next run instead of waiting for its TTL.
	EtcdLockLease int64 `json:"etcdLockLease,omitempty"`
}

// LoadJournal reads the journal; a missing journal is empty, not an error.
func LoadJournal(e *Env) (*Journal, error) {
	b, err := e.ReadFile(JournalPath)
	if errors.Is(err, fs.ErrNotExist) {
		return &Journal{}, nil
	}
	if err != nil {
		return nil, err
	}
	j := &Journal{}
	if err := json.Unmarshal(b, j); err != nil {
		return nil, err
	}
	return j, nil
}

// Save writes the journal atomically.
func (j *Journal) Save(e *Env) error {
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	if cur, err := e.ReadFile(JournalPath); err == nil && string(cur) == string(b) {
		return nil
	}
	return atomicfile.Write(e.Paths.Of(JournalPath), b, 0o600, 0o700)
}

// Wrote records a file written by the join.
func (j *Journal) Wrote(p string) {
	if !slices.Contains(j.Files, p) {
		j.Files = append(j.Files, p)
	}
}

// Completed records a completed phase.
func (j *Journal) Completed(phase string) {
	if !slices.Contains(j.Phases, phase) {
		j.Phases = append(j.Phases, phase)
	}
}

// Done reports whether a phase completed in an earlier run.
func (j *Journal) Done(phase string) bool { return slices.Contains(j.Phases, phase) }

// Owns reports whether the join wrote the file.
func (j *Journal) Owns(p string) bool { return slices.Contains(j.Files, p) }

// Remove deletes the journal.
func RemoveJournal(e *Env) error {
	err := os.Remove(e.Paths.Of(JournalPath))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
