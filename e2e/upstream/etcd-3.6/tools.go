//go:build tools

// Package tools pins etcd v3.6.16's three binaries for e2e/upstream/build-etcd.sh. The etcd
// modules' own replace lines only act in their own builds, so this module requires every
// go.etcd.io/etcd/* module at the same version itself (see go.mod).
package tools

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/etcdutl/v3"
	_ "go.etcd.io/etcd/server/v3"
)
