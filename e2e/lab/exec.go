package lab

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Result is the outcome of a command run on a host.
type Result struct {
	Argv     []string
	Stdout   string
	Stderr   string
	ExitCode int
	// Signal is the signal that ended the process, 0 when it exited by itself.
	Signal   syscall.Signal
	Duration time.Duration
	// Err is set when the command could not run or exited non-zero.
	Err error
}

// Error describes a failed command with its output, or nil.
func (r Result) Error() error {
	if r.Err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w\nstdout:\n%s\nstderr:\n%s", strings.Join(r.Argv, " "), r.Err, Tail(r.Stdout, 30), Tail(r.Stderr, 30))
}

// nsenterArgs enter every namespace of a host's PID 1 (its root and working directory with
// its mount namespace). The process stays in the machine's cgroup: run it through the host's
// systemd (systemd-run) where that matters.
func (l *Lab) nsenterArgs(host string) []string {
	return []string{"-t", strconv.Itoa(l.pid1(host)), "-a", "--"}
}

// hostEnv is the environment of every command run on a host: the host's and the lab's tools
// first on PATH.
func hostEnv(root string) []string {
	return []string{
		// /run/lab/bin is the host's own (a kubelet of another version, UseKubelet), then the lab's.
		"PATH=/run/lab/bin:" + filepath.Join(root, "bin") + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root",
		"LANG=C.UTF-8",
	}
}

// Exec runs argv on host (in all of its namespaces) and returns its output and exit code.
func (l *Lab) Exec(ctx context.Context, host string, argv ...string) Result {
	return l.ExecEnv(ctx, host, nil, nil, argv...)
}

// ExecEnv is Exec with extra environment variables and standard input.
func (l *Lab) ExecEnv(ctx context.Context, host string, env []string, stdin io.Reader, argv ...string) Result {
	cmd := exec.CommandContext(ctx, "nsenter", append(l.nsenterArgs(host), argv...)...)
	cmd.Env = append(hostEnv(l.Root), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &errb, stdin
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	r := Result{Argv: argv, Stdout: out.String(), Stderr: errb.String(), Duration: time.Since(start), Err: err}
	if ee, ok := err.(*exec.ExitError); ok {
		r.ExitCode = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.Signal = ws.Signal()
		}
	} else if err != nil {
		r.ExitCode = -1
	}
	return r
}

// Command returns an unstarted command that runs argv on host, for interactive use.
func (l *Lab) Command(host string, argv ...string) *exec.Cmd {
	cmd := exec.Command("nsenter", append(l.nsenterArgs(host), argv...)...)
	cmd.Env = hostEnv(l.Root)
	return cmd
}

// ReadFile reads a file of a host.
func (l *Lab) ReadFile(host, path string) ([]byte, error) {
	return os.ReadFile(l.HostPath(host, path))
}

// run runs a command in the root namespaces and includes its output in the error.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// repoFile finds a file of the kjoin repository by walking up from the working directory.
func repoFile(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%s not found above the working directory (run from the kjoin repository)", rel)
		}
		dir = parent
	}
}

func runScript(ctx context.Context, logf func(string, ...any), name string) error {
	p, err := repoFile(filepath.Join("e2e/scripts", name))
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, p).CombinedOutput()
	if len(out) > 0 {
		logf("%s: %s", name, strings.TrimSpace(string(out)))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	return nil
}

func buildComponents(ctx context.Context) (string, error) {
	return buildWith(ctx, "e2e/components/build.sh", "build components")
}

// buildWith runs one of the repository's cached builds (its progress on stderr) and returns
// the directory it prints.
func buildWith(ctx context.Context, script, what string) (string, error) {
	p, err := repoFile(script)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, p)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s (%s): %w", what, p, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func isMountPoint(p string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && fields[4] == p {
			return true
		}
	}
	return false
}

// Tail is the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func tailFile(p string, n int) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return Tail(string(b), n)
}
