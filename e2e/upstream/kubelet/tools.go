//go:build tools

// Package tools pins the kubelet the real node runs; `go build` names it by path.
package tools

import _ "k8s.io/kubernetes/cmd/kubelet"
