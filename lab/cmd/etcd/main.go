// Command etcd is the upstream etcd server (etcdmain), built from the pinned
// go.etcd.io/etcd/server/v3 module for the lab's control plane.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
