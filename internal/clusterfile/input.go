package clusterfile

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"sync"
)

// Stdin is the path that names standard input on every input flag.
const Stdin = "-"

// InputName is how errors name an input: its path, or "- (standard
// input)".
func InputName(path string) string {
	if path == Stdin {
		return "- (standard input)"
	}
	return path
}

// ReadInput is the one way the offline commands read an input (cluster
// files and datapath dumps): the file at path, or standard input when path
// is "-". Content compressed with gzip is decompressed, recognised by its
// magic bytes (1f 8b) whatever the file is called; other compressions are
// refused with a message. The bytes read (decompressed) are bounded by
// MaxInputBytes: a larger regular, uncompressed file is refused by its
// size before reading, a pipe or a gzip stream once that much was read,
// with an error naming the limit and how to raise it. A device (/dev/zero,
// a terminal) is refused before reading. what names the input in errors
// (a flag, or the path).
//
// Standard input is read once, by one flag: a second read for the same
// flag returns the same bytes, one for another flag is an error (at most
// one flag may be "-").
func ReadInput(path, what string) ([]byte, error) {
	limit, err := MaxInputBytes()
	if err != nil {
		return nil, err
	}
	if path == Stdin {
		return readStdin(what, limit)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	return readLimited(f, path, what, limit)
}

// stdin is what the process read from standard input, and for which flag.
// It is keyed by the *os.File read: a test that replaces os.Stdin reads the
// new one.
var stdin struct {
	sync.Mutex
	file *os.File
	what string
	data []byte
	err  error
}

func readStdin(what string, limit int64) ([]byte, error) {
	stdin.Lock()
	defer stdin.Unlock()
	if stdin.file != nil && stdin.file == os.Stdin {
		if stdin.what != what {
			return nil, fmt.Errorf("%s -: standard input is already the input of %s -: at most one flag may be - (save the other input to a file)",
				what, stdin.what)
		}
		return stdin.data, stdin.err
	}
	stdin.file, stdin.what = os.Stdin, what
	stdin.data, stdin.err = readLimited(os.Stdin, Stdin, what, limit)
	return stdin.data, stdin.err
}

// readLimited reads f (path names it) within limit, decompressing gzip.
func readLimited(f *os.File, path, what string, limit int64) ([]byte, error) {
	name := InputName(path)
	var size int64
	if st, err := f.Stat(); err == nil {
		switch mode := st.Mode(); {
		case mode&os.ModeDevice != 0 && path == Stdin:
			return nil, fmt.Errorf("%s -: standard input is a terminal or a device, not a capture: pipe the capture in (`kubectl get ... -o json | netdrift ... %s -`) or give its file", what, what)
		case mode&os.ModeDevice != 0:
			return nil, fmt.Errorf("%s %s is a device, not a capture file: give the file the capture was saved to", what, name)
		case mode.IsRegular():
			size = st.Size()
		}
	}
	br := bufio.NewReaderSize(f, 64<<10)
	magic, _ := br.Peek(6) // fewer at the end of a short input
	src, gzipped := io.Reader(br), isGzip(magic)
	switch kind := otherCompression(magic); {
	case gzipped:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s %s: gzip: %w", what, name, err)
		}
		defer zr.Close()
		src, size = zr, 0
	case kind != "":
		return nil, fmt.Errorf("%s %s is compressed with %s: decompress it first (gzip is read as it is)", what, name, kind)
	case size > limit:
		return nil, tooBig(what, name, limit, false)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(src, limit+1)); err != nil {
		if gzipped {
			return nil, fmt.Errorf("%s %s: gzip: %w (a truncated or damaged file?)", what, name, err)
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if int64(buf.Len()) > limit {
		return nil, tooBig(what, name, limit, gzipped)
	}
	return buf.Bytes(), nil
}

func tooBig(what, name string, limit int64, gzipped bool) error {
	once := ""
	if gzipped {
		once = " once decompressed"
	}
	return fmt.Errorf("%s %s: larger than %d MiB%s, the input limit (not a capture? set %s=<MiB> to raise it)",
		what, name, limit>>20, once, MaxInputEnv)
}

func isGzip(magic []byte) bool { return len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b }

// otherCompression names the compression whose magic bytes start an
// input, or "".
func otherCompression(magic []byte) string {
	switch {
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return "zstd"
	case bytes.HasPrefix(magic, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		return "xz"
	case len(magic) >= 6 && bytes.HasPrefix(magic, []byte("BZh")) && magic[3] >= '1' && magic[3] <= '9' &&
		magic[4] == 0x31 && magic[5] == 0x41:
		return "bzip2"
	case bytes.HasPrefix(magic, []byte("PK\x03\x04")):
		return "zip"
	}
	return ""
}

// InputSize is the size of the input at path when it is known before
// reading (ok): a regular file that is not gzip'd, or 0 for a file that
// cannot be opened (reading it fails anyway). Standard input, a pipe, a
// device and a gzip'd file are of unknown size.
func InputSize(path string) (n int64, ok bool) {
	if path == Stdin {
		return 0, false
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, true
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, true
	}
	if !st.Mode().IsRegular() {
		return 0, false
	}
	var magic [2]byte
	if n, _ := io.ReadFull(f, magic[:]); isGzip(magic[:n]) {
		return 0, false
	}
	return st.Size(), true
}
