//go:build tools

// Package tools pins the node's upstream components (the kubelet and kube-proxy); `go build`
// names them by path.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
