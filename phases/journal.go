package phases

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"syscall"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
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
	// EtcdDataDir is the etcd data directory this join found empty: the learner's data in it
	// is the join's own (removed by a failed join's undo and by reset).
	EtcdDataDir string `json:"etcdDataDir,omitempty"`
	// Adopted is set when this journal began on a node already joined to the cluster (by
	// kubeadm): kubeadm's files are then the join's too, for reset.
	Adopted bool `json:"adopted,omitempty"`
	// EnabledKubelet is set when the kubelet unit was not enabled before this join enabled
	// it: reset disables it again (a unit enabled by someone else stays enabled).
	EnabledKubelet bool `json:"enabledKubelet,omitempty"`
	// EnabledApprover is set when a control-plane join enabled kjoin-approver.service (it
	// was not enabled before): reset disables it again.
	EnabledApprover bool `json:"enabledApprover,omitempty"`
}

// LoadJournal reads the journal; a missing journal is empty, not an error. A journal someone
// other than root could have written (not a root-owned 0600 regular file) is refused, and so
// is one that names a pending key anywhere but kjoin's own path: joins and reset act on it.
func LoadJournal(e *host.Env) (*Journal, error) {
	b, err := readJournalFile(e)
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
	if j.PendingKey != "" && j.PendingKey != pendingKeyPath {
		return nil, operr.Newf(operr.Preflight, "the join journal %s names the pending key %q, not kjoin's own %s; kjoin will not act on it", JournalPath, j.PendingKey, pendingKeyPath).
			WithHint("check who changed it; remove the journal (kjoin reset then uses kubeadm's file list) or restore it")
	}
	return j, nil
}

// journalError is the operator error for a journal that cannot be used.
func journalError(err error) error {
	if _, ok := operr.As(err); ok {
		return err
	}
	return operr.Wrap(operr.Other, err, "cannot read the join journal "+JournalPath, "remove it (kjoin reset) if it is corrupt")
}

// readJournalFile reads the journal, refusing one that someone other than root (this
// process's user) could have written, or that is not a plain file: a join and reset delete
// what it lists. The checks and the read use one descriptor (opened without following a
// symlink, without blocking on a FIFO), so the file checked is the file read.
func readJournalFile(e *host.Env) ([]byte, error) {
	hint := "check who changed it; if it is the join's own record, restore it with chown root:root " + JournalPath + " && chmod 600 " + JournalPath + " (or remove it: reset then uses kubeadm's file list)"
	f, err := os.OpenFile(e.Paths.Of(JournalPath), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if errors.Is(err, syscall.ELOOP) {
		return nil, operr.Newf(operr.Preflight, "the join journal %s is not a regular file (a symlink); kjoin will not act on it", JournalPath).WithHint(hint)
	}
	if err != nil {
		return nil, operr.Wrap(operr.Other, err, "cannot open the join journal "+JournalPath, "")
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, operr.Wrap(operr.Other, err, "cannot inspect the join journal "+JournalPath, "")
	}
	if err := checkJournalStat(st, hint); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// checkJournalStat applies the journal's rules to what its open descriptor says.
func checkJournalStat(st os.FileInfo, hint string) error {
	if !st.Mode().IsRegular() {
		return operr.Newf(operr.Preflight, "the join journal %s is not a regular file (%s); kjoin will not act on it", JournalPath, st.Mode().Type()).
			WithHint(hint)
	}
	if st.Mode().Perm() != 0o600 {
		return operr.Newf(operr.Preflight, "the join journal %s has mode %04o, not 0600; kjoin will not act on what it lists", JournalPath, st.Mode().Perm()).
			WithHint(hint)
	}
	// The real process's uid, not e.Geteuid: the file's owner is compared with who acts on it.
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 && int(sys.Uid) != os.Geteuid() {
		return operr.Newf(operr.Preflight, "the join journal %s is owned by uid %d, not root; kjoin will not act on what it lists", JournalPath, sys.Uid).
			WithHint(hint)
	}
	return nil
}

// Save writes the journal atomically.
func (j *Journal) Save(e *host.Env) error {
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	return e.Fx().SaveRecord(JournalPath, b) // left alone when it already says this
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

// RemoveJournal deletes the journal.
func RemoveJournal(e *host.Env) error { return e.Fx().RemoveRecord(JournalPath) }
