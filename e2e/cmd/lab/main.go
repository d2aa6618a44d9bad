// Command lab drives the local multi-host Kubernetes lab (see e2e/lab):
//
//	lab up [HOST...]        bring up cp1 (kubeadm init) and the named hosts (default w1 cp2)
//	lab down                tear everything down
//	lab status              hosts, their processes, and the cluster's nodes
//	lab exec HOST CMD...    run a command on a host
//	lab kubectl ARGS...     kubectl as cluster admin (on cp1)
//	lab logs HOST [LINES]   tail of kubelet, containerd and pod logs
//	lab collect DIR         copy every host's logs into DIR
//	lab join-info           token, CA pin and endpoint as shell variables
//	lab upload-certs        kubeadm upload-certs on cp1; prints the certificate key
//	lab etcd-members        the cluster's etcd members
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"kjoin.dev/kjoin/e2e/lab"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "[lab] "+format+"\n", args...) }

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: lab up|down|status|exec|kubectl|logs|collect|join-info|upload-certs")
	}
	settings := lab.SettingsFromEnv()
	root := settings.Root
	switch args[0] {
	case "up":
		hosts := args[1:]
		if len(hosts) == 0 {
			hosts = []string{"w1", "cp2"}
		}
		l, err := lab.Up(ctx, settings.Options(logf), append([]string{"cp1"}, hosts...)...)
		if err != nil {
			return err
		}
		if err := l.InitControlPlane(ctx, logf); err != nil {
			return err
		}
		logf("lab up: hosts %s; endpoint %s; token %s; CA pin %s", strings.Join(l.HostNames(), " "), lab.Endpoint(), lab.Token, l.CAHash)
		return nil
	case "down":
		return lab.Down(ctx, root)
	}
	l, err := lab.Load(root)
	if err != nil {
		return err
	}
	switch args[0] {
	case "status":
		for _, h := range l.HostNames() {
			r := l.Exec(ctx, h, "sh", "-c", "systemctl is-active kubelet; ctr version >/dev/null 2>&1 && echo containerd: up || echo containerd: down")
			fmt.Printf("%-4s %-12s kubelet: %s", h, l.Hosts[h].IP, r.Stdout)
		}
		r := l.Kubectl(ctx, "get", "nodes", "-o", "wide")
		fmt.Print(r.Stdout, r.Stderr)
		return nil
	case "exec":
		if len(args) < 3 {
			return fmt.Errorf("usage: lab exec HOST CMD...")
		}
		return interactive(l, args[1], args[2:]...)
	case "kubectl":
		return interactive(l, "cp1", append([]string{"kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf"}, args[1:]...)...)
	case "logs":
		if len(args) < 2 {
			return fmt.Errorf("usage: lab logs HOST [LINES]")
		}
		n := 50
		if len(args) > 2 {
			if n, err = strconv.Atoi(args[2]); err != nil {
				return err
			}
		}
		fmt.Print(l.Logs(args[1], n))
		return nil
	case "collect":
		if len(args) < 2 {
			return fmt.Errorf("usage: lab collect DIR")
		}
		for _, h := range l.HostNames() {
			if err := l.CollectLogs(h, args[1]); err != nil {
				return err
			}
		}
		return nil
	case "join-info":
		fmt.Printf("ENDPOINT=%s\nTOKEN=%s\nCA_HASH=%s\n", lab.Endpoint(), lab.Token, l.CAHash)
		return nil
	case "etcd-members":
		ms, err := l.EtcdMembers(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("%-16s %-8s %-10s %s\n", "ID", "NAME", "STATUS", "PEER URLS")
		for _, m := range ms {
			fmt.Printf("%-16x %-8s %-10s %s\n", m.ID, m.Name, m.Status(), strings.Join(m.PeerURLs, ","))
		}
		return nil
	case "upload-certs":
		key, err := l.UploadCerts(ctx)
		if err != nil {
			return err
		}
		fmt.Println(key)
		return nil
	}
	return fmt.Errorf("unknown command %q", args[0])
}

func interactive(l *lab.Lab, host string, argv ...string) error {
	cmd := l.Command(host, argv...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(interface{ ExitCode() int }); ok {
			os.Exit(ee.ExitCode())
		}
		return err
	}
	return nil
}
