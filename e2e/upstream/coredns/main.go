// CoreDNS for the real node's cluster DNS (`make node-deps`, ../build-node.sh): upstream's
// coremain with only the plugins localkube's Corefile uses (e2e/localkube/src/realnode.rs), so the
// build skips the cloud providers' SDKs (route53, azure, clouddns) of the full plugin set. Same
// directive order as upstream's core/dnsserver/zdirectives.go.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() {
	dnsserver.Directives = []string{
		"bind",
		"ready",
		"health",
		"errors",
		"log",
		"loadbalance",
		"cache",
		"kubernetes",
		"forward",
	}
}

func main() {
	coremain.Run()
}
