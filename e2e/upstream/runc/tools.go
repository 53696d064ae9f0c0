//go:build tools

// Package tools pins runc, which the real node's containerd runs containers with; `go build`
// names it by path.
package tools

import _ "github.com/opencontainers/runc"
