package clusterfile

import (
	"fmt"
	"os"
	"strconv"
)

// MaxInputEnv names the environment variable that raises the size limit of
// every file the offline commands read (cluster files and datapath dumps),
// in MiB.
const MaxInputEnv = "NETDRIFT_MAX_INPUT_MIB"

// defaultMaxInputMiB is several times the largest capture the project reads
// in its benchmarks (a 100k-endpoint cluster, its dumps and nft JSON), and
// small enough that an endless pipe given by mistake fails instead of
// filling memory.
const defaultMaxInputMiB = 512

// MaxInputBytes is the size limit of one input file: MaxInputEnv when it is
// set to a positive number of MiB, else the default.
func MaxInputBytes() (int64, error) {
	v := os.Getenv(MaxInputEnv)
	if v == "" {
		return defaultMaxInputMiB << 20, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || n > 1<<20 {
		return 0, fmt.Errorf("%s=%q: want a number of MiB between 1 and %d", MaxInputEnv, v, 1<<20)
	}
	return n << 20, nil
}
