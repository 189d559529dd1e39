// Command etcd is an unmodified etcd server built from the Go module proxy
// at the version this module pins; the benchmark runs three of them as the
// peer Grapnel is compared with.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
