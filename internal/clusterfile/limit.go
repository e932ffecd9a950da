package clusterfile

import (
	"bytes"
	"fmt"
	"io"
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

// ReadInput reads one input file, refusing one larger than MaxInputBytes
// (a regular file by its size, before reading; a pipe once that much was
// read) with an error naming the limit and how to raise it, and refusing a
// device (/dev/zero, a terminal) before reading. what names the file in
// errors (a flag, or the path).
func ReadInput(path, what string) ([]byte, error) {
	limit, err := MaxInputBytes()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	tooBig := func() error {
		return fmt.Errorf("%s %s: larger than %d MiB, the input limit (not a capture? set %s=<MiB> to raise it)",
			what, path, limit>>20, MaxInputEnv)
	}
	var size int64
	if st, err := f.Stat(); err == nil {
		switch mode := st.Mode(); {
		case mode.IsRegular():
			if st.Size() > limit {
				return nil, tooBig()
			}
			size = st.Size()
		case mode&os.ModeDevice != 0:
			return nil, fmt.Errorf("%s %s is a device, not a capture file: give the file the capture was saved to", what, path)
		}
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if int64(buf.Len()) > limit {
		return nil, tooBig()
	}
	return buf.Bytes(), nil
}
