// Command kjoin joins nodes to kubeadm clusters. See kjoin --help.
package main

import (
	"os"

	"kjoin.dev/kjoin/cmd/kjoin/app"
)

func main() { os.Exit(app.Main()) }
